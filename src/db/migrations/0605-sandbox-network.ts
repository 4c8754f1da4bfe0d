import { sql, type Kysely } from 'kysely';

// A sandbox's network identity: the point-to-point link its provider sets up (host end, where
// the gateway answers it; sandbox end) and the host that runs it. The gateway finds a
// sandbox by this pair, so one pair belongs to at most one sandbox that is not destroyed.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('sandboxes')
    .addColumn('host_id', 'text')
    .addColumn('host_address', 'text')
    .addColumn('sandbox_address', 'text')
    .execute();
  await sql`create unique index sandboxes_network on sandboxes (host_address, sandbox_address) where state <> 'destroyed'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index sandboxes_network`.execute(db);
  await db.schema.alterTable('sandboxes').dropColumn('host_id').dropColumn('host_address').dropColumn('sandbox_address').execute();
}
