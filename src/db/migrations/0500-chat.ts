import { sql, type Kysely } from 'kysely';

// The Zulip-compatible chat server's tables. Frozen: never import application code here.
export async function up(db: Kysely<any>): Promise<void> {
  const rv = (c: any) => c.notNull().defaultTo(sql`nextval('row_version_seq')`);

  await db.schema
    .createTable('chat_realms')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('string_id', 'text', (c) => c.notNull().unique())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('deactivated', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('default_code_block_language', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('date_created', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('row_version', 'bigint', rv)
    .execute();

  await db.schema
    .createTable('chat_users')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('realm_id', 'integer', (c) => c.notNull().references('chat_realms.id').onDelete('cascade'))
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('delivery_email', 'text', (c) => c.notNull())
    .addColumn('full_name', 'text', (c) => c.notNull())
    .addColumn('password_hash', 'text')
    .addColumn('api_key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('api_key_sealed', 'text', (c) => c.notNull())
    .addColumn('api_key_key_id', 'text', (c) => c.notNull())
    .addColumn('role', 'smallint', (c) => c.notNull().check(sql`role in (100, 200, 300, 400, 600)`))
    .addColumn('is_bot', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('bot_type', 'smallint', (c) => c.check(sql`bot_type between 1 and 4`))
    .addColumn('bot_owner_id', 'integer', (c) => c.references('chat_users.id').onDelete('set null'))
    .addColumn('is_active', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('is_imported_stub', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('is_deleted', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('timezone', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('avatar_source', 'text', (c) => c.notNull().defaultTo('G').check(sql`avatar_source in ('G', 'U')`))
    .addColumn('avatar_version', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('avatar_hash', 'text')
    .addColumn('email_address_visibility', 'smallint', (c) => c.notNull().defaultTo(1).check(sql`email_address_visibility between 1 and 5`))
    .addColumn('presence_enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('date_joined', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('date_joined_at_first_login', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('last_login', 'timestamptz')
    .addColumn('row_version', 'bigint', rv)
    .execute();
  await sql`create unique index chat_users_delivery_email_key on chat_users (realm_id, lower(delivery_email))`.execute(db);
  await sql`create unique index chat_users_email_key on chat_users (realm_id, lower(email))`.execute(db);
  await db.schema.createIndex('chat_users_realm').on('chat_users').columns(['realm_id', 'id']).execute();

  await db.schema
    .createTable('chat_avatars')
    .addColumn('user_id', 'integer', (c) => c.primaryKey().references('chat_users.id').onDelete('cascade'))
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('image', 'bytea', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('chat_profile_fields')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('realm_id', 'integer', (c) => c.notNull().references('chat_realms.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('hint', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('field_type', 'smallint', (c) => c.notNull().check(sql`field_type between 1 and 8`))
    .addColumn('field_data', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('sort_order', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('row_version', 'bigint', rv)
    .execute();
  await sql`create unique index chat_profile_fields_name_key on chat_profile_fields (realm_id, lower(name))`.execute(db);

  await db.schema
    .createTable('chat_profile_values')
    .addColumn('user_id', 'integer', (c) => c.notNull().references('chat_users.id').onDelete('cascade'))
    .addColumn('field_id', 'integer', (c) => c.notNull().references('chat_profile_fields.id').onDelete('cascade'))
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('rendered_value', 'text')
    .addPrimaryKeyConstraint('chat_profile_values_pkey', ['user_id', 'field_id'])
    .execute();

  await db.schema
    .createTable('chat_streams')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('realm_id', 'integer', (c) => c.notNull().references('chat_realms.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('invite_only', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('is_archived', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('creator_id', 'integer', (c) => c.references('chat_users.id').onDelete('set null'))
    .addColumn('date_created', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('row_version', 'bigint', rv)
    .execute();
  await sql`create unique index chat_streams_name_key on chat_streams (realm_id, lower(name))`.execute(db);

  await db.schema
    .createTable('chat_subscriptions')
    .addColumn('user_id', 'integer', (c) => c.notNull().references('chat_users.id').onDelete('cascade'))
    .addColumn('stream_id', 'integer', (c) => c.notNull().references('chat_streams.id').onDelete('cascade'))
    .addColumn('active', 'boolean', (c) => c.notNull().defaultTo(true))
    .addPrimaryKeyConstraint('chat_subscriptions_pkey', ['user_id', 'stream_id'])
    .execute();
  await db.schema.createIndex('chat_subscriptions_stream').on('chat_subscriptions').columns(['stream_id', 'user_id']).execute();

  await db.schema
    .createTable('chat_user_topics')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('user_id', 'integer', (c) => c.notNull().references('chat_users.id').onDelete('cascade'))
    .addColumn('stream_id', 'integer', (c) => c.notNull().references('chat_streams.id').onDelete('cascade'))
    .addColumn('topic_name', 'text', (c) => c.notNull())
    .addColumn('visibility_policy', 'smallint', (c) => c.notNull().check(sql`visibility_policy between 1 and 3`))
    .addColumn('last_updated', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`create unique index chat_user_topics_key on chat_user_topics (user_id, stream_id, lower(topic_name))`.execute(db);

  await db.schema
    .createTable('chat_user_status')
    .addColumn('user_id', 'integer', (c) => c.primaryKey().references('chat_users.id').onDelete('cascade'))
    .addColumn('status_text', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('emoji_name', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('emoji_code', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('reaction_type', 'text', (c) => c.notNull().defaultTo('unicode_emoji'))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('chat_realm_emoji')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('realm_id', 'integer', (c) => c.notNull().references('chat_realms.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('author_id', 'integer', (c) => c.references('chat_users.id').onDelete('set null'))
    .addColumn('deactivated', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('image', 'bytea', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  // One active emoji per name; deactivated ones keep their id for statuses that name them.
  await sql`create unique index chat_realm_emoji_active_name on chat_realm_emoji (realm_id, name) where not deactivated`.execute(db);

  await db.schema
    .createTable('chat_bot_storage')
    .addColumn('bot_id', 'integer', (c) => c.notNull().references('chat_users.id').onDelete('cascade'))
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('value', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('chat_bot_storage_pkey', ['bot_id', 'key'])
    .execute();

  for (const table of ['chat_invites', 'chat_multiuse_invites']) {
    let t = db.schema
      .createTable(table)
      .addColumn('id', 'serial', (c) => c.primaryKey())
      .addColumn('realm_id', 'integer', (c) => c.notNull().references('chat_realms.id').onDelete('cascade'))
      .addColumn('referred_by', 'integer', (c) => c.notNull().references('chat_users.id').onDelete('cascade'))
      .addColumn('invited_as', 'smallint', (c) => c.notNull().check(sql`invited_as in (100, 200, 300, 400, 600)`))
      .addColumn('notify_referrer_on_join', 'boolean', (c) => c.notNull().defaultTo(true))
      .addColumn('stream_ids', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
      .addColumn('invited_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
      .addColumn('expiry_date', 'timestamptz')
      .addColumn('status', 'text', (c) => c.notNull().defaultTo('pending').check(sql`status in ('pending', 'used', 'revoked')`));
    if (table === 'chat_invites') {
      t = t.addColumn('email', 'text', (c) => c.notNull()).addColumn('times_sent', 'integer', (c) => c.notNull().defaultTo(1));
    } else {
      t = t.addColumn('confirmation_key', 'text', (c) => c.notNull().unique());
    }
    await t.execute();
    await db.schema.createIndex(`${table}_realm`).on(table).columns(['realm_id', 'status', 'id']).execute();
  }

  await db.schema
    .createTable('chat_playgrounds')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('realm_id', 'integer', (c) => c.notNull().references('chat_realms.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('pygments_language', 'text', (c) => c.notNull())
    .addColumn('url_template', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('chat_playgrounds_key').on('chat_playgrounds').columns(['realm_id', 'pygments_language', 'name']).unique().execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of [
    'chat_playgrounds', 'chat_multiuse_invites', 'chat_invites', 'chat_bot_storage', 'chat_realm_emoji', 'chat_user_status',
    'chat_user_topics', 'chat_subscriptions', 'chat_streams', 'chat_profile_values', 'chat_profile_fields', 'chat_avatars', 'chat_users', 'chat_realms',
  ]) {
    await db.schema.dropTable(t).execute();
  }
}
