import { sql, type Kysely } from 'kysely';

// GitHub and Jira sign the body of a delivery but not its id: a captured comment could be posted
// again under a fresh delivery id and answered a second time. `subject` is the sender's own id of
// what a delivery reports when a copy would repeat its effect (a comment's id); a delivery taken
// in holds it, and a later delivery of the same subject under another id is a replay, not work.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table webhook_deliveries add column subject text`.execute(db);
  await sql`create unique index webhook_deliveries_subject_once on webhook_deliveries (surface, subject) where taken and subject is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index webhook_deliveries_subject_once`.execute(db);
  await sql`alter table webhook_deliveries drop column subject`.execute(db);
}
