import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from './schema.ts';
import { problems } from '../errors/problems.ts';

type Where = Record<string, string | number | boolean | null>;
type AnyDb = Kysely<any>;

function applyWhere<Q extends { where: (...args: any[]) => Q }>(q: Q, where: Where): Q {
  for (const [col, value] of Object.entries(where)) q = value === null ? q.where(col, 'is', null) : q.where(col, '=', value);
  return q;
}

async function missOrStale(db: AnyDb, table: string, where: Where, what: string, label: string): Promise<never> {
  const exists = await applyWhere(db.selectFrom(table).select(sql`1`.as('one')), where).executeTakeFirst();
  throw exists ? problems.preconditionFailed() : problems.notFound(what, label);
}

/**
 * The optimistic-concurrency write: updates the row only while its row_version is the one
 * the caller read (If-Match), in one statement, so two writers holding one ETag cannot both
 * win. Bumps row_version (and updated_at unless told not to). 404 when the row is gone,
 * 412 when it changed.
 */
export async function updateIfVersion<R = any>(
  db: Kysely<Database> | Transaction<Database>,
  opts: { table: string; where: Where; expected: number; set: Record<string, unknown>; what: string; label: string; touch?: boolean },
): Promise<R> {
  const anyDb = db as unknown as AnyDb;
  const set: Record<string, unknown> = { ...opts.set, row_version: sql`nextval('row_version_seq')` };
  if (opts.touch !== false) set.updated_at = sql`now()`;
  const row = await applyWhere(anyDb.updateTable(opts.table).set(set), opts.where)
    .where('row_version', '=', opts.expected)
    .returningAll()
    .executeTakeFirst();
  if (!row) return missOrStale(anyDb, opts.table, opts.where, opts.what, opts.label);
  return row as R;
}

/** Deletes the row only while its row_version is the one the caller read; 404 or 412 otherwise. */
export async function deleteIfVersion<R = any>(
  db: Kysely<Database> | Transaction<Database>,
  opts: { table: string; where: Where; expected: number; what: string; label: string },
): Promise<R> {
  const anyDb = db as unknown as AnyDb;
  const row = await applyWhere(anyDb.deleteFrom(opts.table), opts.where)
    .where('row_version', '=', opts.expected)
    .returningAll()
    .executeTakeFirst();
  if (!row) return missOrStale(anyDb, opts.table, opts.where, opts.what, opts.label);
  return row as R;
}

/** Bumps a row's version without other changes (a child of it changed, e.g. an avatar). */
export async function touchVersion(db: Kysely<Database> | Transaction<Database>, table: string, where: Where): Promise<number | null> {
  const row = await applyWhere((db as unknown as AnyDb).updateTable(table).set({ row_version: sql`nextval('row_version_seq')` }), where)
    .returning('row_version')
    .executeTakeFirst();
  return row ? Number(row.row_version) : null;
}

/** Serializes writers of one logical thing (e.g. "the set of enabled admins") inside a transaction. */
export async function lockKey(trx: Transaction<Database>, key: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext(${key}))`.execute(trx);
}
