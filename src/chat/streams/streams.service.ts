import { recordAudit } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { lockKey } from '../../db/conditional.ts';
import { writeEvents, type ChatEventRecord } from '../events/events.bus.ts';
import { ChatError, chatErrors } from '../http/errors.ts';
import { dbId } from '../http/params.ts';
import { isAdmin, isGuest } from '../users/users.present.ts';
import { chatActor, isControl, type Caller } from '../users/users.service.ts';
import * as usersStore from '../users/users.store.ts';
import * as store from './streams.store.ts';
import type { StreamRow } from './streams.store.ts';

export const MAX_TOPIC_NAME_LENGTH = 60;
export const MAX_STREAM_NAME_LENGTH = 60;
export const VISIBILITY_POLICY = { inherit: 0, muted: 1, unmuted: 2, followed: 3 } as const;

const unix = (iso: string) => Math.floor(new Date(iso).getTime() / 1000);

/** Zulip's check_stream_name. */
function checkStreamName(raw: string): string {
  const name = raw.trim();
  if (!name) throw chatErrors.bad("Channel name can't be empty.");
  if ([...name].length > MAX_STREAM_NAME_LENGTH) throw chatErrors.bad(`Channel name too long (limit: ${MAX_STREAM_NAME_LENGTH} characters).`);
  const bad = [...name].findIndex(isControl);
  if (bad >= 0) throw chatErrors.bad(`Invalid character in channel name, at position ${bad + 1}.`);
  return name;
}

/** GET /streams's filters (see `streams`). */
export interface StreamsFilter {
  includePublic?: boolean;
  includeSubscribed?: boolean;
  includeAll?: boolean;
  includeContent?: boolean;
  excludeArchived?: boolean;
}

export function presentStream(s: StreamRow) {
  return {
    stream_id: s.id,
    name: s.name,
    description: s.description,
    invite_only: s.invite_only,
    is_archived: s.is_archived,
    is_web_public: false,
    creator_id: s.creator_id,
    date_created: unix(s.date_created),
  };
}

const COLORS = ['#76ce90', '#fae589', '#a6c7e5', '#e79ab5', '#bfd56f', '#f4ae55', '#b0a5fd', '#addfe5', '#f5ce6e', '#c2726a'];
const escapeHtml = (t: string) => t.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** Zulip's BasicChannel object (stream events, /register's streams). */
export function channelEventObject(s: StreamRow) {
  const p = presentStream(s);
  return {
    stream_id: p.stream_id,
    name: p.name,
    description: p.description,
    rendered_description: p.description ? `<p>${escapeHtml(p.description)}</p>` : '',
    date_created: p.date_created,
    creator_id: p.creator_id,
    invite_only: p.invite_only,
    is_web_public: false,
    stream_post_policy: 1,
    message_retention_days: null,
    history_public_to_subscribers: !p.invite_only,
    first_message_id: null,
    is_recently_active: true,
    is_announcement_only: false,
    is_archived: p.is_archived,
    stream_weekly_traffic: null,
    ...groupSettings(p.creator_id),
  };
}

/**
 * The channel permission settings as explicit user collections: this server has no user groups;
 * who may post or subscribe follows the roles (see docs/chat-server.md). Who may administer the
 * channel is its creator, as Zulip's default (organization administrators may besides).
 */
const groupSettings = (creatorId: number | null) => {
  const of = (ids: number[]) => ({ direct_members: ids, direct_subgroups: [] as number[] });
  return { can_add_subscribers_group: of([]), can_remove_subscribers_group: of([]), can_administer_channel_group: of(creatorId === null ? [] : [creatorId]), can_send_message_group: of([]), can_subscribe_group: of([]) };
};

/** Zulip's rule for PATCH /streams/{stream_id}: organization administrators, and the channel's creator (can_administer_channel_group's default) unless a guest. */
const canAdminister = (caller: Caller, s: StreamRow) => isAdmin(caller.user) || (s.creator_id === caller.user.id && !isGuest(caller.user));

/**
 * Zulip's Subscription object. `s` carries the subscriber's stored settings when it comes from
 * their subscription row; a new subscription (the add event) has the defaults.
 */
