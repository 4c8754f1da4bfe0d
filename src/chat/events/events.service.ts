import type { Logger } from 'pino';
import type { Db } from '../../db/database.ts';
import { ChatError } from '../http/errors.ts';
import { MAX_MESSAGE_LENGTH, type ChatMessagesService, type MessageEventHidden } from '../messages/messages.service.ts';
import { matches, type NarrowTerm, type Term } from '../messages/narrow.ts';
import type { ChatEmojiService } from '../emoji/emoji.service.ts';
import type { ChatMutingService } from '../muting/muting.service.ts';
import type { ChatUploadsService } from '../uploads/uploads.service.ts';
import type { ChatPresenceService } from '../presence/presence.ts';
import type { ChatProfileFieldsService } from '../profile-fields/profile-fields.service.ts';
import { FEATURE_LEVEL, ZULIP_VERSION } from '../realm/realm.service.ts';
import { MAX_STREAM_NAME_LENGTH, MAX_TOPIC_NAME_LENGTH, type ChatStreamsService } from '../streams/streams.service.ts';
import { presentUserForEvents, userSettings } from '../users/users.present.ts';
import * as usersStore from '../users/users.store.ts';
import type { Caller } from '../users/users.service.ts';
import { ChatEventReader, type ChatEventRow } from './events.bus.ts';
import { EventQueues, type Queue, type QueueLimits, type QueuedEvent } from './queues.ts';

/** The event types this server sends, and so the state /register can give. */
export const EVENT_TYPES = [
  'message', 'update_message', 'delete_message', 'reaction', 'update_message_flags', 'typing', 'subscription', 'stream',
  'realm_user', 'user_status', 'presence', 'user_topic', 'muted_topics', 'realm', 'custom_profile_fields', 'recent_private_conversations', 'heartbeat',
  'realm_emoji', 'user_settings', 'realm_user_groups', 'muted_users', 'drafts', 'alert_words', 'attachment',
] as const;

export const badQueue = (id: string) => new ChatError(`Bad event queue ID: ${id}`, { code: 'BAD_EVENT_QUEUE_ID', data: { queue_id: id } });

const unix = (iso: string) => Math.floor(new Date(iso).getTime() / 1000);

export type ChatEventsService = ReturnType<typeof createChatEventsService>;

