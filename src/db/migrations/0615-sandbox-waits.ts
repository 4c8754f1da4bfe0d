import { sql, type Kysely } from 'kysely';

// Runs that wait for room on a sandbox host. A placement that finds no host with room for the
// sandbox it must make or wake records its claim here (once; `since` keeps its place in line),
// and the hosts give room to the oldest first: they put idle sandboxes to sleep early and queue
// the waiting runs again. `host_id` is set when only one host will do (the claim's sleeping
// sandbox lives there); `run_id` is what is queued again.
// A host also records why a provider it probed cannot run there (`provider_problems`, by
// provider), so a task refused for want of a host says what to fix.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('sandbox_hosts').addColumn('provider_problems', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`)).execute();
  await db.schema
    .createTable('sandbox_waits')
    .addColumn('claim_id', 'text', (c) => c.primaryKey())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('team_id', 'integer', (c) => c.notNull())
    .addColumn('team', 'text', (c) => c.notNull())
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('host_id', 'text')
    .addColumn('environment', 'text', (c) => c.notNull())
    .addColumn('vcpus', 'integer', (c) => c.notNull())
    .addColumn('memory_mib', 'integer', (c) => c.notNull())
    .addColumn('disk_gib', 'integer', (c) => c.notNull())
    .addColumn('since', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('sandbox_waits_since').on('sandbox_waits').columns(['provider', 'since']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('sandbox_waits').execute();
  await db.schema.alterTable('sandbox_hosts').dropColumn('provider_problems').execute();
}