export function subscriptionEventObject(s: Pick<StreamRow, 'id'> & Parameters<typeof presentStream>[0] & Partial<Record<store.SubscriptionSetting, unknown>>) {
  const b = channelEventObject(s);
  const isMuted = s.is_muted === true;
  return {
    stream_id: b.stream_id,
    name: b.name,
    description: b.description,
    rendered_description: b.rendered_description,
    date_created: b.date_created,
    creator_id: b.creator_id,
    invite_only: b.invite_only,
    is_web_public: false,
    desktop_notifications: (s.desktop_notifications as boolean | null | undefined) ?? null,
    email_notifications: (s.email_notifications as boolean | null | undefined) ?? null,
    wildcard_mentions_notify: (s.wildcard_mentions_notify as boolean | null | undefined) ?? null,
    push_notifications: (s.push_notifications as boolean | null | undefined) ?? null,
    audible_notifications: (s.audible_notifications as boolean | null | undefined) ?? null,
    pin_to_top: s.pin_to_top === true,
    is_muted: isMuted,
    in_home_view: !isMuted,
    is_announcement_only: false,
    color: (s.color as string | null | undefined) ?? COLORS[s.id % COLORS.length],
    stream_post_policy: 1,
    message_retention_days: null,
    history_public_to_subscribers: b.history_public_to_subscribers,
    first_message_id: null,
    is_recently_active: true,
    stream_weekly_traffic: null,
    is_archived: b.is_archived,
    ...groupSettings(b.creator_id),
  };
}

/** A property name of POST /users/me/subscriptions/properties as the column it sets, its value checked. */
function subscriptionProperty(property: string, value: unknown): store.SubscriptionSetting {
  if (property === 'color') {
    if (typeof value !== 'string' || !/^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/.test(value)) throw chatErrors.bad('color is not a valid hex color code (like #c2c2c2)');
    return 'color';
  }
  const column = property === 'in_home_view' ? 'is_muted' : property;
  if (!(store.SUBSCRIPTION_SETTINGS as readonly string[]).includes(column)) throw chatErrors.bad(`Unknown subscription property: ${property}`);
  if (typeof value !== 'boolean') throw chatErrors.bad(`${property} is not a boolean`);
  return column as store.SubscriptionSetting;
}

export type ChatStreamsService = ReturnType<typeof createChatStreamsService>;