export function createChatEventsService(deps: {
  db: Db;
  messages: ChatMessagesService;
  streams: ChatStreamsService;
  profileFields: ChatProfileFieldsService;
  presence: ChatPresenceService;
  emoji: ChatEmojiService;
  uploads: ChatUploadsService;
  muting: ChatMutingService;
  limits?: Partial<QueueLimits>;
}) {
  const { db, messages, streams, profileFields } = deps;
  const queues = new EventQueues(deps.limits);
  let reader: ChatEventReader | null = null;
  let logger: Logger | undefined;

  /** An event from the log as one queue receives it: per-user flags, its markdown choice, its narrow. */
  function shape(q: Queue, row: ChatEventRow): Record<string, unknown> | null {
    const { _hidden, _raw_content, ...payload } = row.payload as Record<string, unknown> & { _hidden?: MessageEventHidden; _raw_content?: string };
    const flags = row.flags?.[String(q.userId)] ?? [];
    if (payload.type === 'message' && _hidden) {
      const message = { ...(payload.message as Record<string, unknown>) };
      if (!q.applyMarkdown) Object.assign(message, { content: _hidden.raw_content, content_type: 'text/x-markdown' });
      if (q.clientGravatar && _hidden.gravatar) message.avatar_url = null;
      if (q.messageFilter) {
        const m = { type: message.type as 'stream', stream_id: message.stream_id as number | undefined, topic: _hidden.topic, dm_key: _hidden.dm_key, sender_id: message.sender_id as number, content: _hidden.raw_content, id: message.id as number };
        if (!q.messageFilter({ ...m, flags } as unknown as Record<string, unknown>)) return null;
      }
      const out: Record<string, unknown> = { type: 'message', message, flags };
      if (_hidden.local && _hidden.local.queue_id === q.id) out.local_message_id = _hidden.local.local_id;
      return out;
    }
    if (payload.type === 'update_message') {
      const out: Record<string, unknown> = { ...payload, flags };
      if (!q.applyMarkdown && _raw_content !== undefined) out.content = _raw_content;
      return out;
    }
    return payload;
  }

  function filterFor(terms: Term[]): Queue['messageFilter'] {
    if (!terms.length) return null;
    return (m) => matches(terms, m as never, (m as { flags: string[] }).flags);
  }

  return {
    queues,

    /** Starts reading the event log (the chat server calls it when it starts). */
    async start(log?: Logger) {
      logger = log;
      reader ??= new ChatEventReader({ db, deliver: (row) => queues.deliver(row, shape), log: logger, keepMs: 15 * 60_000 });
      await reader.start();
    },

    async stop() {
      await reader?.stop();
      queues.close();
    },

    /** Reads the log now (after this process committed events), instead of waiting for the NOTIFY. */
    poke() {
      reader?.poke();
    },

    /** POST /register: a queue, then the state asked for (so no change between the two is lost). */
    async register(
      caller: Caller,
      v: { eventTypes?: string[]; fetchEventTypes?: string[]; narrow: NarrowTerm[]; applyMarkdown: boolean; clientGravatar: boolean; includeSubscribers: boolean; slimPresence: boolean },
    ) {
      if (caller.user.is_bot && caller.user.bot_type === 2) throw new ChatError('This API is not available to incoming webhook bots.');
      const { terms } = await messages.narrowConditions(caller, v.narrow);
      const q = queues.create({
        userId: caller.user.id,
        realmId: caller.realm.id,
        eventTypes: v.eventTypes ? new Set([...v.eventTypes, 'heartbeat']) : null,
        messageFilter: filterFor(terms),
        applyMarkdown: v.applyMarkdown,
        clientGravatar: v.clientGravatar,
      });
      const want = new Set(v.fetchEventTypes ?? v.eventTypes ?? EVENT_TYPES);
      const state: Record<string, unknown> = {
        queue_id: q.id,
        last_event_id: -1,
        zulip_feature_level: FEATURE_LEVEL,
        zulip_version: ZULIP_VERSION,
        zulip_merge_base: ZULIP_VERSION,
      };
      if (want.has('message')) state.max_message_id = await messages.maxMessageId(caller);
      if (want.has('message') || want.has('update_message_flags')) state.unread_msgs = await messages.unreadMsgs(caller);
      if (want.has('realm')) {
        Object.assign(state, {
          realm_name: caller.realm.name,
          realm_description: caller.realm.description,
          realm_url: caller.realm.url,
          realm_uri: caller.realm.url,
          max_message_length: MAX_MESSAGE_LENGTH,
          max_topic_length: MAX_TOPIC_NAME_LENGTH,
          max_stream_name_length: MAX_STREAM_NAME_LENGTH,
          max_stream_description_length: 1024,
          max_file_upload_size_mib: deps.uploads.maxFileUploadMib,
          // No organization quota (see docs/chat-server.md): null, as Zulip reports an unlimited one.
          realm_upload_quota_mib: null,
        });
      }
      if (want.has('realm_user')) {
        const rows = await usersStore.listUsers(db, caller.realm.id);
        const present = (r: (typeof rows)[number]) => presentUserForEvents(r, { caller: caller.user, realm: caller.realm, clientGravatar: v.clientGravatar });
        Object.assign(state, {
          realm_users: rows.filter((r) => r.is_active && !r.is_bot).map(present),
          realm_non_active_users: rows.filter((r) => !r.is_active && !r.is_bot).map(present),
          cross_realm_bots: [],
          user_id: caller.user.id,
          email: caller.user.email,
          delivery_email: caller.user.delivery_email,
          full_name: caller.user.full_name,
          is_admin: caller.user.role <= 200,
          is_owner: caller.user.role === 100,
          is_guest: caller.user.role === 600,
          is_moderator: caller.user.role === 300,
        });
      }
      if (want.has('subscription')) {
        Object.assign(state, { subscriptions: await streams.subscriptionObjects(caller, v.includeSubscribers), unsubscribed: [], never_subscribed: [] });
      }
      if (want.has('stream')) state.streams = await streams.channelObjects(caller);
      if (want.has('user_topic')) state.user_topics = await streams.userTopics(caller);
      if (want.has('muted_topics')) {
        const names = new Map((await streams.subscriptions(caller)).map((s) => [s.stream_id, s.name]));
        state.muted_topics = (await streams.userTopics(caller)).filter((t) => t.visibility_policy === 1 && names.has(t.stream_id)).map((t) => [names.get(t.stream_id)!, t.topic_name, t.last_updated]);
      }
      if (want.has('user_status')) {
        const rows = await db
          .selectFrom('chat_users as u')
          .leftJoin('chat_user_status as s', 's.user_id', 'u.id')
          .select(['u.id', 'u.presence_enabled', 's.status_text', 's.emoji_name', 's.emoji_code', 's.reaction_type'])
          .where('u.realm_id', '=', caller.realm.id)
          .where('u.is_active', '=', true)
          .execute();
        const map: Record<string, Record<string, unknown>> = {};
        for (const r of rows) {
          const s: Record<string, unknown> = {};
          if (!r.presence_enabled) s.away = true;
          if (r.status_text) s.status_text = r.status_text;
          if (r.emoji_name) Object.assign(s, { emoji_name: r.emoji_name, emoji_code: r.emoji_code, reaction_type: r.reaction_type });
          if (Object.keys(s).length) map[String(r.id)] = s;
        }
        state.user_status = map;
      }
      if (want.has('custom_profile_fields')) state.custom_profile_fields = await profileFields.list(caller);
      if (want.has('recent_private_conversations')) state.recent_private_conversations = await messages.recentPrivateConversations(caller);
      if (want.has('realm_emoji')) state.realm_emoji = await deps.emoji.list(caller);
      if (want.has('user_settings')) state.user_settings = userSettings(caller.user);
      if (want.has('muted_users')) state.muted_users = await deps.muting.mutedUsers(caller);
      // This server has no user groups, saved drafts or alert words (see docs/chat-server.md): each list is empty.
      if (want.has('realm_user_groups')) state.realm_user_groups = [];
      if (want.has('drafts')) state.drafts = [];
      if (want.has('alert_words')) state.alert_words = [];
      if (want.has('presence')) Object.assign(state, { presences: await deps.presence.presences(caller, v.slimPresence), server_timestamp: Date.now() / 1000, presence_last_update_id: -1 });
      return state;
    },

    /** GET /events: long-polls the caller's queue. */
    async events(caller: Caller, v: { queueId: string; lastEventId: number; dontBlock: boolean; signal?: AbortSignal }): Promise<{ events: QueuedEvent[]; queue_id: string }> {
      const q = queues.get(v.queueId, caller.user.id);
      if (!q) throw badQueue(v.queueId);
      const events = await queues.poll(q, v.lastEventId, !v.dontBlock, v.signal);
      return { events, queue_id: q.id };
    },

    /** DELETE /events. */
    deleteQueue(caller: Caller, queueId: string) {
      const q = queues.get(queueId, caller.user.id);
      if (!q) throw badQueue(queueId);
      queues.remove(q);
    },
  };
}

export { unix };
