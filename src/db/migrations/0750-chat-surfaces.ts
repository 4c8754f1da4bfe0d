import { sql, type Kysely } from 'kysely';

// The chat surfaces' core (src/integrations/chat): a thread per run, every message seen (one
// message is one effect), every post made by its stable key, and each confirmation's token.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table surface_threads (
      run_id text primary key,
      surface text not null,
      room_id text not null,
      team text not null,
      root_id text,
      url text,
      requested_by text not null,
      requested_by_name text not null,
      mirrored_seq integer not null default 0,
      last_role text,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index surface_threads_root on surface_threads (surface, root_id) where root_id is not null`.execute(db);
  await sql`
    create table surface_messages (
      surface text not null,
      message_id text not null,
      run_id text,
      effect text,
      created_at timestamptz not null default now(),
      primary key (surface, message_id)
    )`.execute(db);
  await sql`
    create table surface_posts (
      key text primary key,
      post_id text,
      claimed_by text not null,
      claimed_at timestamptz not null default now(),
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table surface_confirmations (
      token_hash text primary key,
      run_id text not null,
      seq integer not null,
      room_id text not null,
      post_id text,
      decided_by text,
      created_at timestamptz not null default now()
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table surface_confirmations`.execute(db);
  await sql`drop table surface_posts`.execute(db);
  await sql`drop table surface_messages`.execute(db);
  await sql`drop table surface_threads`.execute(db);
}
