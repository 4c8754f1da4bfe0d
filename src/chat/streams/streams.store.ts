import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';

type Q = Kysely<Database> | Transaction<Database>;
export type StreamRow = Awaited<ReturnType<typeof streamById>> & {};

const COLUMNS = ['s.id', 's.realm_id', 's.name', 's.description', 's.invite_only', 's.is_archived', 's.creator_id', 's.date_created'] as const;

/** A channel with whether `userId` is an active subscriber. */
export function streamById(db: Q, realmId: number, id: number, userId: number) {
  return withSubscribed(db, userId).where('s.realm_id', '=', realmId).where('s.id', '=', id).executeTakeFirst();
}

export function streamByName(db: Q, realmId: number, name: string, userId: number) {
  return withSubscribed(db, userId)
    .where('s.realm_id', '=', realmId)
    .where(sql`lower(s.name)`, '=', name.toLowerCase())
    .executeTakeFirst();
}

function withSubscribed(db: Q, userId: number) {
  return db
    .selectFrom('chat_streams as s')
    .leftJoin('chat_subscriptions as sub', (j) => j.onRef('sub.stream_id', '=', 's.id').on('sub.user_id', '=', userId).on('sub.active', '=', true))
    .select([...COLUMNS, sql<boolean>`sub.user_id is not null`.as('subscribed')]);
}

/** Channels a user may see: public ones and the private ones they are subscribed to. */
export function visibleStreams(db: Q, realmId: number, userId: number) {
  return withSubscribed(db, userId)
    .where('s.realm_id', '=', realmId)
    .where((eb) => eb.or([eb('s.invite_only', '=', false), eb('sub.user_id', 'is not', null)]))
    .orderBy('s.id')
    .execute();
}

/** Every channel of the organization, private ones included (what an administrator's `include_all` lists). */
export function realmStreams(db: Q, realmId: number, userId: number) {
  return withSubscribed(db, userId).where('s.realm_id', '=', realmId).orderBy('s.id').execute();
}

/** The user's subscribed channels, each with the user's own settings for it. */
export function subscribedStreams(db: Q, realmId: number, userId: number) {
  return withSubscribed(db, userId)
    .select(SUBSCRIPTION_SETTINGS.map((c) => `sub.${c}` as const))
    .where('s.realm_id', '=', realmId)
    .where('sub.user_id', 'is not', null)
    .orderBy('s.id')
    .execute();
}

/** The per-subscription settings a subscriber may change (stored on their subscription row). */
export const SUBSCRIPTION_SETTINGS = [
  'is_muted', 'color', 'pin_to_top', 'desktop_notifications', 'audible_notifications', 'push_notifications', 'email_notifications', 'wildcard_mentions_notify',
] as const;
export type SubscriptionSetting = (typeof SUBSCRIPTION_SETTINGS)[number];

export function setSubscriptionSetting(db: Q, userId: number, streamId: number, column: SubscriptionSetting, value: string | boolean) {
  return db.updateTable('chat_subscriptions').set({ [column]: value }).where('user_id', '=', userId).where('stream_id', '=', streamId).where('active', '=', true).execute();
}

export function insertStream(db: Q, v: { realmId: number; name: string; description: string; inviteOnly: boolean; creatorId: number }) {
  return db
    .insertInto('chat_streams')
    .values({ realm_id: v.realmId, name: v.name, description: v.description, invite_only: v.inviteOnly, creator_id: v.creatorId, date_created: new Date() })
    .returning('id')
    .executeTakeFirstOrThrow();
}

/** Subscribes, or subscribes again (a former subscriber's settings are kept, as Zulip's): answers the settings. */
export function subscribe(db: Q, userId: number, streamId: number) {
  return db
    .insertInto('chat_subscriptions')
    .values({ user_id: userId, stream_id: streamId, active: true })
    .onConflict((oc) => oc.columns(['user_id', 'stream_id']).doUpdateSet({ active: true }))
    .returning([...SUBSCRIPTION_SETTINGS])
    .executeTakeFirstOrThrow();
}

export function unsubscribe(db: Q, userId: number, streamId: number) {
  return db.updateTable('chat_subscriptions').set({ active: false }).where('user_id', '=', userId).where('stream_id', '=', streamId).execute();
}

export function topicPolicy(db: Q, userId: number, streamId: number, topic: string) {
  return db
    .selectFrom('chat_user_topics')
    .select(['id', 'topic_name', 'visibility_policy'])
    .where('user_id', '=', userId)
    .where('stream_id', '=', streamId)
    .where(sql`lower(topic_name)`, '=', topic.toLowerCase())
    .executeTakeFirst();
}

/** Sets a topic's visibility policy for a user; 0 (inherit) removes the row. Topic names compare without case. */
export async function setTopicPolicy(db: Q, userId: number, streamId: number, topic: string, policy: number) {
  const existing = await topicPolicy(db, userId, streamId, topic);
  if (policy === 0) {
    if (existing) await db.deleteFrom('chat_user_topics').where('id', '=', existing.id).execute();
    return;
  }
  if (existing) {
    await db.updateTable('chat_user_topics').set({ visibility_policy: policy, last_updated: new Date() }).where('id', '=', existing.id).execute();
  } else {
    await db.insertInto('chat_user_topics').values({ user_id: userId, stream_id: streamId, topic_name: topic, visibility_policy: policy, last_updated: new Date() }).execute();
  }
}

export function userTopics(db: Q, userId: number) {
  return db.selectFrom('chat_user_topics').select(['stream_id', 'topic_name', 'visibility_policy', 'last_updated']).where('user_id', '=', userId).orderBy('id').execute();
}

/** The active subscribers (active users) of each of `streamIds`, by user id. */
export function subscribersOf(db: Q, streamIds: number[]) {
  if (!streamIds.length) return Promise.resolve([]);
  return db
    .selectFrom('chat_subscriptions as s')
    .innerJoin('chat_users as u', 'u.id', 's.user_id')
    .select(['s.stream_id', 's.user_id'])
    .where('s.stream_id', 'in', streamIds)
    .where('s.active', '=', true)
    .where('u.is_active', '=', true)
    .orderBy('s.user_id')
    .execute();
}

/** Active subscribers of a channel who are active users. */
export function subscriberIds(db: Q, streamId: number) {
  return subscribersOf(db, [streamId]).then((rows) => rows.map((r) => r.user_id));
}

export function updateStream(db: Q, id: number, set: { name?: string; description?: string; invite_only?: boolean }) {
  return db.updateTable('chat_streams').set(set).where('id', '=', id).execute();
}

/** Who can see that a channel exists, as Zulip's: its subscribers, the administrators, and for a public one every member but guests. */
export async function metadataViewers(db: Q, realmId: number, streamId: number, inviteOnly: boolean) {
  const rows = await db
    .selectFrom('chat_users as u')
    .leftJoin('chat_subscriptions as sub', (j) => j.onRef('sub.user_id', '=', 'u.id').on('sub.stream_id', '=', streamId).on('sub.active', '=', true))
    .select('u.id')
    .where('u.realm_id', '=', realmId)
    .where('u.is_active', '=', true)
    .where((eb) => eb.or([eb('sub.user_id', 'is not', null), eb('u.role', '<=', 200), ...(inviteOnly ? [] : [eb('u.role', '<>', 600)])]))
    .orderBy('u.id')
    .execute();
  return rows.map((r) => r.id);
}
