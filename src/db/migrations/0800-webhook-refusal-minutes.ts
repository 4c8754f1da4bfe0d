import { sql, type Kysely } from 'kysely';

// The cap on recording webhook refusals without a valid signature counts per surface and minute
// in the database, so that every process sharing it counts against one cap (it counted in each
// process's memory). Only the current minute's row of a surface is kept: the count that moves a
// surface into a new minute removes the old row.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create table webhook_refusal_minutes (
    surface text not null,
    minute integer not null,
    count integer not null,
    primary key (surface, minute)
  )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table webhook_refusal_minutes`.execute(db);
}
