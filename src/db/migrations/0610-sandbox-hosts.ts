import { sql, type Kysely } from 'kysely';

// Sandbox hosts and placement. A host registers (address, the providers it can run, its
// capacity) and heartbeats; a host whose heartbeat is older than the configured bound is dead.
// A sandbox records the size it holds on its host (capacity is the sum over the host's live
// sandboxes), when it last did work (the idle sweep) and when its host freed its resources
// (archiving marks rows destroyed in its transaction; the owning host frees them later).
// A claim is one run's hold on a sandbox: a role's `concurrent_runs` bounds claims per sandbox.
// `local` becomes an environment provider beside the spec's `microvm` and `hosted`.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('sandbox_hosts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('providers', sql`text[]`, (c) => c.notNull())
    .addColumn('microvm_via_local', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('vcpus', 'integer', (c) => c.notNull())
    .addColumn('memory_mib', 'integer', (c) => c.notNull())
    .addColumn('disk_gib', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('heartbeat_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('stopped_at', 'timestamptz')
    .execute();

  await db.schema
    .alterTable('sandboxes')
    .addColumn('environment', 'text')
    .addColumn('host_interface', 'text')
    .addColumn('vcpus', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('memory_mib', 'integer', (c) => c.notNull().defaultTo(1024))
    .addColumn('disk_gib', 'integer', (c) => c.notNull().defaultTo(10))
    .addColumn('created', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('failure', 'text')
    .addColumn('last_active_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('released_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('sandboxes_host').on('sandboxes').columns(['host_id', 'state']).execute();
  await db.schema.createIndex('sandboxes_team_role').on('sandboxes').columns(['team_id', 'role']).execute();

  await db.schema
    .createTable('sandbox_claims')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('sandbox_id', 'text', (c) => c.notNull().references('sandboxes.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('sandbox_claims_sandbox').on('sandbox_claims').column('sandbox_id').execute();

  await sql`alter table environments drop constraint environments_provider_check`.execute(db);
  await sql`alter table environments add constraint environments_provider_check check (provider in ('microvm','hosted','local'))`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table environments drop constraint environments_provider_check`.execute(db);
  await sql`alter table environments add constraint environments_provider_check check (provider in ('microvm','hosted'))`.execute(db);
  await db.schema.dropTable('sandbox_claims').execute();
  await db.schema.dropIndex('sandboxes_host').execute();
  await db.schema.dropIndex('sandboxes_team_role').execute();
  for (const c of ['environment', 'host_interface', 'vcpus', 'memory_mib', 'disk_gib', 'created', 'failure', 'last_active_at', 'released_at']) {
    await db.schema.alterTable('sandboxes').dropColumn(c).execute();
  }
  await db.schema.dropTable('sandbox_hosts').execute();
}
