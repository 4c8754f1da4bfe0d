import type { Kysely } from 'kysely';

// Archiving claims the team first (archiving_at), then revokes its model-proxy keys, then
// archives it; changes to a team being archived are refused.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('teams').addColumn('archiving_at', 'timestamptz').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('teams').dropColumn('archiving_at').execute();
}
