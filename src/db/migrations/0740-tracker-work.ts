import { sql, type Kysely } from 'kysely';

// The issue-tracker work items runs came from (tracker_a, tracker_b): the issue, the agent
// session on it when the tracker has one, who asked. One run per issue and team on a surface.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table tracker_work (
      run_id text primary key,
      surface text not null check (surface in ('tracker_a', 'tracker_b')),
      team_name text not null,
      issue_id text not null,
      issue_key text not null,
      issue_url text,
      session_id text,
      requested_by text,
      requested_by_name text,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index tracker_work_issue on tracker_work (surface, issue_id, team_name)`.execute(db);
  await sql`create index tracker_work_session on tracker_work (surface, session_id) where session_id is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table tracker_work`.execute(db);
}
