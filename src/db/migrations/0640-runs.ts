import { sql, type Kysely } from 'kysely';

// Runs become real: a run's conversation is an append-only log of posts (run, seq), each role's
// work a task with its own conversation in the role's sandbox, and the agent runtime's events
// are recorded once by (task, event seq) so a worker that dies and one that takes over never
// repeat a post. Team memory keeps the outcome of each completed run.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('runs')
    .addColumn('work_item_id', 'text', (c) => c.notNull().defaultTo(sql`gen_random_uuid()::text`))
    .addColumn('lead', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('waiting_for', 'jsonb')
    .addColumn('open_question_seq', 'integer')
    .addColumn('delivery', 'jsonb')
    .addColumn('agent_versions', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('cost_usd', 'double precision', (c) => c.notNull().defaultTo(0))
    .addColumn('last_seq', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('rework_used', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('trace_id', 'text')
    .addColumn('cancel_requested_at', 'timestamptz')
    // Who drives the run now: one worker at a time, through a lease with a fencing generation.
    .addColumn('owner', 'text')
    .addColumn('owner_until', 'timestamptz')
    .addColumn('owner_generation', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.createIndex('runs_state_created').on('runs').columns(['state', 'created_at', 'id']).execute();

  await db.schema
    .createTable('run_posts')
    .addColumn('run_id', 'text', (c) => c.notNull().references('runs.id'))
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('kind', 'text', (c) =>
      c.notNull().check(sql`kind in ('notice','working','question','answer','completed','failed','canceled','task','reply','artifact','command_result')`),
    )
    .addColumn('role', 'text')
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('data', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    // What produced the post (an agent event `task:<id>:<seq>`, a request id): once each.
    .addColumn('source', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('run_posts_pk', ['run_id', 'seq'])
    .execute();
  await sql`create unique index run_posts_source on run_posts (run_id, source) where source is not null`.execute(db);

  await db.schema
    .createTable('run_tasks')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('run_id', 'text', (c) => c.notNull().references('runs.id'))
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull().check(sql`state in ('queued','running','waiting','done','failed','cancelled')`))
    // The post that gave the task, and the input the role's next turn gets.
    .addColumn('post_seq', 'integer', (c) => c.notNull())
    .addColumn('input', 'jsonb', (c) => c.notNull())
    .addColumn('agent_version', 'integer')
    .addColumn('sandbox_id', 'text')
    .addColumn('conversation', 'text', (c) => c.notNull())
    .addColumn('events_seen', 'integer', (c) => c.notNull().defaultTo(0))
    // The conversation's last event seq when the current turn began: events after it are this turn's.
    .addColumn('turn_from', 'integer')
    .addColumn('iterations', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('cost_usd', 'double precision', (c) => c.notNull().defaultTo(0))
    .addColumn('outcome', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('started_at', 'timestamptz')
    .addColumn('finished_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('run_tasks_run').on('run_tasks').columns(['run_id', 'created_at']).execute();

  await db.schema
    .createTable('team_memory')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('team_name', 'text', (c) => c.notNull())
    .addColumn('run_id', 'text', (c) => c.notNull().references('runs.id'))
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('team_memory_team').on('team_memory').columns(['team_name', 'id']).execute();
  await sql`create unique index team_memory_run on team_memory (run_id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('team_memory').execute();
  await db.schema.dropTable('run_tasks').execute();
  await db.schema.dropTable('run_posts').execute();
  await db.schema.dropIndex('runs_state_created').execute();
  for (const c of ['work_item_id', 'lead', 'waiting_for', 'open_question_seq', 'delivery', 'agent_versions', 'cost_usd', 'last_seq', 'rework_used', 'trace_id', 'cancel_requested_at', 'owner', 'owner_until', 'owner_generation']) {
    await db.schema.alterTable('runs').dropColumn(c).execute();
  }
}
