import { parseCommand, type ChatCommand } from '../chat/commands.ts';
import { isPersonsMessage, type InboundFacts } from '../chat/inbound.ts';
import type { ChatBMessage } from './client.ts';
import { addressedText, plainText } from './text.ts';

/**
 * What arrives from a chat_b workspace over Socket Mode, as work for the chat core: the same
 * kinds chat_a produces (a person's message in a room or thread, addressed to the bot or not; a
 * command; a person's decision on a confirmation), each with a `key` that is the same however
 * often Slack sends it (a redelivered envelope, the `message` and `app_mention` events of one
 * message, a message seen again by the catch-up) for the core to record once.
 *
 * Dropped: what the chat core's rule says is not a person's new message (chat/inbound.ts: the
 * app's own messages, other bots' (`bot_id`, `bot_message`), edits, deletions and every other
 * subtype: joins, topic changes), and here direct messages and interactive payloads that are not
 * a button click.
 */

export type ChatBWork =
  | {
      kind: 'message';
      /** `<channel>:<ts>`: one message, however it was seen. */
      key: string;
      channel: string;
      user: string;
      ts: string;
      /** The thread's root when the message is a reply; null for a top-level message. */
      thread_ts: string | null;
      /** Slack's escapes undone; the bot's mention removed when `addressed`. */
      text: string;
      /** It mentions the app's bot user (or came as `app_mention`). */
      addressed: boolean;
      via: 'event' | 'catch_up';
    }
  | {
      kind: 'command';
      /** The command's `trigger_id`. */
      key: string;
      channel: string;
      user: string;
      /** The slash command as typed (`/crewhouse`). */
      command: string;
      text: string;
      what: ChatCommand;
    }
  | {
      kind: 'action';
      /** `<channel>:<message ts>:<action_ts>`: one click. */
      key: string;
      channel: string;
      user: string;
      action_id: string;
      value: string;
      /** The message whose button was clicked (its text, for its update), and its thread. */
      message_ts: string;
      message_text: string;
      thread_ts: string | null;
    };

export interface Me {
  userId: string;
  botId: string | null;
}

/** Subtypes that are still a person writing: a file shared with a comment, a reply also sent to the channel. */
const PERSON_SUBTYPES = new Set(['file_share', 'thread_broadcast']);

/** A message's facts for the chat core's rule of which messages are a person's (chat/inbound.ts). */
export function messageFacts(m: ChatBMessage, me: Me): InboundFacts {
  const sub = m.subtype;
  const edited = Boolean(m.edited) || sub === 'message_changed';
  const deleted = sub === 'message_deleted';
  const fromBot = Boolean(m.bot_id) || sub === 'bot_message';
  return {
    author: m.user,
    self: me.userId,
    fromBot,
    edited,
    deleted,
    // Every other subtype is Slack's own (a join, a topic change), save the ones a person writes.
    system: Boolean(sub) && !PERSON_SUBTYPES.has(sub!) && !edited && !deleted && !fromBot,
  };
}

/** A message as work, or null when it must not become work (see the module's comment). */
export function messageWork(m: ChatBMessage, me: Me, via: 'event' | 'catch_up', mention = false): Extract<ChatBWork, { kind: 'message' }> | null {
  if (!m.ts || !m.channel || !m.user) return null;
  if (!isPersonsMessage(messageFacts(m, me))) return null;
  if (!/^[CG]/.test(m.channel)) return null;
  const raw = m.text ?? '';
  const stripped = addressedText(raw, me.userId);
  return {
    kind: 'message',
    key: `${m.channel}:${m.ts}`,
    channel: m.channel,
    user: m.user,
    ts: m.ts,
    thread_ts: m.thread_ts && m.thread_ts !== m.ts ? m.thread_ts : null,
    text: plainText(stripped ?? raw),
    addressed: mention || stripped !== null,
    via,
  };
}

const str = (v: unknown) => (typeof v === 'string' ? v : '');

/** The work of one Socket Mode envelope (its `type` and `payload`), or null. */
export function envelopeWork(type: string, body: Record<string, unknown> | undefined, me: Me): ChatBWork | null {
  if (!body || typeof body !== 'object') return null;
  if (type === 'events_api') {
    const event = body.event as (ChatBMessage & { type?: string; channel_type?: string }) | undefined;
    if (!event || (event.type !== 'message' && event.type !== 'app_mention')) return null;
    if (event.channel_type && event.channel_type !== 'channel' && event.channel_type !== 'group') return null;
    return messageWork(event, me, 'event', event.type === 'app_mention');
  }
  if (type === 'slash_commands') {
    const channel = str(body.channel_id);
    const user = str(body.user_id);
    const trigger = str(body.trigger_id);
    if (!channel || !user || !trigger) return null;
    const text = str(body.text).slice(0, 4000);
    return { kind: 'command', key: trigger, channel, user, command: str(body.command).slice(0, 64) || '/crewhouse', text, what: parseCommand(plainText(text)) };
  }
  if (type === 'interactive' && body.type === 'block_actions') {
    const action = (Array.isArray(body.actions) ? body.actions[0] : null) as Record<string, unknown> | null;
    const container = (body.container ?? {}) as Record<string, unknown>;
    const user = str((body.user as Record<string, unknown> | undefined)?.id);
    const channel = str(container.channel_id) || str((body.channel as Record<string, unknown> | undefined)?.id);
    const messageTs = str(container.message_ts);
    if (!action || !user || !channel || !messageTs || container.is_ephemeral === true) return null;
    const threadTs = str(container.thread_ts);
    return {
      kind: 'action',
      key: `${channel}:${messageTs}:${str(action.action_ts)}`,
      channel,
      user,
      action_id: str(action.action_id).slice(0, 255),
      value: str(action.value).slice(0, 2000),
      message_ts: messageTs,
      message_text: str((body.message as Record<string, unknown> | undefined)?.text).slice(0, 40_000),
      thread_ts: threadTs && threadTs !== messageTs ? threadTs : null,
    };
  }
  return null;
}
