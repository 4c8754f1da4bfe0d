import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { ChatMessageIn, ChatPerson } from '../chat/ports.ts';
import type { ChatCore } from '../chat/core.ts';
import { storableText } from '../../db/json-values.ts';
import { followSettings } from '../chat/follow.ts';
import { CHAT_B_SECRET, chatBClient, type ChatBClient } from './client.ts';
import type { ChatBWork } from './events.ts';
import { startChatBListener, type ChatBListener } from './listener.ts';
import { decidedUpdate, decisionOf } from './posts.ts';
import { messageText } from './text.ts';

/**
 * chat_b's inbound work while chat_b is enabled and configured: the Socket Mode listener
 * (listener.ts) hears the workspace with the app-level token, and each work item becomes the
 * chat core's, as chat_a's do: a message (a mention, or a message in a thread: it may be a
 * run's) or a slash command is taken in once (`receive`, which records its key); a button click
 * decides the confirmation its value names, once (`decide`), and the message is updated to say
 * who decided, or the person alone is told why nothing was done. `refresh` follows a change of
 * the settings or the tokens (checked again every `everyMs`); `stop` ends it.
 */

export interface ChatBInboundDeps {
  settings(): Promise<{ enabled: boolean; apiUrl: string }>;
  reveal(name: string): Promise<string | null>;
  rooms(): Promise<string[]>;
  /** The threads of runs that may still get work (open, or ended lately), for the catch-up: Slack's history shows no replies. */
  threads(): Promise<Array<{ channel: string; ts: string }>>;
  core(): ChatCore;
  logger: Logger;
  everyMs?: number;
  pingTimeoutMs?: number;
  reconnectMs?: number;
}

/**
 * A message or slash command as the chat core's work item. A NUL character in the text or name
 * (Slack passes one on) is removed, and half of a surrogate pair replaced by U+FFFD: the item is
 * stored as a job's payload, which cannot hold them, and refusing it there would leave the
 * envelope unacknowledged for Slack to send again and again.
 */
export function workItemOf(w: Exclude<ChatBWork, { kind: 'action' }>, userName: string): ChatMessageIn {
  const text = storableText(w.text).trim();
  const user_name = storableText(userName);
  if (w.kind === 'command') {
    return { surface: 'chat_b', message_id: `command:${w.key}`, room_id: w.channel, thread_id: null, user_id: w.user, user_name, text, addressed: true, command: true, via: 'command' };
  }
  return { surface: 'chat_b', message_id: w.key, room_id: w.channel, thread_id: w.thread_ts, user_id: w.user, user_name, text, addressed: w.addressed, command: false, via: w.via };
}

/** A button click: the confirmation decided once, its message updated to say by whom (or the person told why not). */
export async function decideAction(core: ChatCore, client: ChatBClient, w: Extract<ChatBWork, { kind: 'action' }>, by: ChatPerson): Promise<void> {
  const decision = decisionOf(w.action_id);
  if (!decision) return;
  const result = await core.decide(w.value, decision === 'approve', by, w.channel);
  if (!result.decided) {
    await client.ephemeral({ channel: w.channel, user: w.user, text: messageText(result.text), ...(w.thread_ts ? { thread_ts: w.thread_ts } : {}) });
    return;
  }
  await client.update(decidedUpdate({ channel: w.channel, ts: w.message_ts, text: w.message_text, decision, by: w.user }));
}

/** What chat_b's connection depends on, hashed: a new one restarts the listener and forgets the bot's identity. */
export const chatBFingerprint = (apiUrl: string, botToken: string, appToken: string | null) => crypto.createHash('sha256').update(`${apiUrl}\n${botToken}\n${appToken ?? ''}`).digest('hex');

export function startChatBInbound(deps: ChatBInboundDeps) {
  return followSettings({
    what: 'chat_b',
    logger: deps.logger,
    ...(deps.everyMs ? { everyMs: deps.everyMs } : {}),
    async wanted() {
      const s = await deps.settings();
      const botToken = s.enabled ? await deps.reveal(CHAT_B_SECRET.bot) : null;
      const appToken = s.enabled ? await deps.reveal(CHAT_B_SECRET.app) : null;
      if (!botToken || !appToken) return null;
      return { fingerprint: chatBFingerprint(s.apiUrl, botToken, appToken), start: () => listen(deps, s.apiUrl, botToken, appToken) };
    },
  });
}

/** The listener for one workspace and pair of tokens: each work item handed to the chat core. */
function listen(deps: ChatBInboundDeps, apiUrl: string, botToken: string, appToken: string): ChatBListener {
  const rest = chatBClient({ apiUrl, token: botToken, secret: CHAT_B_SECRET.bot, rateLimited: 'wait', logger: deps.logger.child({ component: 'chat_b.inbound' }) });
  const names = new Map<string, string>();
  const nameOf = async (user: string) => {
    let name = names.get(user);
    if (name === undefined) {
      name = (await rest.user(user)).name;
      names.set(user, name);
    }
    return name;
  };
  return startChatBListener({
    apiUrl,
    botToken,
    appToken,
    rooms: deps.rooms,
    threads: deps.threads,
    logger: deps.logger,
    ...(deps.pingTimeoutMs ? { pingTimeoutMs: deps.pingTimeoutMs } : {}),
    ...(deps.reconnectMs ? { reconnectMs: deps.reconnectMs } : {}),
    onWork: async (w) => {
      const name = await nameOf(w.user);
      if (w.kind === 'action') return decideAction(deps.core(), rest, w, { surface: 'chat_b', user_id: w.user, user_name: name });
      await deps.core().receive(workItemOf(w, name));
    },
  });
}

export type ChatBInbound = ReturnType<typeof startChatBInbound>;
