import { sql, type Kysely } from 'kysely';

// A delivery is taken in once per delivery id, but a refusal is recorded each time, even one
// whose signature was valid (a stale Linear timestamp, a body that is not JSON): its id must not
// stand for the delivery, or the sender's next attempt with the same id, fresh and well formed,
// would be answered `duplicate` and its work never done (and a second refusal would break the
// unique index). `taken` marks the one row of a delivery taken in; rows from before it count as
// taken when they were verified and kept a payload (a refusal never had one).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table webhook_deliveries add column taken boolean not null default false`.execute(db);
  await sql`update webhook_deliveries set taken = true where signature_valid and payload is not null`.execute(db);
  await sql`drop index webhook_deliveries_once`.execute(db);
  await sql`create unique index webhook_deliveries_once on webhook_deliveries (surface, delivery_id) where taken`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index webhook_deliveries_once`.execute(db);
  await sql`alter table webhook_deliveries drop column taken`.execute(db);
  await sql`create unique index webhook_deliveries_once on webhook_deliveries (surface, delivery_id) where signature_valid`.execute(db);
}
