import type { Kysely } from 'kysely';

// Each subscriber's own settings for a channel (POST /users/me/subscriptions/properties): muted,
// its color (null: the server picks one from the channel id), pinned, and the notification
// choices (null: follow the user's global setting). Frozen: never import application code here.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('chat_subscriptions')
    .addColumn('is_muted', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('color', 'text')
    .addColumn('pin_to_top', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('desktop_notifications', 'boolean')
    .addColumn('audible_notifications', 'boolean')
    .addColumn('push_notifications', 'boolean')
    .addColumn('email_notifications', 'boolean')
    .addColumn('wildcard_mentions_notify', 'boolean')
    .execute();
}
