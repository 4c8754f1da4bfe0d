import { sql, type Kysely } from 'kysely';

// The chat's messages, each recipient's flags on them, reactions, and the event log that
// carries every change to the event queues of every chat process. Frozen: never import
// application code here.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('chat_messages')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('realm_id', 'integer', (c) => c.notNull().references('chat_realms.id').onDelete('cascade'))
    .addColumn('sender_id', 'integer', (c) => c.notNull().references('chat_users.id').onDelete('cascade'))
    // 'stream' (stream_id and topic set) or 'private' (dm_key: the sorted ids of everyone in it).
    .addColumn('type', 'text', (c) => c.notNull().check(sql`type in ('stream', 'private')`))
    .addColumn('stream_id', 'integer', (c) => c.references('chat_streams.id').onDelete('cascade'))
    .addColumn('topic', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('dm_key', 'text')
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('rendered_content', 'text', (c) => c.notNull())
    .addColumn('client', 'text', (c) => c.notNull().defaultTo('API'))
    .addColumn('date_sent', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('last_edit_time', 'timestamptz')
    .addColumn('last_moved_time', 'timestamptz')
    .addColumn('edit_history', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .addCheckConstraint('chat_messages_recipient', sql`(type = 'stream' and stream_id is not null) or (type = 'private' and dm_key is not null)`)
    .execute();
  await sql`create index chat_messages_stream_topic on chat_messages (stream_id, lower(topic), id)`.execute(db);
  await db.schema.createIndex('chat_messages_realm_dm').on('chat_messages').columns(['realm_id', 'dm_key', 'id']).execute();
  await db.schema.createIndex('chat_messages_sender').on('chat_messages').columns(['sender_id', 'id']).execute();

  // Flags as Zulip's bits: 1 read, 2 starred, 4 collapsed, 8 mentioned, 16 stream wildcard
  // mentioned, 32 topic wildcard mentioned, 64 group mentioned, 128 has alert word.
  await db.schema
    .createTable('chat_user_messages')
    .addColumn('user_id', 'integer', (c) => c.notNull().references('chat_users.id').onDelete('cascade'))
    .addColumn('message_id', 'integer', (c) => c.notNull().references('chat_messages.id').onDelete('cascade'))
    .addColumn('flags', 'integer', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('chat_user_messages_pkey', ['user_id', 'message_id'])
    .execute();
  await db.schema.createIndex('chat_user_messages_message').on('chat_user_messages').columns(['message_id']).execute();
  await sql`create index chat_user_messages_unread on chat_user_messages (user_id, message_id) where flags & 1 = 0`.execute(db);

  await db.schema
    .createTable('chat_reactions')
    .addColumn('message_id', 'integer', (c) => c.notNull().references('chat_messages.id').onDelete('cascade'))
    .addColumn('user_id', 'integer', (c) => c.notNull().references('chat_users.id').onDelete('cascade'))
    .addColumn('emoji_name', 'text', (c) => c.notNull())
    .addColumn('emoji_code', 'text', (c) => c.notNull())
    .addColumn('reaction_type', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('chat_reactions_pkey', ['message_id', 'user_id', 'reaction_type', 'emoji_code'])
    .execute();

  // Presence: when each person was last active and last connected (POST /users/me/presence).
  await db.schema
    .createTable('chat_presence')
    .addColumn('user_id', 'integer', (c) => c.primaryKey().references('chat_users.id').onDelete('cascade'))
    .addColumn('realm_id', 'integer', (c) => c.notNull().references('chat_realms.id').onDelete('cascade'))
    .addColumn('last_active_time', 'timestamptz')
    .addColumn('last_connected_time', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('chat_presence_realm').on('chat_presence').columns(['realm_id']).execute();

  // Every event for the event queues, written in the transaction of the change it tells of;
  // each process reads what is new after a NOTIFY. `users` is who receives it (null: everyone
  // in the organization); `flags` the per-user message flags of a message event. Short-lived:
  // rows older than the queues' idle timeout are pruned.
  await db.schema
    .createTable('chat_events')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('realm_id', 'integer', (c) => c.notNull())
    .addColumn('users', 'jsonb')
    .addColumn('flags', 'jsonb')
    .addColumn('payload', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of ['chat_events', 'chat_presence', 'chat_reactions', 'chat_user_messages', 'chat_messages']) await db.schema.dropTable(t).execute();
}
