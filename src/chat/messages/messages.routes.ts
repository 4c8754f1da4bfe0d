import { Type } from 'typebox';
import { chatErrors } from '../http/errors.ts';
import { Envelope, pathId, type ChatRouter } from '../http/server.ts';
import type { Params } from '../http/params.ts';
import type { ChatStreamsService } from '../streams/streams.service.ts';
import { MAX_TOPIC_NAME_LENGTH } from '../streams/streams.service.ts';
import { LARGER_THAN_MAX_MESSAGE_ID, MAX_MESSAGE_LENGTH, type Anchor, type ChatMessagesService } from './messages.service.ts';
import { parseNarrow, type NarrowTerm } from './narrow.ts';

const tags = ['chat-messages'];
const Open = Type.Object({}, { additionalProperties: true });
const Ids = Type.Array(Type.Integer());
// Room for a message at its limit, in any encoding a client sends (the limit itself counts code points).
const CONTENT_INPUT_LIMIT = MAX_MESSAGE_LENGTH * 8;

export function readNarrow(params: Params): NarrowTerm[] {
  const raw = params.string('narrow', { maxLength: 100_000 });
  if (raw === undefined || raw === '') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw chatErrors.bad('narrow is not valid JSON');
  }
  return parseNarrow(parsed);
}

/**
 * Any integer is an anchor, as Zulip's `int(anchor)`: below 0 it reads as 0, above
 * LARGER_THAN_MAX_MESSAGE_ID as that (the newest), however many digits it has.
 */
function readAnchor(params: Params, opts: { required: boolean; legacyFirstUnread: boolean }): Anchor | undefined {
  const raw = opts.required ? params.string('anchor', { required: true, maxLength: 1000 }) : params.string('anchor', { maxLength: 1000 });
  if (opts.legacyFirstUnread && params.bool('use_first_unread_anchor')) return 'first_unread';
  if (raw === undefined) return undefined;
  if (raw === 'newest' || raw === 'oldest' || raw === 'first_unread') return raw;
  const int = /^\s*([+-]?)0*(\d+)\s*$/.exec(raw);
  if (int) {
    if (int[1] === '-') return 0;
    // More digits than the largest id has is beyond it (Number would round such a string).
    return int[2].length > String(LARGER_THAN_MAX_MESSAGE_ID).length ? LARGER_THAN_MAX_MESSAGE_ID : Math.min(Number(int[2]), LARGER_THAN_MAX_MESSAGE_ID);
  }
  throw chatErrors.bad(`Invalid anchor: give a message ID, or newest, oldest or first_unread`);
}

