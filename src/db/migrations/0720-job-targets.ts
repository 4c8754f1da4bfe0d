import type { Kysely } from 'kysely';

// A job may name the one runner that takes it (a sandbox host's worker, by host id): a run whose
// sandbox is placed on another host is driven there. Null: any runner.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('jobs').addColumn('target', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('jobs').dropColumn('target').execute();
}
