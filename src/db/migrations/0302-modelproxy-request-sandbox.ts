import { sql, type Kysely } from 'kysely';

// The run engine reads the ledger lines of one sandbox's calls by their request id's start (the
// gateway names the sandbox there): a prefix search needs a pattern index.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index mp_request_log_request_id on mp_request_log (request_id text_pattern_ops)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index mp_request_log_request_id`.execute(db);
}