export function chatMessagesRoutes(r: ChatRouter, deps: { messages: ChatMessagesService; streams: ChatStreamsService }) {
  const { messages, streams } = deps;
  const topicOf = (params: Params) => params.string('topic', { maxLength: MAX_TOPIC_NAME_LENGTH * 4 }) ?? params.string('subject', { maxLength: MAX_TOPIC_NAME_LENGTH * 4 });

  r.authed({ method: 'POST', url: '/messages', operationId: 'sendMessage', tags, response: Envelope({ id: Type.Integer() }) }, async ({ params, caller }) =>
    messages.send(caller, {
      type: params.string('type', { required: true, maxLength: 20 }),
      to: params.string('to', { required: true, maxLength: 100_000 }),
      topic: topicOf(params),
      content: params.string('content', { required: true, maxLength: CONTENT_INPUT_LIMIT }),
      queueId: params.string('queue_id', { maxLength: 100 }),
      localId: params.string('local_id', { maxLength: 100 }),
      readBySender: params.bool('read_by_sender'),
    }),
  );

  r.authed(
    {
      method: 'GET',
      url: '/messages',
      operationId: 'getMessages',
      tags,
      response: Envelope({ messages: Type.Array(Open), anchor: Type.Optional(Type.Number()), found_anchor: Type.Optional(Type.Boolean()), found_oldest: Type.Optional(Type.Boolean()), found_newest: Type.Optional(Type.Boolean()), history_limited: Type.Optional(Type.Boolean()) }),
    },
    async ({ params, caller }) => {
      const messageIds = params.intList('message_ids');
      const anchor = readAnchor(params, { required: false, legacyFirstUnread: true });
      const numBefore = messageIds === undefined ? params.int('num_before', true) : params.int('num_before');
      const numAfter = messageIds === undefined ? params.int('num_after', true) : params.int('num_after');
      return messages.fetch(caller, {
        anchor,
        numBefore: numBefore ?? 0,
        numAfter: numAfter ?? 0,
        includeAnchor: params.bool('include_anchor') ?? true,
        narrow: readNarrow(params),
        applyMarkdown: params.bool('apply_markdown') ?? true,
        clientGravatar: params.bool('client_gravatar') ?? true,
        messageIds,
      });
    },
  );

  r.authed({ method: 'GET', url: '/messages/:message_id', operationId: 'getMessage', tags, response: Envelope({ raw_content: Type.String(), message: Open }) }, async ({ req, params, caller }) =>
    messages.get(caller, pathId((req.params as { message_id: string }).message_id), params.bool('apply_markdown') ?? true),
  );

  r.authed(
    {
      method: 'GET',
      url: '/messages/:message_id/history',
      operationId: 'getMessageHistory',
      tags,
      description: 'The message as sent and after each edit, oldest first: content, rendered_content, topic, timestamp and user_id, with prev_content, prev_rendered_content and content_html_diff, prev_topic, or prev_stream and stream for what each edit changed.',
      response: Envelope({ message_history: Type.Array(Open) }),
    },
    async ({ req, params, caller }) =>
      messages.history(caller, pathId((req.params as { message_id: string }).message_id), { allowEmptyTopicName: params.bool('allow_empty_topic_name') ?? false }),
  );

  r.authed(
    { method: 'POST', url: '/messages/render', operationId: 'renderMessage', tags, description: 'Renders Markdown as a message of the caller would be rendered; nothing is stored.', response: Envelope({ rendered: Type.String() }) },
    async ({ params, caller }) => messages.render(caller, params.string('content', { required: true, maxLength: CONTENT_INPUT_LIMIT })),
  );

  r.authed({ method: 'PATCH', url: '/messages/:message_id', operationId: 'updateMessage', tags, response: Envelope() }, async ({ req, params, caller }) => {
    const id = pathId((req.params as { message_id: string }).message_id);
    await messages.update(caller, id, {
      content: params.string('content', { maxLength: CONTENT_INPUT_LIMIT }),
      topic: topicOf(params),
      streamId: params.int('stream_id'),
      propagateMode: params.literal('propagate_mode', ['change_one', 'change_later', 'change_all'] as const) ?? 'change_one',
    });
    return {};
  });

  r.authed({ method: 'DELETE', url: '/messages/:message_id', operationId: 'deleteMessage', tags, response: Envelope() }, async ({ req, caller }) => {
    await messages.delete(caller, pathId((req.params as { message_id: string }).message_id));
    return {};
  });

  r.authed({ method: 'POST', url: '/messages/flags', operationId: 'updateMessageFlags', tags, response: Envelope({ messages: Ids }) }, async ({ params, caller }) =>
    messages.updateFlags(caller, {
      messages: params.intList('messages', true),
      op: params.literal('op', ['add', 'remove'] as const, true),
      flag: params.string('flag', { required: true, maxLength: 100 }),
    }),
  );

  r.authed(
    {
      method: 'POST',
      url: '/messages/flags/narrow',
      operationId: 'updateMessageFlagsForNarrow',
      tags,
      description: 'Adds or removes a flag (read, starred, collapsed) on the messages of a narrow around an anchor, at most 5,000 at a time; a client continues from first_processed_id or last_processed_id until found_oldest or found_newest.',
      response: Envelope({
        processed_count: Type.Integer(),
        updated_count: Type.Integer(),
        first_processed_id: Type.Union([Type.Integer(), Type.Null()]),
        last_processed_id: Type.Union([Type.Integer(), Type.Null()]),
        found_oldest: Type.Boolean(),
        found_newest: Type.Boolean(),
      }),
    },
    async ({ params, caller }) => {
      const anchor = readAnchor(params, { required: true, legacyFirstUnread: false });
      const numBefore = params.int('num_before', true);
      const numAfter = params.int('num_after', true);
      params.string('narrow', { required: true, maxLength: 100_000 });
      return messages.updateFlagsForNarrow(caller, {
        anchor,
        numBefore,
        numAfter,
        includeAnchor: params.bool('include_anchor') ?? true,
        narrow: readNarrow(params),
        op: params.literal('op', ['add', 'remove'] as const, true),
        flag: params.string('flag', { required: true, maxLength: 100 }),
      });
    },
  );

  r.authed({ method: 'POST', url: '/mark_all_as_read', operationId: 'markAllAsRead', tags, response: Envelope({ complete: Type.Boolean() }) }, async ({ caller }) => {
    await messages.markRead(caller, {});
    return { complete: true };
  });
  r.authed({ method: 'POST', url: '/mark_stream_as_read', operationId: 'markStreamAsRead', tags, response: Envelope() }, async ({ params, caller }) => {
    await messages.markRead(caller, { streamId: params.int('stream_id', true) });
    return {};
  });
  r.authed({ method: 'POST', url: '/mark_topic_as_read', operationId: 'markTopicAsRead', tags, response: Envelope() }, async ({ params, caller }) => {
    await messages.markRead(caller, { streamId: params.int('stream_id', true), topic: params.string('topic_name', { required: true, maxLength: MAX_TOPIC_NAME_LENGTH * 4 }) });
    return {};
  });

  for (const method of ['POST', 'DELETE'] as const) {
    r.authed({ method, url: '/messages/:message_id/reactions', operationId: method === 'POST' ? 'addReaction' : 'removeReaction', tags, response: Envelope() }, async ({ req, params, caller }) => {
      await messages.reaction(caller, pathId((req.params as { message_id: string }).message_id), method === 'POST' ? 'add' : 'remove', {
        emojiName: params.string('emoji_name', { maxLength: 100 }),
        emojiCode: params.string('emoji_code', { maxLength: 100 }),
        reactionType: params.literal('reaction_type', ['unicode_emoji', 'realm_emoji', 'zulip_extra_emoji'] as const),
      });
      return {};
    });
  }

  r.authed({ method: 'GET', url: '/messages/:message_id/read_receipts', operationId: 'getReadReceipts', tags, response: Envelope({ user_ids: Ids }) }, async ({ req, caller }) => ({
    user_ids: await messages.readReceipts(caller, pathId((req.params as { message_id: string }).message_id)),
  }));

  r.authed(
    { method: 'GET', url: '/users/me/:stream_id/topics', operationId: 'getStreamTopics', tags: ['chat-channels'], response: Envelope({ topics: Type.Array(Type.Object({ max_id: Type.Integer(), name: Type.String() })) }) },
    async ({ req, caller }) => ({ topics: await messages.topics(caller, pathId((req.params as { stream_id: string }).stream_id)) }),
  );

  r.authed({ method: 'GET', url: '/streams/:stream_id/members', operationId: 'getSubscribers', tags: ['chat-channels'], response: Envelope({ subscribers: Ids }) }, async ({ req, caller }) => ({
    subscribers: await streams.members(caller, pathId((req.params as { stream_id: string }).stream_id)),
  }));

  r.authed({ method: 'POST', url: '/typing', operationId: 'setTypingStatus', tags, response: Envelope() }, async ({ params, caller }) => {
    const type = params.literal('type', ['direct', 'private', 'stream', 'channel'] as const) ?? 'direct';
    const op = params.literal('op', ['start', 'stop'] as const, true);
    const toRaw = params.string('to', { maxLength: 100_000 });
    let to: unknown;
    if (toRaw !== undefined) {
      try {
        to = JSON.parse(toRaw);
      } catch {
        to = toRaw;
      }
    }
    await messages.typing(caller, {
      op,
      type: type === 'stream' || type === 'channel' ? 'stream' : 'direct',
      to,
      streamId: params.int('stream_id'),
      topic: params.string('topic', { maxLength: MAX_TOPIC_NAME_LENGTH * 4 }),
    });
    return {};
  });
}
