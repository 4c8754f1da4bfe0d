import { sql, type Kysely } from 'kysely';

// Runs record where their work came from: the surface (the console, the code host, a chat, a
// tracker) and, on a chat or tracker surface, the thread or issue it came from. Runs made
// before say 'console', except those a code-host webhook started (their creator is
// `code_host:<author>`).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`update runs set surface = 'code_host' where created_by like 'code_host:%'`.execute(db);
  await sql`alter table runs add constraint runs_surface check (surface in ('console', 'code_host', 'chat_a', 'chat_b', 'tracker_a', 'tracker_b'))`.execute(db);
  await db.schema.alterTable('runs').addColumn('external_ref', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('runs').dropColumn('external_ref').execute();
  await sql`alter table runs drop constraint runs_surface`.execute(db);
  await sql`update runs set surface = 'console'`.execute(db);
}
