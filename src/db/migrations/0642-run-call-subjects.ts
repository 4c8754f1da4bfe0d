import type { Kysely } from 'kysely';

// What each tool call the host saw works on (its file, its command), taken from the model's own
// call, so its result's post can say it ("write_file src/app.ts: done").
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('run_calls').addColumn('subject', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('run_calls').dropColumn('subject').execute();
}