export function createChatStreamsService(deps: { db: Db; afterCommit?: () => void }) {
  const { db } = deps;

  /** Whether the caller may act on a channel: subscribed, or public to a non-guest; archived channels are out of reach. */
  const canAccess = (caller: Caller, s: StreamRow) => !s.is_archived && (s.subscribed || (!s.invite_only && !isGuest(caller.user)));

  /** `principals` as Zulip reads them: active people of the organization, by id or email. */
  async function principalUsers(caller: Caller, principals: Array<number | string>): Promise<number[]> {
    const ids: number[] = [];
    for (const p of principals) {
      const row = typeof p === 'number' ? await usersStore.getUser(db, caller.realm.id, dbId(p)) : await usersStore.userByEmail(db, caller.realm.id, p);
      if (!row || !row.is_active) throw chatErrors.bad(typeof p === 'number' ? `No such user: ${p} (give the user ID of an active member of this organization)` : `No such user: ${p} (give the email of an active member of this organization)`);
      if (!ids.includes(row.id)) ids.push(row.id);
    }
    return ids;
  }

  async function byId(caller: Caller, id: number) {
    const s = await store.streamById(db, caller.realm.id, dbId(id), caller.user.id);
    if (!s || !canAccess(caller, s)) throw chatErrors.bad('Invalid channel ID');
    return s;
  }

  async function byName(caller: Caller, name: string) {
    const s = await store.streamByName(db, caller.realm.id, name, caller.user.id);
    if (!s || !canAccess(caller, s)) throw chatErrors.bad(`Invalid channel name '${name}'`);
    return s;
  }

  async function setPolicy(caller: Caller, stream: StreamRow, topic: string, policy: number) {
    await db.transaction().execute(async (trx) => {
      await lockKey(trx, `chat_user_topics:${caller.user.id}:${stream.id}`);
      await store.setTopicPolicy(trx, caller.user.id, stream.id, topic, policy);
      await writeEvents(trx, [{ realmId: caller.realm.id, users: [caller.user.id], payload: { type: 'user_topic', stream_id: stream.id, topic_name: topic, last_updated: Math.floor(Date.now() / 1000), visibility_policy: policy } }]);
      await recordAudit(trx, chatActor(caller), 'chat.user_topic.update', { type: 'chat_stream', id: stream.id }, { topic, visibility_policy: policy });
    });
  }

  return {
    byId,
    byName,

    /**
     * PATCH /users/me/subscriptions/muted_topics (deprecated): exactly one of stream_id and
     * stream; muting a muted topic and unmuting an unmuted one succeed (feature level 169).
     */
    async updateMutedTopic(caller: Caller, v: { streamId?: number; stream?: string; topic: string; op: 'add' | 'remove' }) {
      if (v.streamId === undefined && v.stream === undefined) throw new ChatError("Missing 'stream_id' argument");
      if (v.streamId !== undefined && v.stream !== undefined) throw chatErrors.incompatible(['stream_id', 'stream']);
      const stream = v.stream !== undefined ? await byName(caller, v.stream) : await byId(caller, v.streamId!);
      await setPolicy(caller, stream, v.topic, v.op === 'add' ? VISIBILITY_POLICY.muted : VISIBILITY_POLICY.inherit);
    },

    /** POST /user_topics. */
    async updateUserTopic(caller: Caller, v: { streamId: number; topic: string; visibilityPolicy: number }) {
      if (!Object.values(VISIBILITY_POLICY).includes(v.visibilityPolicy as 0)) throw chatErrors.bad('Invalid visibility_policy');
      const stream = await byId(caller, v.streamId);
      await setPolicy(caller, stream, v.topic, v.visibilityPolicy);
    },

    async userTopics(caller: Caller) {
      return (await store.userTopics(db, caller.user.id)).map((t) => ({ stream_id: t.stream_id, topic_name: t.topic_name, visibility_policy: t.visibility_policy, last_updated: unix(t.last_updated) }));
    },

    /**
     * POST /users/me/subscriptions: subscribes the caller, or the `principals` (user ids or
     * emails), to channels, creating the missing ones. As Zulip's defaults: any member but a
     * guest may subscribe others to a channel they can reach (public, or private and subscribed
     * to); administrators to any channel. Answers `subscribed` and `already_subscribed` by user id.
     */
    async subscribe(caller: Caller, v: { subscriptions: Array<{ name: string; description: string }>; inviteOnly: boolean; principals?: Array<number | string> }) {
      const names = v.subscriptions.map((s) => ({ name: checkStreamName(s.name), description: s.description }));
      const targets = v.principals?.length ? await principalUsers(caller, v.principals) : [caller.user.id];
      const others = targets.some((id) => id !== caller.user.id);
      if (others && isGuest(caller.user)) throw chatErrors.insufficientPermission();
      return db.transaction().execute(async (trx) => {
        await lockKey(trx, `chat_streams:${caller.realm.id}`);
        const subscribed = new Map<number, string[]>();
        const already = new Map<number, string[]>();
        const events: ChatEventRecord[] = [];
        const addedFor = new Map<number, Array<StreamRow & Record<store.SubscriptionSetting, unknown>>>();
        for (const { name, description } of names) {
          let s = await store.streamByName(trx, caller.realm.id, name, caller.user.id);
          if (!s) {
            if (isGuest(caller.user)) throw chatErrors.insufficientPermission();
            const { id } = await store.insertStream(trx, { realmId: caller.realm.id, name, description, inviteOnly: v.inviteOnly, creatorId: caller.user.id });
            await recordAudit(trx, chatActor(caller), 'chat.stream.create', { type: 'chat_stream', id }, { name, invite_only: v.inviteOnly });
            s = (await store.streamById(trx, caller.realm.id, id, caller.user.id))!;
            // A public channel is news to everyone; a private one only to its creator (its new subscribers hear below).
            events.push({ realmId: caller.realm.id, users: v.inviteOnly ? [caller.user.id] : null, payload: { type: 'stream', op: 'create', streams: [channelEventObject(s)] } });
          } else if (s.is_archived || (!s.subscribed && (isGuest(caller.user) || (s.invite_only && !(others && isAdmin(caller.user)))))) {
            throw chatErrors.bad(`Unable to access channel (${name}).`);
          }
          const before = new Set(await store.subscriberIds(trx, s.id));
          const added: number[] = [];
          for (const userId of targets) {
            const into = before.has(userId) ? already : subscribed;
            into.set(userId, [...(into.get(userId) ?? []), s.name]);
            if (before.has(userId)) continue;
            const settings = await store.subscribe(trx, userId, s.id);
            await recordAudit(trx, chatActor(caller), 'chat.subscription.create', { type: 'chat_stream', id: s.id }, userId === caller.user.id ? {} : { user_id: userId });
            addedFor.set(userId, [...(addedFor.get(userId) ?? []), { ...s, ...settings }]);
            added.push(userId);
          }
          if (!added.length) continue;
          // Someone added to a private channel learns of it first (the creator already did).
          const newToIt = s.invite_only ? added.filter((u) => u !== caller.user.id || !s.subscribed) : [];
          const told = events.some((e) => e.payload.type === 'stream' && e.users !== null && (e.payload.streams as Array<{ stream_id: number }>)[0].stream_id === s.id);
          const learners = told ? newToIt.filter((u) => u !== caller.user.id) : newToIt;
          if (learners.length) events.push({ realmId: caller.realm.id, users: learners, payload: { type: 'stream', op: 'create', streams: [channelEventObject(s)] } });
          const peers = [...before];
          if (peers.length) events.push({ realmId: caller.realm.id, users: peers, payload: { type: 'subscription', op: 'peer_add', stream_ids: [s.id], user_ids: added } });
          // The new subscribers hear of each other.
          for (const u of added) {
            const fellows = added.filter((x) => x !== u);
            if (fellows.length) events.push({ realmId: caller.realm.id, users: [u], payload: { type: 'subscription', op: 'peer_add', stream_ids: [s.id], user_ids: fellows } });
          }
        }
        // Each new subscriber hears of their subscriptions before of their fellows (as Zulip orders them).
        const adds: ChatEventRecord[] = [...addedFor].map(([userId, streamsAdded]) => ({ realmId: caller.realm.id, users: [userId], payload: { type: 'subscription', op: 'add', subscriptions: streamsAdded.map(subscriptionEventObject) } }));
        const creates = events.filter((e) => e.payload.type === 'stream');
        await writeEvents(trx, [...creates, ...adds, ...events.filter((e) => e.payload.type !== 'stream')]);
        const byUser = (m: Map<number, string[]>) => Object.fromEntries([...m].map(([id, list]) => [String(id), list]));
        return { subscribed: byUser(subscribed), already_subscribed: byUser(already) };
      });
    },

    /** DELETE /users/me/subscriptions. */
    async unsubscribe(caller: Caller, names: string[]) {
      return db.transaction().execute(async (trx) => {
        const removed: string[] = [];
        const notRemoved: string[] = [];
        for (const name of names) {
          const s = await store.streamByName(trx, caller.realm.id, name, caller.user.id);
          if (!s || (!s.subscribed && s.invite_only)) throw chatErrors.bad(`Channel(s) (${name}) do not exist`);
          if (!s.subscribed) {
            notRemoved.push(s.name);
            continue;
          }
          await store.unsubscribe(trx, caller.user.id, s.id);
          await recordAudit(trx, chatActor(caller), 'chat.subscription.delete', { type: 'chat_stream', id: s.id });
          removed.push(s.name);
          const peers = await store.subscriberIds(trx, s.id);
          await writeEvents(trx, [
            { realmId: caller.realm.id, users: [caller.user.id], payload: { type: 'subscription', op: 'remove', subscriptions: [{ stream_id: s.id, name: s.name }] } },
            ...(peers.length ? [{ realmId: caller.realm.id, users: peers, payload: { type: 'subscription', op: 'peer_remove', stream_ids: [s.id], user_ids: [caller.user.id] } }] : []),
          ]);
        }
        return { removed, not_removed: notRemoved };
      });
    },

    /**
     * POST /users/me/subscriptions/properties: each change stored on the caller's subscription,
     * all or none, and told to the caller's queues as Zulip's `subscription update` events
     * (muting also as the older `in_home_view`, the inverse).
     */
    async setSubscriptionProperties(caller: Caller, changes: Array<{ streamId: number; property: string; value: unknown }>) {
      const checked = changes.map((c) => {
        const column = subscriptionProperty(c.property, c.value);
        return { streamId: c.streamId, column, value: column === 'is_muted' && c.property === 'in_home_view' ? !c.value : (c.value as string | boolean) };
      });
      const subscribed = new Set((await store.subscribedStreams(db, caller.realm.id, caller.user.id)).map((s) => s.id));
      for (const c of checked) {
        if (subscribed.has(c.streamId)) continue;
        // As Zulip's access_stream_by_id: a channel out of the caller's reach is not named as one.
        const s = await store.streamById(db, caller.realm.id, dbId(c.streamId), caller.user.id);
        if (!s || !canAccess(caller, s)) throw chatErrors.bad('Invalid channel ID');
        throw chatErrors.bad(`Not subscribed to channel ID ${c.streamId}`);
      }
      await db.transaction().execute(async (trx) => {
        const events: ChatEventRecord[] = [];
        const tell = (streamId: number, property: string, value: unknown) => events.push({ realmId: caller.realm.id, users: [caller.user.id], payload: { type: 'subscription', op: 'update', stream_id: streamId, property, value } });
        for (const c of checked) {
          await store.setSubscriptionSetting(trx, caller.user.id, c.streamId, c.column, c.value);
          if (c.column === 'is_muted') tell(c.streamId, 'in_home_view', !c.value);
          tell(c.streamId, c.column, c.value);
        }
        await writeEvents(trx, events);
        await recordAudit(trx, chatActor(caller), 'chat.subscription.update', { type: 'chat_user', id: caller.user.id }, { changed: checked.map((c) => ({ stream_id: c.streamId, property: c.column })) });
      });
    },

    async subscriptions(caller: Caller) {
      return (await store.subscribedStreams(db, caller.realm.id, caller.user.id)).map(presentStream);
    },

    /**
     * The caller's subscriptions as Zulip's Subscription objects (GET /users/me/subscriptions,
     * /register), each with its active subscribers' ids when `includeSubscribers`.
     */
    async subscriptionObjects(caller: Caller, includeSubscribers = false) {
      const subs = (await store.subscribedStreams(db, caller.realm.id, caller.user.id)).map(subscriptionEventObject);
      if (!includeSubscribers) return subs;
      const members = await store.subscribersOf(db, subs.map((s) => s.stream_id));
      return subs.map((s) => ({ ...s, subscribers: members.filter((m) => m.stream_id === s.stream_id).map((m) => m.user_id) }));
    },

    /** Channels the caller can see as BasicChannel objects (for /register). */
    async channelObjects(caller: Caller) {
      const rows = await store.visibleStreams(db, caller.realm.id, caller.user.id);
      return rows.filter((s) => s.subscribed || !isGuest(caller.user)).map(channelEventObject);
    },

    /**
     * GET /streams with Zulip's filters: public channels (not for guests) and subscribed ones by
     * default; `include_all` every channel the caller has metadata access to (an administrator:
     * all of them); archived channels only when `exclude_archived` is false.
     */
    async streams(caller: Caller, o: StreamsFilter = {}) {
      const { includePublic = true, includeSubscribed = true, includeAll = false, includeContent = false, excludeArchived = true } = o;
      const everything = includeAll && isAdmin(caller.user);
      const rows = everything ? await store.realmStreams(db, caller.realm.id, caller.user.id) : await store.visibleStreams(db, caller.realm.id, caller.user.id);
      // Each include_* adds its set, as Zulip's: the answer is their union.
      const reachable = (s: StreamRow) => s.subscribed || (!s.invite_only && !isGuest(caller.user));
      return rows
        .filter((s) => !(excludeArchived && s.is_archived))
        .filter((s) => everything || (includeSubscribed && s.subscribed) || (includePublic && !s.invite_only && !isGuest(caller.user)) || ((includeAll || includeContent) && reachable(s)))
        .map(presentStream);
    },

    /** GET /streams/{stream_id}: a channel the caller can see (administrators: any of the organization), as Zulip's BasicChannel. */
    async stream(caller: Caller, id: number) {
      const s = await store.streamById(db, caller.realm.id, dbId(id), caller.user.id);
      if (!s || !(canAccess(caller, s) || isAdmin(caller.user))) throw chatErrors.bad('Invalid channel ID');
      return channelEventObject(s);
    },

    /**
     * PATCH /streams/{stream_id}: an organization administrator or the channel's creator renames
     * it, changes its description or makes it private or public, as Zulip's defaults allow. Everyone who can see the
     * channel gets a `stream update` event per change; whoever stops seeing it (public made
     * private) a `stream delete`, and whoever starts (private made public) a `stream create`.
     */
    async update(caller: Caller, id: number, v: { newName?: string; description?: string; isPrivate?: boolean; isWebPublic?: boolean; historyPublicToSubscribers?: boolean }) {
      const s = await store.streamById(db, caller.realm.id, dbId(id), caller.user.id);
      if (!s || !(canAccess(caller, s) || isAdmin(caller.user))) throw chatErrors.bad('Invalid channel ID');
      if (!canAdminister(caller, s)) throw chatErrors.bad('You do not have permission to administer this channel.');
      const inviteOnly = v.isPrivate ?? s.invite_only;
      // As Zulip's update_stream_backend: history follows privacy unless given; a public channel's history is public.
      const historyPublic = v.historyPublicToSubscribers ?? (v.isPrivate !== undefined ? !v.isPrivate : !s.invite_only);
      if ((v.isWebPublic && inviteOnly) || (!inviteOnly && !historyPublic)) throw chatErrors.bad('Invalid parameters');
      if (inviteOnly && historyPublic) {
        throw chatErrors.bad(
          'Private channels with shared history are not supported by this server: subscribers of a private channel read only the messages sent while they were subscribed. Send history_public_to_subscribers false, or leave it out.',
        );
      }
      // Changing who may read requires reading it oneself (an administrator outside a private channel may not).
      if (v.isPrivate !== undefined && !canAccess(caller, s)) throw chatErrors.bad('Channel content access is required.');
      if (v.isWebPublic) throw chatErrors.bad('Web-public channels are not enabled.');
      const name = v.newName !== undefined ? checkStreamName(v.newName) : undefined;
      const description = v.description?.replace(/\n/g, ' ');
      if (name !== undefined && name === s.name) throw chatErrors.bad('Channel already has that name.');
      await db.transaction().execute(async (trx) => {
        await lockKey(trx, `chat_streams:${caller.realm.id}`);
        const current = await store.streamById(trx, caller.realm.id, s.id, caller.user.id);
        if (!current) throw chatErrors.bad('Invalid channel ID');
        if (name !== undefined && name.toLowerCase() !== current.name.toLowerCase() && (await store.streamByName(trx, caller.realm.id, name, caller.user.id))) {
          throw chatErrors.bad('Channel name already in use.');
        }
        const events: ChatEventRecord[] = [];
        let viewers = await store.metadataViewers(trx, caller.realm.id, current.id, current.invite_only);
        const tell = (users: number[], payload: Record<string, unknown>) => users.length && events.push({ realmId: caller.realm.id, users, payload: { type: 'stream', op: 'update', stream_id: current.id, ...payload } });
        let shown = current;
        // In Zulip's order: privacy, then description, then name.
        if (inviteOnly !== current.invite_only) {
          await store.updateStream(trx, current.id, { invite_only: inviteOnly });
          shown = { ...shown, invite_only: inviteOnly };
          const after = await store.metadataViewers(trx, caller.realm.id, current.id, inviteOnly);
          const lost = viewers.filter((u) => !after.includes(u));
          const gained = after.filter((u) => !viewers.includes(u));
          if (lost.length) events.push({ realmId: caller.realm.id, users: lost, payload: { type: 'stream', op: 'delete', streams: [{ stream_id: current.id }], stream_ids: [current.id] } });
          if (gained.length) events.push({ realmId: caller.realm.id, users: gained, payload: { type: 'stream', op: 'create', streams: [channelEventObject(shown)] } });
          tell(after.filter((u) => viewers.includes(u)), { name: shown.name, property: 'invite_only', value: inviteOnly, history_public_to_subscribers: !inviteOnly, is_web_public: false });
          viewers = after;
        }
        if (description !== undefined) {
          await store.updateStream(trx, current.id, { description });
          shown = { ...shown, description };
          tell(viewers, { name: shown.name, property: 'description', value: description, rendered_description: channelEventObject(shown).rendered_description });
        }
        if (name !== undefined) {
          await store.updateStream(trx, current.id, { name });
          tell(viewers, { name: shown.name, property: 'name', value: name });
          shown = { ...shown, name };
        }
        await writeEvents(trx, events);
        await recordAudit(trx, chatActor(caller), 'chat.stream.update', { type: 'chat_stream', id: current.id }, { ...(name !== undefined ? { name } : {}), ...(description !== undefined ? { description } : {}), invite_only: inviteOnly });
      });
      deps.afterCommit?.();
    },

    /** GET /streams/{stream_id}/members: active subscribers of a channel the caller can reach. */
    async members(caller: Caller, id: number) {
      const s = await byId(caller, id);
      return store.subscriberIds(db, s.id);
    },

    /** GET /get_stream_id. */
    async streamId(caller: Caller, name: string) {
      return (await byName(caller, name)).id;
    },
  };
}
