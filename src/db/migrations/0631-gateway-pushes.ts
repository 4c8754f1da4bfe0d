import { sql, type Kysely } from 'kysely';

// Every ref a code host accepted from a sandbox's git push, as the gateway read it from the
// upstream's own report: the run engine sets a run's delivery from here, never from what the
// agent says it pushed.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table git_pushes (
      id bigserial primary key,
      at timestamptz not null default now(),
      sandbox_id text not null,
      team_id integer not null,
      role text not null,
      destination text,
      repository text not null,
      ref text not null,
      old_commit text not null,
      new_commit text not null
    )`.execute(db);
  await sql`create index git_pushes_sandbox on git_pushes (sandbox_id, id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table git_pushes`.execute(db);
}
