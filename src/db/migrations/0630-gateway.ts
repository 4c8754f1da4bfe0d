import { sql, type Kysely } from 'kysely';

// The credential gateway's tables: the deployment CA (one row; its private key sealed like a
// secret) and every refusal, which the run engine turns into `notice` posts of the run.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table gateway_ca (
      id text primary key check (id = 'deployment'),
      certificate text not null,
      key_sealed text not null,
      key_id text not null,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table egress_events (
      id bigserial primary key,
      at timestamptz not null default now(),
      sandbox_id text not null,
      team_id integer not null,
      role text not null,
      method text not null,
      host text not null,
      path text not null,
      destination text,
      rule text not null,
      reason text not null,
      enforced boolean not null default true
    )`.execute(db);
  await sql`create index egress_events_sandbox on egress_events (sandbox_id, id)`.execute(db);
  await sql`create index egress_events_team on egress_events (team_id, id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table egress_events`.execute(db);
  await sql`drop table gateway_ca`.execute(db);
}
