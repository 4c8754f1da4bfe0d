import crypto from 'node:crypto';
import { Type } from 'typebox';
import type { RealmRow, UserRow } from './users.store.ts';

/** Zulip's email address visibility settings. */
export const VISIBILITY = { everyone: 1, members: 2, admins: 3, nobody: 4, moderators: 5 } as const;

export const isAdmin = (u: Pick<UserRow, 'role'>) => u.role <= 200;
export const isOwner = (u: Pick<UserRow, 'role'>) => u.role === 100;
export const isGuest = (u: Pick<UserRow, 'role'>) => u.role === 600;

/** Whether `caller` may see the real address of user `targetId`, whose visibility setting is `visibility`. */
export function canAccessDeliveryEmail(caller: Pick<UserRow, 'id' | 'role'>, targetId: number, visibility: number): boolean {
  if (caller.id === targetId) return true;
  switch (visibility) {
    case VISIBILITY.everyone:
      return true;
    case VISIBILITY.members:
      return !isGuest(caller);
    case VISIBILITY.admins:
      return isAdmin(caller);
    case VISIBILITY.moderators:
      return caller.role <= 300;
    default:
      return false;
  }
}

/** The API email of a user: the real one when everyone may see it, else a fake one on the realm's host. */
export function apiEmail(realm: Pick<RealmRow, 'url'>, userId: number, deliveryEmail: string, visibility: number, isBot: boolean): string {
  if (isBot || visibility === VISIBILITY.everyone) return deliveryEmail;
  return `user${userId}@${new URL(realm.url).hostname}`;
}

export function avatarUrl(realm: Pick<RealmRow, 'url' | 'id'>, row: Pick<UserRow, 'id' | 'avatar_source' | 'avatar_hash' | 'avatar_version' | 'delivery_email'>): string {
  if (row.avatar_source === 'U' && row.avatar_hash) return `${realm.url}/user_avatars/${realm.id}/${row.id}/${row.avatar_hash}.png?version=${row.avatar_version}`;
  const hash = crypto.createHash('md5').update(row.delivery_email.toLowerCase()).digest('hex');
  return `https://secure.gravatar.com/avatar/${hash}?d=identicon&version=${row.avatar_version}`;
}

export type ProfileData = Record<string, { value: string; rendered_value?: string }>;

/** Python's datetime.isoformat() of a UTC time, as Zulip writes date_joined. */
export function isoformat(iso: string): string {
  return new Date(iso).toISOString().replace(/\.(\d{3})Z$/, '.$1000+00:00');
}

/**
 * The user object of the spec, field by field, as `caller` may see it. Bot fields only on
 * bots, profile_data only on people and only when asked for, is_deleted only when true.
 */
export function presentUser(
  row: UserRow,
  opts: { caller: Pick<UserRow, 'id' | 'role'>; realm: Pick<RealmRow, 'url' | 'id'>; clientGravatar: boolean; profile?: Map<number, ProfileData> },
) {
  const canSee = row.is_bot || canAccessDeliveryEmail(opts.caller, row.id, row.email_address_visibility);
  const out: Record<string, unknown> = {
    email: row.email,
    user_id: row.id,
    avatar_version: row.avatar_version,
    is_admin: row.role <= 200,
    is_owner: row.role === 100,
    is_guest: row.role === 600,
    role: row.role,
    is_bot: row.is_bot,
    full_name: row.full_name,
    timezone: row.timezone,
    is_active: row.is_active,
    date_joined: isoformat(row.date_joined),
    delivery_email: canSee ? row.delivery_email : null,
    is_imported_stub: row.is_imported_stub,
    avatar_url: opts.clientGravatar && canSee && row.avatar_source === 'G' ? null : avatarUrl(opts.realm, row),
  };
  if (row.is_deleted) out.is_deleted = true;
  if (row.is_bot) {
    out.bot_type = row.bot_type;
    out.bot_owner_id = row.bot_owner_id;
  } else if (opts.profile) {
    out.profile_data = opts.profile.get(row.id) ?? {};
  }
  return out;
}

const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);

