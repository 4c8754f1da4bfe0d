import { sql, type Kysely, type Transaction } from 'kysely';
import { countEach } from '../../db/count-each.ts';
import type { Database } from '../../db/schema.ts';

type Q = Kysely<Database> | Transaction<Database>;

export type DestinationRow = Awaited<ReturnType<typeof getDestination>> & {};

export function getDestination(db: Q, name: string) {
  return db.selectFrom('destinations').selectAll().where('name', '=', name).executeTakeFirst();
}

export function listDestinations(db: Q, after: string | null, limit: number) {
  let q = db.selectFrom('destinations').selectAll().orderBy('name').limit(limit);
  if (after !== null) q = q.where('name', '>', after);
  return q.execute();
}

export function allDestinations(db: Q) {
  return db.selectFrom('destinations').selectAll().orderBy('name').execute();
}

export async function existingNames(db: Q, names: string[]): Promise<Set<string>> {
  if (names.length === 0) return new Set();
  const rows = await db.selectFrom('destinations').select('name').where('name', 'in', names).execute();
  return new Set(rows.map((r) => r.name));
}

/** Per value of inject_secret ("secret:<name>", "mcp:<server>"): the destinations injecting it. */
export function countInjecting(db: Q, injectSecrets: string[]): Promise<Map<string, number>> {
  return countEach(db, injectSecrets, (value) => db.selectFrom('destinations').select((eb) => eb.fn.countAll<number>().as('n')).where('inject_secret', '=', value));
}

/** Stops destinations injecting a removed secret; answers their names. */
export async function clearInjectSecret(db: Transaction<Database>, injectSecret: string): Promise<string[]> {
  const rows = await db
    .updateTable('destinations')
    .set({ inject_secret: null, updated_at: sql`now()`, row_version: sql`nextval('row_version_seq')` })
    .where('inject_secret', '=', injectSecret)
    .returning('name')
    .execute();
  return rows.map((r) => r.name);
}
