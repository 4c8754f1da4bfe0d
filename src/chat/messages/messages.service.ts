import crypto from 'node:crypto';
import { sql, type Transaction } from 'kysely';
import type { Db } from '../../db/database.ts';
import { lockKey } from '../../db/conditional.ts';
import type { Database } from '../../db/schema.ts';
import type { EditHistoryEntry } from '../chat.tables.ts';
import type { ChatEmojiService } from '../emoji/emoji.service.ts';
import { writeEvents, type ChatEventRecord } from '../events/events.bus.ts';
import { ChatError, chatErrors } from '../http/errors.ts';
import { dbId } from '../http/params.ts';
import type { ChatStreamsService } from '../streams/streams.service.ts';
import type { ChatMutingService } from '../muting/muting.service.ts';
import type { ChatUploadsService } from '../uploads/uploads.service.ts';
import { MAX_TOPIC_NAME_LENGTH } from '../streams/streams.service.ts';
import { avatarUrl, canAccessDeliveryEmail, isAdmin, isGuest, VISIBILITY } from '../users/users.present.ts';
import type { Caller } from '../users/users.service.ts';
import * as store from './messages.store.ts';
import type { MessageRow } from './messages.store.ts';
import { dmKey, EDITABLE_FLAGS, FLAG, flagNames, resolveNarrow, termSql, type FlagName, type NarrowTerm, type Term } from './narrow.ts';
import { htmlDiff } from './html-diff.ts';
import { renderMessage, type MentionTarget } from './render.ts';

/** Zulip's limits, as /register reports them. */
export const MAX_MESSAGE_LENGTH = 10_000;
export const MAX_FETCH = 5000;
/** Anchor "newest" as Zulip resolves it: larger than any message id. */
export const LARGER_THAN_MAX_MESSAGE_ID = 10_000_000_000_000_000;
/** Zulip's default limit for editing a message's content (realm_message_content_edit_limit_seconds). */
export const CONTENT_EDIT_LIMIT_SECONDS = 600;
/** How Zulip shows the empty topic to clients that do not take it (realm_empty_topic_display_name's default). */
export const EMPTY_TOPIC_DISPLAY_NAME = 'general chat';

const unix = (iso: string) => Math.floor(new Date(iso).getTime() / 1000);

/** A hidden part of an event payload: read by the queues, never sent. */
export interface MessageEventHidden {
  raw_content: string;
  /** The sender's avatar may be left to the client under client_gravatar. */
  gravatar: boolean;
  dm_key: string | null;
  topic: string;
  local: { queue_id: string; local_id: string } | null;
}

type Sender = Awaited<ReturnType<typeof store.usersByIds>>[number];

function truncate(s: string, limit: number, suffix: string): string {
  const cps = [...s];
  return cps.length <= limit ? s : cps.slice(0, limit - [...suffix].length).join('') + suffix;
}

/** A stable recipient id for a conversation, as clients compare them (channels: their id). */
function recipientId(type: string, streamId: number | null, key: string | null): number {
  if (type === 'stream') return streamId!;
  return 2 ** 31 + crypto.createHash('sha1').update(key!).digest().readUInt32BE(0);
}

/** A range's anchor: a message id, or where the server finds it. */
export type Anchor = number | 'newest' | 'oldest' | 'first_unread';

export type ChatMessagesService = ReturnType<typeof createChatMessagesService>;

