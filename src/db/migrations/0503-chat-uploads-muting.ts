import { sql, type Kysely } from 'kysely';

// Uploaded files (POST /user_uploads), kept in the database as the chat's avatars and emoji
// images are, so every chat process on one database serves them; which messages link each one;
// and the people each user has muted. Frozen: never import application code here.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('chat_attachments')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('realm_id', 'integer', (c) => c.notNull().references('chat_realms.id').onDelete('cascade'))
    .addColumn('owner_id', 'integer', (c) => c.notNull().references('chat_users.id').onDelete('cascade'))
    // `{realm_id}/{2 hex}/{24 random}/{file name}`: the address after /user_uploads/.
    .addColumn('path_id', 'text', (c) => c.notNull().unique())
    .addColumn('file_name', 'text', (c) => c.notNull())
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('size', 'bigint', (c) => c.notNull())
    .addColumn('content', 'bytea', (c) => c.notNull())
    .addColumn('create_time', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('chat_attachments_owner').on('chat_attachments').columns(['owner_id', 'id']).execute();
  await db.schema.createIndex('chat_attachments_realm').on('chat_attachments').columns(['realm_id']).execute();

  await db.schema
    .createTable('chat_attachment_messages')
    .addColumn('attachment_id', 'integer', (c) => c.notNull().references('chat_attachments.id').onDelete('cascade'))
    .addColumn('message_id', 'integer', (c) => c.notNull().references('chat_messages.id').onDelete('cascade'))
    .addPrimaryKeyConstraint('chat_attachment_messages_pkey', ['attachment_id', 'message_id'])
    .execute();
  await db.schema.createIndex('chat_attachment_messages_message').on('chat_attachment_messages').columns(['message_id']).execute();

  await db.schema
    .createTable('chat_muted_users')
    .addColumn('user_id', 'integer', (c) => c.notNull().references('chat_users.id').onDelete('cascade'))
    .addColumn('muted_user_id', 'integer', (c) => c.notNull().references('chat_users.id').onDelete('cascade'))
    .addColumn('date_muted', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('chat_muted_users_pkey', ['user_id', 'muted_user_id'])
    .execute();
  await db.schema.createIndex('chat_muted_users_muted').on('chat_muted_users').columns(['muted_user_id']).execute();
}
