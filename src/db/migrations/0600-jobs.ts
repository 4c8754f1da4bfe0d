import { sql, type Kysely } from 'kysely';

// The durable job queue: one row per job. A job is queued (due at run_at), running under a
// lease (lease_owner until lease_until, fenced by generation, which each claim increments),
// done, or failed (attempts used up; last_error says why). A key makes enqueueing idempotent.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('jobs')
    .addColumn('id', 'bigint', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('payload', 'jsonb', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.unique())
    .addColumn('state', 'text', (c) => c.notNull().defaultTo('queued').check(sql`state in ('queued','running','done','failed')`))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('max_attempts', 'integer', (c) => c.notNull().check(sql`max_attempts >= 1`))
    .addColumn('run_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('generation', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('lease_owner', 'text')
    .addColumn('lease_until', 'timestamptz')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('finished_at', 'timestamptz')
    .execute();
  // What a runner claims: due queued jobs, and running jobs whose lease ran out.
  await sql`create index jobs_due on jobs (run_at, id) where state = 'queued'`.execute(db);
  await sql`create index jobs_leases on jobs (lease_until) where state = 'running'`.execute(db);
  // The CLI's and the metrics' views, and pruning of old done jobs.
  await sql`create index jobs_state on jobs (state, kind, id)`.execute(db);
  await sql`create index jobs_finished on jobs (finished_at) where state = 'done'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('jobs').execute();
}
