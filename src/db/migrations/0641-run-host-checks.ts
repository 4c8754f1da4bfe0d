import { sql, type Kysely } from 'kysely';

// What the host itself knows of a conversation, to check the agent runtime's events against:
// the tool calls it saw the model request and what became of each (run_calls), the turn end it
// accepted (run_tasks.turn_end), and each line of the model proxy's ledger a task was charged
// for, once (run_spend).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table run_calls (
      conversation text not null,
      call_id text not null,
      name text not null,
      state text not null check (state in ('open', 'settled')),
      proposed boolean not null default false,
      primary key (conversation, call_id)
    )`.execute(db);
  await db.schema.alterTable('run_tasks').addColumn('turn_end_seq', 'integer').execute();
  await db.schema.alterTable('run_tasks').addColumn('turn_end', 'jsonb').execute();
  await sql`
    create table run_spend (
      ledger_id bigint primary key,
      run_id text not null references runs (id),
      task_id text not null,
      sandbox_id text not null,
      cost_usd double precision not null,
      at timestamptz not null default now()
    )`.execute(db);
  await sql`create index run_spend_sandbox on run_spend (sandbox_id, ledger_id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table run_spend`.execute(db);
  await db.schema.alterTable('run_tasks').dropColumn('turn_end').execute();
  await db.schema.alterTable('run_tasks').dropColumn('turn_end_seq').execute();
  await sql`drop table run_calls`.execute(db);
}
