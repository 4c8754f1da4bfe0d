import crypto from 'node:crypto';
import type { Logger } from 'pino';
import { followSettings } from '../chat/follow.ts';
import type { ChatMessageIn } from '../chat/ports.ts';
import { chatAClient } from './client.ts';
import { startChatAListener, type ChatAListener, type ChatAMessage } from './listener.ts';
import { addressedText } from './text.ts';

/**
 * chat_a's inbound messages while chat_a is enabled and configured: the listener (listener.ts)
 * follows the server as the surface bot, and every message that mentions the bot, or is in a
 * thread (it may be a run's), is handed to the chat core as a work item. `refresh` follows a
 * change of the settings or the token (checked again every `everyMs`); `stop` ends it.
 */

export interface ChatAInboundDeps {
  settings(): Promise<{ enabled: boolean; url: string | null }>;
  token(): Promise<string | null>;
  rooms(): Promise<string[]>;
  receive(m: ChatMessageIn): Promise<boolean>;
  logger: Logger;
  everyMs?: number;
  retry?: { minMs?: number; maxMs?: number; jitterMs?: number };
}

/** A chat_a post as the chat core's work item, or null when it is for no one here. */
export function workItemOf(m: ChatAMessage, bot: { username: string }, userName: string): ChatMessageIn | null {
  const p = m.post;
  const addressed = addressedText(p.message, bot.username);
  if (addressed === null && !p.root_id) return null;
  return {
    surface: 'chat_a',
    message_id: p.id,
    room_id: p.channel_id,
    thread_id: p.root_id || null,
    user_id: p.user_id,
    user_name: userName,
    text: addressed ?? p.message.trim(),
    addressed: addressed !== null,
    command: false,
    via: m.via,
  };
}

export function startChatAInbound(deps: ChatAInboundDeps) {
  return followSettings({
    what: 'chat_a',
    logger: deps.logger,
    ...(deps.everyMs ? { everyMs: deps.everyMs } : {}),
    async wanted() {
      const s = await deps.settings();
      const token = s.enabled && s.url ? await deps.token() : null;
      if (!s.url || !token) return null;
      const url = s.url;
      return { fingerprint: crypto.createHash('sha256').update(`${url}\n${token}`).digest('hex'), start: () => listen(deps, url, token) };
    },
  });
}

/** The listener for one server and token: each message that is work for the chat core handed to it. */
function listen(deps: ChatAInboundDeps, url: string, token: string): ChatAListener {
  const rest = chatAClient(url, token);
  const names = new Map<string, string>();
  let bot: { username: string } | null = null;
  return startChatAListener({
    url,
    token,
    rooms: deps.rooms,
    logger: deps.logger,
    retry: deps.retry,
    onMessage: async (m) => {
      bot ??= await rest.me();
      let name = names.get(m.post.user_id);
      if (name === undefined) {
        name = (await rest.user(m.post.user_id)).username;
        names.set(m.post.user_id, name);
      }
      const item = workItemOf(m, bot, name);
      if (item) await deps.receive(item);
    },
  });
}

export type ChatAInbound = ReturnType<typeof startChatAInbound>;
