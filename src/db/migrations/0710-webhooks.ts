import { sql, type Kysely } from 'kysely';

// Inbound webhooks: every delivery as received (a valid one once per delivery id and surface,
// a forged one each time, since its id proves nothing), the code-host work items runs came
// from (issue, pull request).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table webhook_deliveries (
      id bigserial primary key,
      surface text not null,
      delivery_id text not null,
      event text not null,
      action text,
      signature_valid boolean not null,
      received_at timestamptz not null default now(),
      times_received integer not null default 1,
      outcome text not null,
      detail text,
      run_id text,
      payload jsonb
    )`.execute(db);
  await sql`create unique index webhook_deliveries_once on webhook_deliveries (surface, delivery_id) where signature_valid`.execute(db);
  await sql`create index webhook_deliveries_recent on webhook_deliveries (surface, received_at desc, id desc)`.execute(db);
  await sql`
    create table code_host_work (
      run_id text primary key,
      team_name text not null,
      repository text not null,
      issue_number integer,
      pull_number integer,
      pull_url text,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index code_host_work_issue on code_host_work (repository, issue_number, team_name) where issue_number is not null`.execute(db);
  await sql`create index code_host_work_pull on code_host_work (repository, pull_number) where pull_number is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table code_host_work`.execute(db);
  await sql`drop table webhook_deliveries`.execute(db);
}
