import type { Generated, NullableTimestamp, RowVersion, Timestamp, Json } from '../db/columns.ts';

/** Zulip's role numbers. */
export type ChatRole = 100 | 200 | 300 | 400 | 600;
export const ROLE = { owner: 100, admin: 200, moderator: 300, member: 400, guest: 600 } as const;

export interface ChatTables {
  chat_realms: {
    id: Generated<number>;
    string_id: string;
    name: string;
    description: Generated<string>;
    url: string;
    deactivated: Generated<boolean>;
    default_code_block_language: Generated<string>;
    date_created: Timestamp;
    row_version: RowVersion;
  };
  chat_users: {
    id: Generated<number>;
    realm_id: number;
    email: string;
    delivery_email: string;
    full_name: string;
    password_hash: string | null;
    api_key_hash: string;
    api_key_sealed: string;
    api_key_key_id: string;
    role: ChatRole;
    is_bot: Generated<boolean>;
    bot_type: number | null;
    bot_owner_id: number | null;
    is_active: Generated<boolean>;
    is_imported_stub: Generated<boolean>;
    is_deleted: Generated<boolean>;
    timezone: Generated<string>;
    avatar_source: Generated<'G' | 'U'>;
    avatar_version: Generated<number>;
    avatar_hash: string | null;
    email_address_visibility: Generated<number>;
    presence_enabled: Generated<boolean>;
    date_joined: Timestamp;
    date_joined_at_first_login: Generated<boolean>;
    last_login: NullableTimestamp;
    row_version: RowVersion;
  };
  chat_avatars: {
    user_id: number;
    content_type: string;
    image: Buffer;
  };
  chat_profile_fields: {
    id: Generated<number>;
    realm_id: number;
    name: string;
    hint: Generated<string>;
    field_type: number;
    field_data: Generated<string>;
    sort_order: Generated<number>;
    row_version: RowVersion;
  };
  chat_profile_values: {
    user_id: number;
    field_id: number;
    value: string;
    rendered_value: string | null;
  };
  chat_streams: {
    id: Generated<number>;
    realm_id: number;
    name: string;
    description: Generated<string>;
    invite_only: Generated<boolean>;
    is_archived: Generated<boolean>;
    creator_id: number | null;
    date_created: Timestamp;
    row_version: RowVersion;
  };
  chat_subscriptions: {
    user_id: number;
    stream_id: number;
    active: Generated<boolean>;
    is_muted: Generated<boolean>;
    color: string | null;
    pin_to_top: Generated<boolean>;
    desktop_notifications: boolean | null;
    audible_notifications: boolean | null;
    push_notifications: boolean | null;
    email_notifications: boolean | null;
    wildcard_mentions_notify: boolean | null;
  };
  chat_user_topics: {
    id: Generated<number>;
    user_id: number;
    stream_id: number;
    topic_name: string;
    visibility_policy: number;
    last_updated: Timestamp;
  };
  chat_user_status: {
    user_id: number;
    status_text: Generated<string>;
    emoji_name: Generated<string>;
    emoji_code: Generated<string>;
    reaction_type: Generated<string>;
    updated_at: Timestamp;
  };
  chat_realm_emoji: {
    id: Generated<number>;
    realm_id: number;
    name: string;
    author_id: number | null;
    deactivated: Generated<boolean>;
    content_type: string;
    image: Buffer;
    created_at: Timestamp;
  };
  chat_bot_storage: {
    bot_id: number;
    key: string;
    value: string;
  };
  chat_invites: InviteColumns & { email: string; times_sent: Generated<number> };
  chat_multiuse_invites: InviteColumns & { confirmation_key: string };
  chat_messages: {
    id: Generated<number>;
    realm_id: number;
    sender_id: number;
    type: 'stream' | 'private';
    stream_id: number | null;
    topic: Generated<string>;
    dm_key: string | null;
    content: string;
    rendered_content: string;
    client: Generated<string>;
    date_sent: Timestamp;
    last_edit_time: NullableTimestamp;
    last_moved_time: NullableTimestamp;
    edit_history: Json<EditHistoryEntry[]>;
    row_version: RowVersion;
  };
  chat_user_messages: {
    user_id: number;
    message_id: number;
    flags: Generated<number>;
  };
  chat_reactions: {
    message_id: number;
    user_id: number;
    emoji_name: string;
    emoji_code: string;
    reaction_type: string;
    created_at: Generated<string>;
  };
  chat_presence: {
    user_id: number;
    realm_id: number;
    last_active_time: NullableTimestamp;
    last_connected_time: Timestamp;
  };
  chat_events: {
    id: Generated<number>;
    realm_id: number;
    users: Json<number[] | null>;
    flags: Json<Record<string, string[]> | null>;
    payload: Json<Record<string, unknown>>;
    created_at: Generated<string>;
  };
  chat_attachments: {
    id: Generated<number>;
    realm_id: number;
    owner_id: number;
    path_id: string;
    file_name: string;
    content_type: string;
    size: number;
    /** The stored file (chat_upload_files) holding its bytes. */
    file_id: number;
    create_time: Generated<string>;
  };
  /** An uploaded file's bytes, made before they arrive: chunks of 1 MiB (the last may be shorter). */
  chat_upload_files: {
    id: Generated<number>;
    realm_id: number;
    created_at: Generated<string>;
  };
  chat_upload_chunks: {
    file_id: number;
    seq: number;
    data: Buffer;
  };
  chat_attachment_messages: {
    attachment_id: number;
    message_id: number;
  };
  chat_muted_users: {
    user_id: number;
    muted_user_id: number;
    date_muted: Generated<string>;
  };
  chat_playgrounds: {
    id: Generated<number>;
    realm_id: number;
    name: string;
    pygments_language: string;
    url_template: string;
  };
}

/** One entry of a message's edit history, as Zulip's (newest first). */
export interface EditHistoryEntry {
  user_id: number | null;
  timestamp: number;
  prev_content?: string;
  prev_rendered_content?: string;
  prev_topic?: string;
  topic?: string;
  prev_stream?: number;
  stream?: number;
}

interface InviteColumns {
  id: Generated<number>;
  realm_id: number;
  referred_by: number;
  invited_as: ChatRole;
  notify_referrer_on_join: Generated<boolean>;
  stream_ids: Json<number[]>;
  invited_at: Timestamp;
  expiry_date: NullableTimestamp;
  status: Generated<'pending' | 'used' | 'revoked'>;
}
