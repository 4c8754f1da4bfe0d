import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { keyset, type CursorValue } from '../../db/pagination.ts';
import type { DocumentScope } from './documents.tables.ts';

type Q = Kysely<Database> | Transaction<Database>;

export function getDocument(db: Q, scope: DocumentScope, owner: string, name: string) {
  return db.selectFrom('context_documents').selectAll().where('scope', '=', scope).where('owner', '=', owner).where('name', '=', name).executeTakeFirst();
}

export function listDocuments(db: Q, scope: DocumentScope, owner: string, cursor: CursorValue[] | null, limit: number) {
  const q = db
    .selectFrom('context_documents')
    .select(['scope', 'owner', 'name', 'media_type', 'description', 'size_bytes', 'sha256', 'created_by', 'created_at', 'updated_at', 'row_version'])
    .where('scope', '=', scope)
    .where('owner', '=', owner);
  return keyset(q, ['name'], 'asc', cursor, limit).execute();
}

/** How many documents an owner holds and their total size, leaving one name out (the one being replaced). */
export async function ownerTotals(db: Q, scope: DocumentScope, owner: string, except: string) {
  const r = await db
    .selectFrom('context_documents')
    .select((eb) => [eb.fn.countAll<number>().as('n'), sql<number>`coalesce(sum(size_bytes), 0)`.as('bytes')])
    .where('scope', '=', scope)
    .where('owner', '=', owner)
    .where('name', '!=', except)
    .executeTakeFirstOrThrow();
  return { count: Number(r.n), bytes: Number(r.bytes) };
}

export function insertDocument(
  db: Q,
  row: { scope: DocumentScope; owner: string; name: string; media_type: string; description: string; content: string; size_bytes: number; sha256: string; created_by: string },
) {
  return db.insertInto('context_documents').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function deleteDocumentsOf(db: Q, scope: DocumentScope, owner: string): Promise<number> {
  const rows = await db.deleteFrom('context_documents').where('scope', '=', scope).where('owner', '=', owner).returning('name').execute();
  return rows.length;
}

/** The documents of an agent and a team, agent's first, each by name. */
export function documentsOfRole(db: Q, agent: string, team: string | null) {
  return db
    .selectFrom('context_documents')
    .selectAll()
    .where((eb) => {
      const mine = eb.and([eb('scope', '=', 'agent'), eb('owner', '=', agent)]);
      return team === null ? mine : eb.or([mine, eb.and([eb('scope', '=', 'team'), eb('owner', '=', team)])]);
    })
    .orderBy('scope')
    .orderBy('name')
    .execute();
}
