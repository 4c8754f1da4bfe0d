import { sql, type Kysely } from 'kysely';

// The five integrations, one row each from the start (so each has an ETag to write against),
// the settings generation every PUT takes, and which generation each sandbox host's gateway
// has loaded (`status.applied`).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create sequence integration_generation_seq`.execute(db);
  await sql`
    create table integrations (
      kind text primary key check (kind in ('chat_a', 'chat_b', 'code_host', 'tracker_a', 'tracker_b')),
      enabled boolean not null default false,
      settings jsonb not null default '{}'::jsonb,
      generation bigint not null default 0,
      updated_by text,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      row_version bigint not null default nextval('row_version_seq')
    )`.execute(db);
  await sql`insert into integrations (kind) values ('chat_a'), ('chat_b'), ('code_host'), ('tracker_a'), ('tracker_b')`.execute(db);
  await sql`
    create table integration_loads (
      host_address text primary key,
      generation bigint not null,
      loaded_at timestamptz not null default now()
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table integration_loads`.execute(db);
  await sql`drop table integrations`.execute(db);
  await sql`drop sequence integration_generation_seq`.execute(db);
}
