import { WebSocketClient, type WebSocketMessage } from '@mattermost/client';
import type { Logger } from 'pino';
import { isPersonsMessage, type InboundFacts } from '../chat/inbound.ts';
import { chatAClient, ChatAError, type ChatAPost } from './client.ts';

/**
 * The inbound side of chat_a: new messages in a set of rooms, from the server's WebSocket
 * (`posted` events), and after a reconnection that lost the server's event queue (a new
 * connection id: `@mattermost/client` calls its missed-message listeners) from a catch-up through
 * REST (`GET /channels/{id}/posts?since=`), so a message sent while the connection was down is
 * still seen. Messages of the bot itself, of other bots, system messages, edits and deletions
 * are dropped, by the chat core's rule (chat/inbound.ts) on the post's facts. A message is handed on once per listener (ids seen are remembered, bounded); what
 * is done with it must still record its id, since two processes may both listen.
 *
 * The runs half of issue #21 connects `onMessage` to runs; nothing starts this yet.
 */

export interface ChatAMessage {
  post: ChatAPost;
  via: 'event' | 'catch_up';
}

export interface ChatAListenerOptions {
  url: string;
  token: string;
  /** The channels to catch up on after a reconnection (the rooms of chat_a teams). */
  rooms: () => Promise<string[]>;
  onMessage: (m: ChatAMessage) => void | Promise<void>;
  logger: Logger;
  /** Reconnection timing (the client's defaults otherwise, with at most a minute between tries). */
  retry?: { minMs?: number; maxMs?: number; jitterMs?: number };
}

const REMEMBERED = 10_000;

/** A post's facts for the chat core's rule of which messages are a person's (chat/inbound.ts). */
export function postFacts(p: ChatAPost, botId: string | null): InboundFacts {
  const props = p.props ?? {};
  return {
    author: p.user_id,
    self: botId,
    fromBot: props.from_bot === 'true' || props.from_bot === true || props.from_webhook === 'true' || props.from_webhook === true,
    edited: (p.edit_at ?? 0) > 0,
    deleted: (p.delete_at ?? 0) > 0,
    // A system message has a type (`system_join_channel`, ...); a person's has none.
    system: Boolean(p.type),
  };
}

export function startChatAListener(opts: ChatAListenerOptions) {
  const log = opts.logger.child({ component: 'chat_a.listener' });
  const rest = chatAClient(opts.url, opts.token);
  const seen = new Set<string>();
  let botId: string | null = null;
  let newest = Date.now();
  let stopped = false;

  const remember = (id: string) => {
    seen.add(id);
    if (seen.size > REMEMBERED) seen.delete(seen.values().next().value as string);
  };

  function wanted(p: ChatAPost): boolean {
    if (!p.id || seen.has(p.id)) return false;
    return isPersonsMessage(postFacts(p, botId));
  }

  async function hand(p: ChatAPost, via: ChatAMessage['via']) {
    if (!wanted(p)) return;
    remember(p.id);
    newest = Math.max(newest, p.create_at);
    try {
      await opts.onMessage({ post: p, via });
    } catch (err) {
      log.error({ err, post: p.id }, 'a chat_a message could not be handled');
    }
  }

  /** One room's posts since `since`; a failure is tried again (as long as the server asks, or with backoff up to a minute). */
  async function catchUpRoom(room: string, since: number, attempt: number): Promise<void> {
    if (stopped) return;
    try {
      for (const p of await rest.postsSince(room, since)) await hand(p, 'catch_up');
    } catch (err) {
      const wait = err instanceof ChatAError && err.retryAfterSeconds ? err.retryAfterSeconds * 1000 : Math.min(60_000, 1000 * 2 ** attempt);
      log.warn({ room, attempt, reason: err instanceof Error ? err.message : String(err) }, 'catching up on a chat_a room failed; trying again');
      const timer = setTimeout(() => void catchUpRoom(room, since, attempt + 1), wait);
      timer.unref();
    }
  }

  async function catchUp() {
    const since = newest;
    let rooms: string[];
    try {
      rooms = await opts.rooms();
    } catch (err) {
      log.error({ err }, 'the rooms of chat_a teams could not be read: no catch-up after this reconnection');
      return;
    }
    for (const room of rooms) await catchUpRoom(room, since, 0);
  }

  const ws = new WebSocketClient({
    minWebSocketRetryTime: opts.retry?.minMs ?? 3000,
    maxWebSocketRetryTime: opts.retry?.maxMs ?? 60_000,
    reconnectJitterRange: opts.retry?.jitterMs ?? 2000,
  });
  ws.addMessageListener((msg: WebSocketMessage) => {
    if (stopped || msg.event !== 'posted' || typeof msg.data?.post !== 'string') return;
    let post: ChatAPost;
    try {
      post = JSON.parse(msg.data.post as string) as ChatAPost;
    } catch {
      return;
    }
    void hand(post, 'event');
  });
  // Registered always: without it the client reconnects in a loop after a server restart.
  ws.addMissedMessageListener(() => {
    if (!stopped) void catchUp();
  });

  const ready = (async () => {
    botId = (await rest.me()).id;
    if (!stopped) ws.initialize(`${rest.url.replace(/^http/, 'ws')}/api/v4/websocket`, opts.token);
  })();

  return {
    /** Resolves once the bot is known and the connection is being made; rejects when the bot's token is refused. */
    ready,
    stop() {
      stopped = true;
      // The client closes only an open connection; one still connecting is closed here, without its reconnection.
      const conn = (ws as unknown as { conn: WebSocket | null }).conn;
      if (conn && conn.readyState !== WebSocket.OPEN) {
        conn.onclose = null;
        conn.close();
      }
      ws.close();
    },
  };
}

export type ChatAListener = ReturnType<typeof startChatAListener>;