export const UserObject = Type.Object({
  email: Type.String(),
  user_id: Type.Integer(),
  avatar_version: Type.Integer(),
  is_admin: Type.Boolean(),
  is_owner: Type.Boolean(),
  is_guest: Type.Boolean(),
  role: Type.Integer(),
  is_bot: Type.Boolean(),
  full_name: Type.String(),
  timezone: Type.String(),
  is_active: Type.Boolean(),
  date_joined: Type.String(),
  delivery_email: Nullable(Type.String()),
  is_imported_stub: Type.Boolean(),
  avatar_url: Nullable(Type.String()),
  is_deleted: Type.Optional(Type.Boolean()),
  bot_type: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
  bot_owner_id: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
  profile_data: Type.Optional(Type.Record(Type.String(), Type.Object({ value: Type.String(), rendered_value: Type.Optional(Type.String()) }))),
});

/** A user object as /register and realm_user events carry it (zulip.yaml's User: no stub or deletion markers). */
export function presentUserForEvents(...args: Parameters<typeof presentUser>) {
  const { is_imported_stub: _stub, is_deleted: _deleted, ...rest } = presentUser(...args);
  return rest;
}

/**
 * Zulip's defaults for the personal settings this server does not store (display, notification
 * and typing preferences); the apps read them at start. The server sends no emails or mobile
 * pushes, so the notification ones are only what a client shows.
 */
const SETTING_DEFAULTS = {
  twenty_four_hour_time: false, web_mark_read_on_scroll_policy: 1, web_channel_default_view: 1, starred_message_counts: true,
  receives_typing_notifications: true, web_suggest_update_timezone: true, fluid_layout_width: false, high_contrast_mode: false,
  web_font_size_px: 16, web_line_height_percent: 140, color_scheme: 1, translate_emoticons: false, display_emoji_reaction_users: true,
  default_language: 'en', web_home_view: 'inbox', web_escape_navigates_to_home_view: true, left_side_userlist: false, emojiset: 'google',
  demote_inactive_streams: 1, user_list_style: 2, web_animate_image_previews: 'on_hover', web_stream_unreads_count_display_policy: 2,
  hide_ai_features: false, enter_sends: false, enable_drafts_synchronization: true, enable_stream_desktop_notifications: false,
  enable_stream_email_notifications: false, enable_stream_push_notifications: false, enable_stream_audible_notifications: false,
  notification_sound: 'zulip', enable_desktop_notifications: true, enable_sounds: true, enable_followed_topic_desktop_notifications: true,
  enable_followed_topic_email_notifications: true, enable_followed_topic_push_notifications: true, enable_followed_topic_audible_notifications: true,
  email_notifications_batching_period_seconds: 120, enable_offline_email_notifications: true, enable_offline_push_notifications: true,
  enable_online_push_notifications: true, enable_digest_emails: true, enable_marketing_emails: true, enable_login_emails: true,
  message_content_in_email_notifications: true, pm_content_in_desktop_notifications: true, wildcard_mentions_notify: true,
  enable_followed_topic_wildcard_mentions_notify: true, desktop_icon_count_display: 1, realm_name_in_email_notifications_policy: 1,
  automatically_follow_topics_policy: 3, automatically_unmute_topics_in_muted_streams_policy: 3, automatically_follow_topics_where_mentioned: true,
  send_private_typing_notifications: true, send_stream_typing_notifications: true, send_read_receipts: true, allow_private_data_export: false,
  web_navigate_to_sent_message: true,
  available_notification_sounds: ['chime-saved', 'ding', 'zulip'],
  emojiset_choices: [{ key: 'google', text: 'Google' }, { key: 'twitter', text: 'Twitter' }, { key: 'text', text: 'Plain text' }],
} as const;

/** /register's `user_settings`: the settings this server stores for the user, Zulip's defaults for the rest. */
export function userSettings(row: Pick<UserRow, 'timezone' | 'presence_enabled' | 'email_address_visibility'>): Record<string, unknown> {
  return { ...SETTING_DEFAULTS, timezone: row.timezone, presence_enabled: row.presence_enabled, email_address_visibility: row.email_address_visibility };
}