export function createChatMessagesService(deps: { db: Db; streams: ChatStreamsService; emoji: ChatEmojiService; uploads: ChatUploadsService; muting: Pick<ChatMutingService, 'mutersOf'>; afterCommit: () => void }) {
  const { db, streams, emoji, uploads, afterCommit } = deps;

  /** Runs a change and its events in one transaction, then wakes this process's queues. */
  async function change<T>(fn: (trx: Transaction<Database>, emit: (e: ChatEventRecord) => void) => Promise<T>): Promise<T> {
    const events: ChatEventRecord[] = [];
    const out = await db.transaction().execute(async (trx) => {
      const r = await fn(trx, (e) => events.push(e));
      await writeEvents(trx, events);
      return r;
    });
    if (events.length) afterCommit();
    return out;
  }

  const refuseWebhookBots = (caller: Caller) => {
    if (caller.user.is_bot && caller.user.bot_type === 2) throw chatErrors.bad('This API is not available to incoming webhook bots.');
  };

  async function mentionResolver(realmId: number) {
    const rows = await db.selectFrom('chat_users').select(['id', 'full_name']).where('realm_id', '=', realmId).where('is_active', '=', true).execute();
    const byName = new Map<string, MentionTarget[]>();
    for (const r of rows) {
      const k = r.full_name.toLowerCase();
      byName.set(k, [...(byName.get(k) ?? []), r]);
    }
    const byId = new Map(rows.map((r) => [r.id, r]));
    return (name: string, id: number | null): MentionTarget | null => {
      if (id !== null) {
        const u = byId.get(id);
        return u && u.full_name.toLowerCase() === name.toLowerCase() ? u : name === '' && u ? u : null;
      }
      const found = byName.get(name.toLowerCase());
      return found?.length === 1 ? found[0] : null;
    };
  }

  /** Renders content for the caller's organization; its names are read only when the content can mention someone. */
  async function render(caller: Caller, content: string) {
    return renderMessage(content, content.includes('@**') || content.includes('@_**') ? await mentionResolver(caller.realm.id) : () => null);
  }

  async function usersFromOperand(caller: Caller, operand: unknown): Promise<number[]> {
    let items: unknown[];
    if (Array.isArray(operand)) items = operand;
    else if (typeof operand === 'string') items = operand.split(',').map((s) => s.trim()).filter(Boolean);
    else if (typeof operand === 'number') items = [operand];
    else throw chatErrors.bad('Invalid user list');
    const ids: number[] = [];
    for (const item of items) ids.push(await userFromOperand(caller, item));
    return ids;
  }

  async function userFromOperand(caller: Caller, item: unknown): Promise<number> {
    let row: { id: number } | undefined;
    if (typeof item === 'number' && Number.isSafeInteger(item)) {
      row = await db.selectFrom('chat_users').select('id').where('realm_id', '=', caller.realm.id).where('id', '=', dbId(item)).executeTakeFirst();
    } else if (typeof item === 'string') {
      const e = item.toLowerCase();
      row = await db
        .selectFrom('chat_users')
        .select('id')
        .where('realm_id', '=', caller.realm.id)
        .where((eb) => eb.or([eb(eb.fn('lower', ['email']), '=', e), eb(eb.fn('lower', ['delivery_email']), '=', e)]))
        .executeTakeFirst();
    }
    if (!row) throw chatErrors.bad(`Invalid user ID ${typeof item === 'string' ? `'${item}'` : String(item)}`.replace(/^Invalid user ID '(.*@.*)'$/, "Invalid email '$1'"));
    return row.id;
  }

  async function streamFromOperand(caller: Caller, operand: unknown) {
    if (typeof operand === 'number') return streams.byId(caller, operand);
    if (typeof operand === 'string') {
      if (/^\d{1,10}$/.test(operand)) return streams.byId(caller, Number(operand));
      return streams.byName(caller, operand);
    }
    throw chatErrors.bad('Invalid channel: give its name or ID');
  }

  async function narrowConditions(caller: Caller, narrow: NarrowTerm[]): Promise<{ terms: Term[]; near: number | null }> {
    return resolveNarrow(narrow, {
      selfId: caller.user.id,
      streamId: async (o) => {
        try {
          return (await streamFromOperand(caller, o)).id;
        } catch (err) {
          if (err instanceof ChatError) throw chatErrors.bad(`Invalid narrow operator: unknown channel ${JSON.stringify(o)}`);
          throw err;
        }
      },
      userId: (o) => userFromOperand(caller, o).catch(() => Promise.reject(chatErrors.bad(`Invalid narrow operator: unknown user ${JSON.stringify(o)}`))),
      userIds: (o) => usersFromOperand(caller, o).catch(() => Promise.reject(chatErrors.bad(`Invalid narrow operator: unknown user in ${JSON.stringify(o)}`))),
    });
  }

  /** Message objects for a viewer, as Zulip's GET /messages answers them. */
  async function present(caller: Caller, rows: MessageRow[], opts: { applyMarkdown: boolean; clientGravatar: boolean; flags: boolean }) {
    const senderIds = new Set<number>();
    const dmIds = new Set<number>();
    const streamIds = new Set<number>();
    for (const r of rows) {
      senderIds.add(r.sender_id);
      if (r.type === 'private') for (const id of r.dm_key!.split(',')) dmIds.add(Number(id));
      else streamIds.add(r.stream_id!);
    }
    const users = new Map((await store.usersByIds(db, caller.realm.id, [...new Set([...senderIds, ...dmIds])])).map((u) => [u.id, u]));
    const names = new Map((await store.streamNames(db, [...streamIds])).map((s) => [s.id, s.name]));
    const reactions = await store.reactionsOf(db, rows.map((r) => r.id));
    return rows.map((r) => {
      const sender = users.get(r.sender_id)!;
      const out = messageObject(caller, r, sender, {
        displayRecipient: r.type === 'stream' ? names.get(r.stream_id!)! : r.dm_key!.split(',').map((id) => dmRecipient(users.get(Number(id))!)),
        reactions: reactions.filter((x) => x.message_id === r.id).map((x) => ({ emoji_name: x.emoji_name, emoji_code: x.emoji_code, reaction_type: x.reaction_type, user_id: x.user_id })),
        applyMarkdown: opts.applyMarkdown,
        clientGravatar: opts.clientGravatar,
      });
      if (opts.flags) out.flags = flagNames(r.flags);
      return out;
    });
  }

  const dmRecipient = (u: Sender) => ({ id: u.id, email: u.email, full_name: u.full_name, is_mirror_dummy: false });

  function messageObject(
    caller: Caller | null,
    r: Omit<MessageRow, 'flags'>,
    sender: Sender,
    o: { displayRecipient: unknown; reactions: unknown[]; applyMarkdown: boolean; clientGravatar: boolean },
  ): Record<string, unknown> {
    const canSee = caller ? canAccessDeliveryEmail(caller.user, sender.id, sender.email_address_visibility) : sender.email_address_visibility === VISIBILITY.everyone;
    const out: Record<string, unknown> = {
      id: r.id,
      sender_id: r.sender_id,
      content: o.applyMarkdown ? r.rendered_content : r.content,
      content_type: o.applyMarkdown ? 'text/html' : 'text/x-markdown',
      recipient_id: recipientId(r.type, r.stream_id, r.dm_key),
      timestamp: unix(r.date_sent),
      client: r.client,
      subject: r.type === 'stream' ? r.topic : '',
      topic_links: [],
      is_me_message: /^\/me( |$)/.test(r.content),
      reactions: o.reactions,
      submessages: [],
      sender_full_name: sender.full_name,
      sender_email: sender.email,
      sender_realm_str: caller?.realm.string_id ?? '',
      display_recipient: o.displayRecipient,
      type: r.type,
      avatar_url: o.clientGravatar && canSee && sender.avatar_source === 'G' ? null : avatarUrl({ url: caller?.realm.url ?? '', id: caller?.realm.id ?? 0 }, sender),
    };
    if (r.type === 'stream') out.stream_id = r.stream_id;
    if (r.last_edit_time) out.last_edit_timestamp = unix(r.last_edit_time);
    if (r.last_moved_time) out.last_moved_timestamp = unix(r.last_moved_time);
    return out;
  }

  function editableFlag(flag: string): number {
    if (!(flag in FLAG) || !EDITABLE_FLAGS.has(flag as FlagName)) throw chatErrors.bad(`Invalid flag: '${flag}'`);
    return FLAG[flag as FlagName];
  }

  /** Sets or clears one flag on the caller's rows of these messages, with its event; answers the ids that changed. */
  async function applyFlag(trx: Transaction<Database>, emit: (e: ChatEventRecord) => void, caller: Caller, ids: number[], op: 'add' | 'remove', flag: string, bit: number) {
    // Starring a visible message the viewer has no row for (public history) gives them one, as Zulip does.
    if (op === 'add' && flag === 'starred') {
      for (const mid of ids) {
        const m = await store.messageForViewer(trx, caller.realm.id, mid, caller.user.id, isGuest(caller.user));
        if (m && m.flags === null) await store.insertUserMessages(trx, [{ user_id: caller.user.id, message_id: mid, flags: FLAG.read }]);
      }
    }
    const changed = await store.changeFlag(trx, caller.user.id, bit, op === 'add', { ids });
    if (changed.length) emit({ realmId: caller.realm.id, users: [caller.user.id], payload: { type: 'update_message_flags', op, operation: op, flag, messages: changed, all: false } });
    return changed;
  }

  /**
   * The messages a narrow's range holds around an anchor, oldest first, as Zulip's fetch_messages
   * reads them for GET /messages and POST /messages/flags/narrow.
   */
  async function readRange(caller: Caller, v: { anchor: Anchor | undefined; numBefore: number; numAfter: number; includeAnchor: boolean; conditions: ReturnType<typeof termSql>[]; near: number | null }) {
    const guest = isGuest(caller.user);
    const conditions = v.conditions;
    if (v.numBefore < 0 || v.numAfter < 0) throw chatErrors.bad('num_before and num_after must not be negative');
    if (v.numBefore + v.numAfter > MAX_FETCH) throw chatErrors.bad(`Too many messages requested (maximum ${MAX_FETCH}).`);
    let requested = v.anchor ?? (v.near !== null ? v.near : undefined);
    // As Zulip's parse_anchor_value: a plain 400, not a missing-variable one.
    if (requested === undefined) throw chatErrors.bad("Missing 'anchor' argument: give a message ID, or newest, oldest or first_unread");
    if (requested === 'first_unread') {
      const first = await store.firstUnread(db, { realmId: caller.realm.id, viewerId: caller.user.id, guest, conditions });
      requested = first ? first.id : 'newest';
    }
    const anchor = requested === 'newest' ? LARGER_THAN_MAX_MESSAGE_ID : requested === 'oldest' ? 0 : Math.max(0, requested);
    const q = { realmId: caller.realm.id, viewerId: caller.user.id, guest, conditions };
    // Ids are int4 in the database: a larger anchor (as "newest") reads as the largest.
    const at = Math.min(anchor, 2_147_483_647);
    const before = v.numBefore ? await store.messagesAround(db, { ...q, anchor: at, side: 'before', inclusive: at < anchor, limit: v.numBefore }) : [];
    const after = await store.messagesAround(db, { ...q, anchor: at, side: 'after', inclusive: true, limit: v.numAfter + 1 });
    const foundAnchor = after.length > 0 && after[0].id === anchor;
    let afterRows = after;
    if (foundAnchor) {
      if (!v.includeAnchor) afterRows = after.slice(1);
      else afterRows = after.slice(0, v.numAfter + 1);
    } else afterRows = after.slice(0, v.numAfter);
    const afterCount = foundAnchor ? after.length - 1 : after.length;
    return {
      rows: [...before.reverse(), ...afterRows],
      anchor,
      foundAnchor,
      foundOldest: before.length < v.numBefore || anchor === 0,
      foundNewest: afterCount < v.numAfter + (foundAnchor ? 0 : 1) || anchor === LARGER_THAN_MAX_MESSAGE_ID,
    };
  }

  async function accessMessage(caller: Caller, id: number): Promise<MessageRow> {
    const row = await store.messageForViewer(db, caller.realm.id, dbId(id), caller.user.id, isGuest(caller.user));
    if (!row) throw chatErrors.bad('Invalid message(s)');
    return row;
  }

  return {
    messageObject,
    present,

    /** POST /messages. */
    async send(caller: Caller, v: { type: string; to: string; topic: string | undefined; content: string; queueId?: string; localId?: string; readBySender?: boolean }) {
      const type = v.type === 'channel' || v.type === 'stream' ? 'stream' : v.type === 'private' || v.type === 'direct' ? 'private' : null;
      if (!type) throw chatErrors.bad('Invalid message type');
      if (v.queueId !== undefined && v.localId === undefined) throw chatErrors.bad('Missing local_id');
      let content = v.content.replace(/\r\n?/g, '\n').trimEnd();
      if (!content.trim()) throw chatErrors.bad('Message must not be empty');
      // As Zulip: a longer message is cut at the limit and says so.
      content = truncate(content, MAX_MESSAGE_LENGTH, '\n[message truncated]');
      let toParsed: unknown = v.to;
      try {
        toParsed = JSON.parse(v.to);
      } catch {
        /* a plain name or a comma-separated list of addresses */
      }

      let streamId: number | null = null;
      let topic = '';
      let recipients: number[];
      let key: string | null = null;
      if (type === 'stream') {
        if (Array.isArray(toParsed)) {
          if (toParsed.length !== 1) throw chatErrors.bad('Cannot send to multiple channels');
          toParsed = toParsed[0];
        }
        const stream = await streamFromOperand(caller, typeof toParsed === 'number' ? toParsed : v.to.startsWith('"') ? toParsed : v.to);
        if (!stream.subscribed && (stream.invite_only || isGuest(caller.user))) throw chatErrors.bad(`Not authorized to send to channel '${stream.name}'`);
        streamId = stream.id;
        if (v.topic === undefined) throw chatErrors.missing('topic');
        topic = truncate(v.topic.replace(/[\r\n\t]+/g, ' ').trim(), MAX_TOPIC_NAME_LENGTH, '...');
        if ([...topic].some((c) => c.codePointAt(0)! < 0x20 || c === '\u007f')) throw chatErrors.bad('Invalid character in topic');
        recipients = await store.activeSubscribers(db, stream.id);
      } else {
        const ids = await usersFromOperand(caller, toParsed);
        if (!ids.length) throw chatErrors.bad('Message must have recipients');
        const rows = await store.usersByIds(db, caller.realm.id, ids);
        const inactive = rows.find((u) => !u.is_active);
        if (inactive) throw chatErrors.bad(`'${inactive.email}' is no longer using Zulip.`);
        recipients = [...new Set([...ids, caller.user.id])].sort((a, b) => a - b);
        key = dmKey(recipients);
      }

      const rendered = await render(caller, content);
      const now = new Date();
      const recipientSet = new Set(recipients);
      recipientSet.add(caller.user.id);
      // The sender has read their own message unless they ask otherwise (read_by_sender); mentions flag the others.
      const readBySender = v.readBySender ?? true;
      // Those who muted the sender receive it read, as Zulip does.
      const muters = await deps.muting.mutersOf(db, caller.user.id, recipients);
      const flagsOf = (userId: number) => {
        if (userId === caller.user.id) return readBySender ? FLAG.read : 0;
        let f = muters.has(userId) ? FLAG.read : 0;
        if (rendered.mentionedUserIds.has(userId)) f |= FLAG.mentioned;
        if (rendered.streamWildcard) f |= FLAG.stream_wildcard_mentioned;
        if (rendered.topicWildcard) f |= FLAG.topic_wildcard_mentioned;
        return f;
      };

      return change(async (trx, emit) => {
        const row = await trx
          .insertInto('chat_messages')
          .values({ realm_id: caller.realm.id, sender_id: caller.user.id, type, stream_id: streamId, topic, dm_key: key, content, rendered_content: rendered.html, client: 'API', date_sent: now, edit_history: '[]' })
          .returning([...store.MESSAGE_COLUMNS.map((c) => c.slice(2) as 'id')])
          .executeTakeFirstOrThrow();
        const message = row as unknown as Omit<MessageRow, 'flags'>;
        const ums = [...recipientSet].map((u) => ({ user_id: u, message_id: message.id, flags: flagsOf(u) }));
        await store.insertUserMessages(trx, ums);
        await uploads.claim(trx, caller, message.id, content, emit, { edit: false });
        const people = await store.usersByIds(trx, caller.realm.id, [...recipientSet]);
        const sender = people.find((p) => p.id === caller.user.id)!;
        const displayRecipient = type === 'stream' ? (await store.streamNames(trx, [streamId!]))[0].name : recipients.map((id) => dmRecipient(people.find((p) => p.id === id)!));
        const obj = messageObject(caller, message, sender, { displayRecipient, reactions: [], applyMarkdown: true, clientGravatar: false });
        const hidden: MessageEventHidden = {
          raw_content: content,
          gravatar: sender.avatar_source === 'G' && sender.email_address_visibility === VISIBILITY.everyone,
          dm_key: key,
          topic,
          local: v.queueId !== undefined ? { queue_id: v.queueId, local_id: v.localId! } : null,
        };
        emit({
          realmId: caller.realm.id,
          users: ums.map((u) => u.user_id),
          flags: Object.fromEntries(ums.map((u) => [u.user_id, flagNames(u.flags)])),
          payload: { type: 'message', message: obj, _hidden: hidden },
        });
        return { id: message.id };
      });
    },

    /** GET /messages. */
    async fetch(caller: Caller, v: { anchor: Anchor | undefined; numBefore: number; numAfter: number; includeAnchor: boolean; narrow: NarrowTerm[]; applyMarkdown: boolean; clientGravatar: boolean; messageIds?: number[] }) {
      refuseWebhookBots(caller);
      const guest = isGuest(caller.user);
      const { terms, near } = await narrowConditions(caller, v.narrow);
      const conditions = terms.map(termSql);
      if (v.messageIds) {
        if (v.messageIds.length > MAX_FETCH) throw chatErrors.bad(`Too many messages requested (maximum ${MAX_FETCH}).`);
        const ids = v.messageIds.map(dbId);
        const rows = ids.length
          ? await db
              .selectFrom('chat_messages as m')
              .leftJoin('chat_user_messages as um', (j) => j.onRef('um.message_id', '=', 'm.id').on('um.user_id', '=', caller.user.id))
              .select([...store.MESSAGE_COLUMNS, 'um.flags as flags'])
              .where('m.realm_id', '=', caller.realm.id)
              .where('m.id', 'in', ids)
              .where(store.accessSql(caller.realm.id, caller.user.id, guest))
              .orderBy('m.id')
              .execute()
          : [];
        return { messages: await present(caller, rows, { applyMarkdown: v.applyMarkdown, clientGravatar: v.clientGravatar, flags: true }), history_limited: false };
      }
      const range = await readRange(caller, { ...v, conditions, near });
      return {
        messages: await present(caller, range.rows, { applyMarkdown: v.applyMarkdown, clientGravatar: v.clientGravatar, flags: true }),
        anchor: range.anchor,
        found_anchor: range.foundAnchor,
        found_oldest: range.foundOldest,
        found_newest: range.foundNewest,
        history_limited: false,
      };
    },

    /**
     * POST /messages/flags/narrow: adds or removes a flag on the messages of a narrow's range
     * around an anchor (at most 5,000, as Zulip clamps it), which clients walk to mark a whole
     * channel, topic or conversation read; answers what the range held and how many changed.
     */
    async updateFlagsForNarrow(caller: Caller, v: { anchor: Anchor | undefined; numBefore: number; numAfter: number; includeAnchor: boolean; narrow: NarrowTerm[]; op: 'add' | 'remove'; flag: string }) {
      refuseWebhookBots(caller);
      const bit = editableFlag(v.flag);
      if (v.numBefore > 0 && v.numAfter > 0 && !v.includeAnchor) throw chatErrors.bad('The anchor can only be excluded at an end of the range: give include_anchor=true, or num_before or num_after 0');
      if (v.numBefore < 0 || v.numAfter < 0) throw chatErrors.bad('num_before and num_after must not be negative');
      // Zulip's clamp: at most MAX_FETCH in all, at least half of it for the side before when both are asked for.
      const numBefore = Math.min(v.numBefore, Math.max(MAX_FETCH - v.numAfter, MAX_FETCH / 2));
      const numAfter = Math.min(v.numAfter, MAX_FETCH - numBefore);
      // Zulip's update range has no `near` fallback: the anchor is required.
      const { terms } = await narrowConditions(caller, v.narrow);
      const range = await readRange(caller, { anchor: v.anchor, numBefore, numAfter, includeAnchor: v.includeAnchor, conditions: terms.map(termSql), near: null });
      const ids = range.rows.map((r) => r.id);
      const changed = await change((trx, emit) => applyFlag(trx, emit, caller, ids, v.op, v.flag, bit));
      return {
        processed_count: ids.length,
        updated_count: changed.length,
        first_processed_id: ids.length ? ids[0] : null,
        last_processed_id: ids.length ? ids[ids.length - 1] : null,
        found_oldest: range.foundOldest,
        found_newest: range.foundNewest,
      };
    },

    /** GET /messages/{message_id}. */
    async get(caller: Caller, id: number, applyMarkdown: boolean) {
      refuseWebhookBots(caller);
      const row = await accessMessage(caller, id);
      const [message] = await present(caller, [row], { applyMarkdown, clientGravatar: false, flags: true });
      return { raw_content: row.content, message };
    },

    /**
     * GET /messages/{message_id}/history: the message as it was sent and after each edit, oldest
     * first, as Zulip's fill_edit_history_entries reads the stored edits (newest first).
     */
    async history(caller: Caller, id: number, opts: { allowEmptyTopicName: boolean }) {
      refuseWebhookBots(caller);
      const row = await accessMessage(caller, id);
      const topicName = (t: string) => (t === '' && !opts.allowEmptyTopicName ? EMPTY_TOPIC_DISPLAY_NAME : t);
      let content = row.content;
      let rendered = row.rendered_content;
      let topic = row.topic;
      const out: Array<Record<string, unknown>> = [];
      for (const e of row.edit_history) {
        const entry: Record<string, unknown> = { content, rendered_content: rendered, timestamp: e.timestamp, topic: topicName(topic), user_id: e.user_id };
        if (e.prev_topic !== undefined) {
          topic = e.prev_topic;
          entry.prev_topic = topicName(topic);
        }
        if (e.prev_content !== undefined) {
          entry.prev_content = e.prev_content;
          entry.prev_rendered_content = e.prev_rendered_content ?? '';
          entry.content_html_diff = htmlDiff(e.prev_rendered_content ?? '', rendered);
          content = e.prev_content;
          rendered = e.prev_rendered_content ?? '';
        }
        if (e.prev_stream !== undefined) Object.assign(entry, { prev_stream: e.prev_stream, stream: e.stream });
        out.push(entry);
      }
      out.push({ content, rendered_content: rendered, timestamp: unix(row.date_sent), topic: topicName(topic), user_id: row.sender_id });
      return { message_history: out.reverse() };
    },

    /** POST /messages/render: content rendered as a message of the caller's would be (mentions resolved), stored nowhere. */
    async render(caller: Caller, content: string) {
      refuseWebhookBots(caller);
      return { rendered: (await render(caller, content)).html };
    },

    /** PATCH /messages/{message_id}: content edits by the sender, topic and channel moves with propagate_mode. */
    async update(caller: Caller, id: number, v: { content?: string; topic?: string; streamId?: number; propagateMode: 'change_one' | 'change_later' | 'change_all' }) {
      refuseWebhookBots(caller);
      if (v.content === undefined && v.topic === undefined && v.streamId === undefined) throw chatErrors.bad('Nothing to change');
      const row = await accessMessage(caller, id);
      if (v.content !== undefined) {
        if (row.sender_id !== caller.user.id) throw chatErrors.bad("You don't have permission to edit this message");
        if (!isAdmin(caller.user) && Date.now() / 1000 - unix(row.date_sent) > CONTENT_EDIT_LIMIT_SECONDS) throw chatErrors.bad('The time limit for editing this message has passed');
      }
      if ((v.topic !== undefined || v.streamId !== undefined) && row.type !== 'stream') throw chatErrors.bad('Direct messages cannot be moved to channels or topics.');
      if ((v.topic !== undefined || v.streamId !== undefined) && isGuest(caller.user) && row.sender_id !== caller.user.id) throw chatErrors.bad("You don't have permission to edit this message");
      let newStream: { id: number; name: string; invite_only: boolean } | null = null;
      if (v.streamId !== undefined && v.streamId !== row.stream_id) {
        if (v.content !== undefined) throw chatErrors.bad('Cannot change message content while changing channel');
        newStream = await streams.byId(caller, v.streamId);
      }
      let newTopic: string | undefined;
      if (v.topic !== undefined) {
        newTopic = truncate(v.topic.replace(/[\r\n\t]+/g, ' ').trim(), MAX_TOPIC_NAME_LENGTH, '...');
      }
      let content: string | undefined;
      let rendered: ReturnType<typeof renderMessage> | undefined;
      if (v.content !== undefined) {
        content = truncate(v.content.replace(/\r\n?/g, '\n').trimEnd(), MAX_MESSAGE_LENGTH, '\n[message truncated]');
        if (!content.trim()) content = '(deleted)';
        rendered = await render(caller, content);
      }
      const now = new Date();
      const ts = Math.floor(now.getTime() / 1000);

      await change(async (trx, emit) => {
        await lockKey(trx, `chat_messages:${row.stream_id ?? row.dm_key}`);
        const current = (await trx.selectFrom('chat_messages as m').select([...store.MESSAGE_COLUMNS]).where('m.id', '=', row.id).executeTakeFirst());
        if (!current) throw chatErrors.bad('Invalid message(s)');
        // The messages that move: this one, the later ones of its topic, or all of its topic.
        let ids = [current.id];
        const moving = newTopic !== undefined || newStream !== null;
        if (moving && v.propagateMode !== 'change_one') {
          let q = trx.selectFrom('chat_messages').select('id').where('stream_id', '=', current.stream_id).where(sql<boolean>`lower(topic) = ${current.topic.toLowerCase()}`);
          if (v.propagateMode === 'change_later') q = q.where('id', '>=', current.id);
          ids = (await q.orderBy('id').execute()).map((r) => r.id);
        }
        const before = await store.recipientsOf(trx, ids);
        const entry: EditHistoryEntry = { user_id: caller.user.id, timestamp: ts };
        if (content !== undefined) Object.assign(entry, { prev_content: current.content, prev_rendered_content: current.rendered_content });
        if (newTopic !== undefined && newTopic !== current.topic) Object.assign(entry, { prev_topic: current.topic, topic: newTopic });
        if (newStream) Object.assign(entry, { prev_stream: current.stream_id, stream: newStream.id });
        const history = JSON.stringify([entry, ...current.edit_history]);
        if (content !== undefined) {
          await trx.updateTable('chat_messages').set({ content, rendered_content: rendered!.html, last_edit_time: now, edit_history: history }).where('id', '=', current.id).execute();
          await uploads.claim(trx, caller, current.id, content, emit, { edit: true });
          // Newly mentioned people gain the flag, as Zulip does on edit.
          for (const uid of rendered!.mentionedUserIds) {
            await trx.updateTable('chat_user_messages').set({ flags: sql`flags | ${FLAG.mentioned}` }).where('message_id', '=', current.id).where('user_id', '=', uid).execute();
          }
        }
        if (moving) {
          const set: Record<string, unknown> = { last_moved_time: now };
          if (newTopic !== undefined) set.topic = newTopic;
          if (newStream) set.stream_id = newStream.id;
          for (const mid of ids) {
            const h = mid === current.id ? history : JSON.stringify([entry, ...((await trx.selectFrom('chat_messages').select('edit_history').where('id', '=', mid).executeTakeFirstOrThrow()).edit_history)]);
            await trx.updateTable('chat_messages').set({ ...set, edit_history: h }).where('id', '=', mid).execute();
          }
          if (newStream) {
            // Subscribers of the new channel receive the messages; in a private channel, nobody else keeps them.
            const subs = await store.activeSubscribers(trx, newStream.id);
            await store.insertUserMessages(trx, ids.flatMap((mid) => subs.map((u) => ({ user_id: u, message_id: mid, flags: FLAG.read }))));
            if (newStream.invite_only) {
              const lost = before.filter((u) => !subs.includes(u));
              if (lost.length) {
                await trx.deleteFrom('chat_user_messages').where('message_id', 'in', ids).where('user_id', 'in', lost).execute();
                emit({ realmId: caller.realm.id, users: lost, payload: { type: 'delete_message', message_type: 'stream', message_ids: ids, stream_id: current.stream_id!, topic: current.topic } });
              }
            }
          }
        }
        const after = await store.recipientsOf(trx, ids);
        const users = [...new Set([...before, ...after])].filter((u) => after.includes(u));
        const flagRows = await trx.selectFrom('chat_user_messages').select(['user_id', 'flags']).where('message_id', '=', current.id).execute();
        const event: Record<string, unknown> = {
          type: 'update_message',
          user_id: caller.user.id,
          edit_timestamp: ts,
          message_id: current.id,
          message_ids: ids,
          flags: [],
          rendering_only: false,
        };
        if (current.stream_id !== null) event.stream_id = current.stream_id;
        if (content !== undefined) Object.assign(event, { orig_content: current.content, orig_rendered_content: current.rendered_content, content: rendered!.html, rendered_content: rendered!.html, is_me_message: /^\/me( |$)/.test(content), _raw_content: content });
        if (moving) {
          event.propagate_mode = v.propagateMode;
          event.orig_subject = current.topic;
          if (current.stream_id !== null) event.stream_name = (await store.streamNames(trx, [current.stream_id]))[0]?.name;
          if (newTopic !== undefined) Object.assign(event, { subject: newTopic, topic_links: [] });
          if (newStream) event.new_stream_id = newStream.id;
        }
        emit({ realmId: caller.realm.id, users, flags: Object.fromEntries(flagRows.map((f) => [f.user_id, flagNames(f.flags)])), payload: event });
      });
    },

    /** DELETE /messages/{message_id}: the sender or an administrator. */
    async delete(caller: Caller, id: number) {
      refuseWebhookBots(caller);
      const row = await accessMessage(caller, id);
      if (!isAdmin(caller.user) && row.sender_id !== caller.user.id) throw chatErrors.bad("You don't have permission to delete this message");
      await change(async (trx, emit) => {
        const users = await store.recipientsOf(trx, [row.id]);
        await uploads.releaseMessage(trx, caller.realm.id, row.id, emit);
        const gone = await trx.deleteFrom('chat_messages').where('id', '=', row.id).returning('id').executeTakeFirst();
        if (!gone) throw chatErrors.bad('Invalid message(s)');
        const payload: Record<string, unknown> = { type: 'delete_message', message_type: row.type, message_ids: [row.id] };
        if (row.type === 'stream') Object.assign(payload, { stream_id: row.stream_id, topic: row.topic });
        emit({ realmId: caller.realm.id, users, payload });
      });
    },

    /** POST /messages/flags. */
    async updateFlags(caller: Caller, v: { messages: number[]; op: 'add' | 'remove'; flag: string }) {
      refuseWebhookBots(caller);
      const bit = editableFlag(v.flag);
      const ids = [...new Set(v.messages.map(dbId))];
      return { messages: await change((trx, emit) => applyFlag(trx, emit, caller, ids, v.op, v.flag, bit)) };
    },

    /** POST /mark_all_as_read, /mark_stream_as_read, /mark_topic_as_read. */
    async markRead(caller: Caller, where: { streamId?: number; topic?: string }) {
      refuseWebhookBots(caller);
      if (where.streamId !== undefined) await streams.byId(caller, where.streamId);
      return change(async (trx, emit) => {
        const changed = await store.changeFlag(trx, caller.user.id, FLAG.read, true, where.streamId === undefined ? { all: true } : { streamId: where.streamId, topic: where.topic });
        if (changed.length) emit({ realmId: caller.realm.id, users: [caller.user.id], payload: { type: 'update_message_flags', op: 'add', operation: 'add', flag: 'read', messages: changed, all: false } });
        return changed.length;
      });
    },

    /** POST and DELETE /messages/{message_id}/reactions. */
    async reaction(caller: Caller, id: number, op: 'add' | 'remove', v: { emojiName?: string; emojiCode?: string; reactionType?: string }) {
      refuseWebhookBots(caller);
      const row = await accessMessage(caller, id);
      let code = v.emojiCode;
      let type = v.reactionType;
      if (op === 'add' || v.emojiName !== undefined) {
        if (v.emojiName === undefined) throw chatErrors.missing('emoji_name');
        if (code === undefined || type === undefined) {
          const data = await emoji.emojiData(caller.realm.id, v.emojiName);
          code ??= data.code;
          type ??= data.type;
        }
        if (op === 'add') await emoji.checkEmoji(caller.realm.id, v.emojiName, code, type);
      }
      if (code === undefined) throw chatErrors.bad('At least one of the following arguments must be present: emoji_name, emoji_code');
      type ??= 'unicode_emoji';
      await change(async (trx, emit) => {
        let name = v.emojiName;
        if (op === 'add') {
          const done = await trx
            .insertInto('chat_reactions')
            .values({ message_id: row.id, user_id: caller.user.id, emoji_name: name!, emoji_code: code!, reaction_type: type! })
            .onConflict((oc) => oc.columns(['message_id', 'user_id', 'reaction_type', 'emoji_code']).doNothing())
            .returning('message_id')
            .executeTakeFirst();
          if (!done) throw chatErrors.bad('Reaction already exists.');
          if (row.flags === null) await store.insertUserMessages(trx, [{ user_id: caller.user.id, message_id: row.id, flags: FLAG.read }]);
        } else {
          const gone = await trx
            .deleteFrom('chat_reactions')
            .where('message_id', '=', row.id)
            .where('user_id', '=', caller.user.id)
            .where('emoji_code', '=', code!)
            .where('reaction_type', '=', type!)
            .returning('emoji_name')
            .executeTakeFirst();
          if (!gone) throw chatErrors.bad("Reaction doesn't exist.");
          name = gone.emoji_name;
        }
        const users = await store.recipientsOf(trx, [row.id]);
        emit({ realmId: caller.realm.id, users, payload: { type: 'reaction', op, message_id: row.id, emoji_name: name!, emoji_code: code!, reaction_type: type!, user_id: caller.user.id } });
      });
    },

    /** GET /messages/{message_id}/read_receipts: who has read it, less the caller and the sender. */
    async readReceipts(caller: Caller, id: number) {
      refuseWebhookBots(caller);
      const row = await accessMessage(caller, id);
      const rows = await db
        .selectFrom('chat_user_messages as um')
        .innerJoin('chat_users as u', 'u.id', 'um.user_id')
        .select('um.user_id')
        .where('um.message_id', '=', row.id)
        .where(sql<boolean>`um.flags & ${FLAG.read} <> 0`)
        .where('u.is_active', '=', true)
        .where('u.is_bot', '=', false)
        .where('um.user_id', 'not in', [caller.user.id, row.sender_id])
        .orderBy('um.user_id')
        .execute();
      return rows.map((r) => r.user_id);
    },

    /** GET /users/me/{stream_id}/topics: topics of a channel, newest first, with their latest message id. */
    async topics(caller: Caller, streamId: number) {
      refuseWebhookBots(caller);
      const stream = await streams.byId(caller, streamId);
      const guest = isGuest(caller.user);
      const rows = await db
        .selectFrom('chat_messages as m')
        .leftJoin('chat_user_messages as um', (j) => j.onRef('um.message_id', '=', 'm.id').on('um.user_id', '=', caller.user.id))
        .select([sql<string>`min(m.topic)`.as('name'), sql<number>`max(m.id)`.as('max_id')])
        .where('m.stream_id', '=', stream.id)
        .where(store.accessSql(caller.realm.id, caller.user.id, guest))
        .groupBy(sql`lower(m.topic)`)
        .orderBy(sql`max(m.id)`, 'desc')
        .execute();
      // The topic's current spelling: that of its latest message.
      const latest = rows.length ? await db.selectFrom('chat_messages').select(['id', 'topic']).where('id', 'in', rows.map((r) => Number(r.max_id))).execute() : [];
      const names = new Map(latest.map((l) => [l.id, l.topic]));
      return rows.map((r) => ({ name: names.get(Number(r.max_id)) ?? r.name, max_id: Number(r.max_id) }));
    },

    /** The newest message id the caller has, or -1 (GET /users/me's max_message_id, /register's max_message_id). */
    async maxMessageId(caller: Caller): Promise<number> {
      const r = await db.selectFrom('chat_user_messages').select((eb) => eb.fn.max('message_id').as('max')).where('user_id', '=', caller.user.id).executeTakeFirst();
      return r?.max === null || r?.max === undefined ? -1 : Number(r.max);
    },

    /** The caller's unread messages, grouped as /register's unread_msgs. */
    async unreadMsgs(caller: Caller) {
      const rows = await db
        .selectFrom('chat_user_messages as um')
        .innerJoin('chat_messages as m', 'm.id', 'um.message_id')
        .select(['m.id', 'm.type', 'm.stream_id', 'm.topic', 'm.dm_key', 'm.sender_id', 'um.flags'])
        .where('um.user_id', '=', caller.user.id)
        .where(sql<boolean>`um.flags & ${FLAG.read} = 0`)
        .orderBy('m.id')
        .limit(50_000)
        .execute();
      const streamsMap = new Map<string, { stream_id: number; topic: string; unread_message_ids: number[] }>();
      const pms = new Map<number, number[]>();
      const huddles = new Map<string, number[]>();
      const mentions: number[] = [];
      for (const r of rows) {
        if (r.flags & (FLAG.mentioned | FLAG.stream_wildcard_mentioned | FLAG.topic_wildcard_mentioned)) mentions.push(r.id);
        if (r.type === 'stream') {
          const k = `${r.stream_id}:${r.topic.toLowerCase()}`;
          const e = streamsMap.get(k) ?? { stream_id: r.stream_id!, topic: r.topic, unread_message_ids: [] };
          e.unread_message_ids.push(r.id);
          streamsMap.set(k, e);
        } else {
          const ids = r.dm_key!.split(',').map(Number);
          if (ids.length <= 2) {
            const other = ids.find((i) => i !== caller.user.id) ?? caller.user.id;
            pms.set(other, [...(pms.get(other) ?? []), r.id]);
          } else huddles.set(r.dm_key!, [...(huddles.get(r.dm_key!) ?? []), r.id]);
        }
      }
      return {
        count: rows.length,
        pms: [...pms].map(([other, ids]) => ({ other_user_id: other, sender_id: other, unread_message_ids: ids })),
        streams: [...streamsMap.values()],
        huddles: [...huddles].map(([k, ids]) => ({ user_ids_string: k, unread_message_ids: ids })),
        mentions,
        old_unreads_missing: rows.length >= 50_000,
      };
    },

    /** Recent direct-message conversations, as /register's recent_private_conversations. */
    async recentPrivateConversations(caller: Caller) {
      const rows = await db
        .selectFrom('chat_user_messages as um')
        .innerJoin('chat_messages as m', 'm.id', 'um.message_id')
        .select(['m.dm_key', sql<number>`max(m.id)`.as('max_id')])
        .where('um.user_id', '=', caller.user.id)
        .where('m.type', '=', 'private')
        .groupBy('m.dm_key')
        .orderBy(sql`max(m.id)`, 'desc')
        .limit(1000)
        .execute();
      return rows.map((r) => ({ max_message_id: Number(r.max_id), user_ids: r.dm_key!.split(',').map(Number).filter((i) => i !== caller.user.id) }));
    },

    /** POST /typing: typing notifications to the other people of a conversation or the channel's subscribers. */
    async typing(caller: Caller, v: { op: 'start' | 'stop'; type: 'direct' | 'stream'; to?: unknown; streamId?: number; topic?: string }) {
      const sender = { user_id: caller.user.id, email: caller.user.email };
      // Resolved before the write: on the embedded database a read outside the transaction would wait for it.
      let event: ChatEventRecord;
      if (v.type === 'stream') {
        if (v.streamId === undefined) throw chatErrors.missing('stream_id');
        if (v.topic === undefined) throw chatErrors.missing('topic');
        const stream = await streams.byId(caller, v.streamId);
        const subs = (await store.activeSubscribers(db, stream.id)).filter((u) => u !== caller.user.id);
        event = { realmId: caller.realm.id, users: subs, payload: { type: 'typing', op: v.op, message_type: 'stream', sender, stream_id: stream.id, topic: v.topic } };
      } else {
        if (v.to === undefined) throw chatErrors.missing('to');
        const ids = await usersFromOperand(caller, v.to);
        if (!ids.length) throw chatErrors.bad('Empty list of recipients');
        const people = await store.usersByIds(db, caller.realm.id, [...new Set([...ids, caller.user.id])]);
        event = {
          realmId: caller.realm.id,
          users: people.map((p) => p.id).filter((u) => u !== caller.user.id),
          payload: { type: 'typing', op: v.op, message_type: 'direct', sender, recipients: people.map((p) => ({ user_id: p.id, email: p.email })) },
        };
      }
      await change(async (_trx, emit) => emit(event));
    },

    narrowConditions,
  };
}
