import { sql, type Kysely } from 'kysely';

// Finished spans wait here for the OTLP collector (src/telemetry/outbox.ts) instead of each
// recording of a run's events queueing a job of its own: a job per recording was five statements
// (enqueue, claim, the hosts alive, settle) on every agent step's path, where one insert now is.
// Jobs a previous version queued (telemetry.export-spans) still run and send what they carry.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table trace_outbox (
      id bigserial primary key,
      span jsonb not null,
      created_at timestamptz not null default now(),
      lease_owner text,
      lease_until timestamptz
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table trace_outbox`.execute(db);
}
