import { SocketModeClient } from '@slack/socket-mode';
import type { Logger } from 'pino';
import { CHAT_B_SECRET, chatBClient, ChatBError, sdkLogger, webClientOptions, type ChatBMessage } from './client.ts';
import { envelopeWork, messageWork, type ChatBWork, type Me } from './events.ts';

/**
 * The inbound side of chat_b: Socket Mode through `@slack/socket-mode`, opened with the app-level
 * token (`apps.connections.open` at the `api_url` setting, so no public URL is needed). Each
 * envelope is parsed (events.ts) and its work handed on, then acknowledged; an envelope whose
 * work could not be handed on (the handler threw) is left unacknowledged, so Slack sends it
 * again. Envelopes dropped as not work are acknowledged too.
 *
 * Once per listener: an envelope id, an `event_id` and a work `key` are remembered (bounded),
 * so a redelivery (`retry_attempt` > 0), the `message` and `app_mention` events of one message
 * and a message the catch-up finds again are handed on once; what is done with the work must
 * still record its key, since two processes may both listen.
 *
 * A `disconnect` message, a dropped socket or an unanswered ping reconnects at once, then with a
 * backoff doubling up to a minute; when Slack refuses the app token the listener stops, saying
 * so in the log (the SDK's own reconnection would end the process there). After a
 * reconnection the listener catches up through the Web API on each room
 * (`conversations.history`) and each open thread (`conversations.replies`) from a minute before
 * the newest message it saw live, so a message Slack gave up delivering while the connection was
 * down is still seen. A room's history holds top-level messages only: a reply in a run's thread
 * (an answer, a follow-up, `cancel`) is found by reading the thread, paged, from the same point.
 */

export interface ChatBListenerOptions {
  apiUrl: string;
  botToken: string;
  appToken: string;
  /** The channels of chat_b teams (homes and links), for the catch-up. */
  rooms: () => Promise<string[]>;
  /** The threads of open runs, for the catch-up. */
  threads?: () => Promise<Array<{ channel: string; ts: string }>>;
  onWork: (w: ChatBWork) => void | Promise<void>;
  logger: Logger;
  /** The SDK's ping timeout: a connection that answers no ping within it is dropped (5 s by default). */
  pingTimeoutMs?: number;
  /** The first wait before a reconnection is tried again, doubling up to a minute (1 s by default; the first try is at once). */
  reconnectMs?: number;
}

/** Errors of `apps.connections.open` that no retry mends: the app token refused, the workspace gone. */
const REFUSED = new Set(['not_authed', 'invalid_auth', 'account_inactive', 'token_revoked', 'token_expired', 'not_allowed_token_type', 'user_removed_from_team', 'team_disabled']);

const REMEMBERED = 10_000;
const CATCH_UP_MARGIN_S = 60;

export function startChatBListener(opts: ChatBListenerOptions) {
  const log = opts.logger.child({ component: 'chat_b.listener' });
  const rest = chatBClient({ apiUrl: opts.apiUrl, token: opts.botToken, secret: CHAT_B_SECRET.bot, rateLimited: 'wait', logger: log });
  const seen = new Set<string>();
  let me: Me | null = null;
  let newest = (Date.now() / 1000).toFixed(6);
  let connections = 0;
  let stopped = false;

  const remember = (id: string) => {
    seen.add(id);
    if (seen.size > REMEMBERED) seen.delete(seen.values().next().value as string);
  };

  /** Hands on one piece of work once; false when the handler failed (the caller leaves the envelope unacknowledged). */
  async function hand(w: ChatBWork): Promise<boolean> {
    if (seen.has(w.key)) return true;
    remember(w.key);
    // Only what came live moves the mark: a catch-up's messages come out of order across rooms and threads.
    if (w.kind === 'message' && w.via === 'event' && Number(w.ts) > Number(newest)) newest = w.ts;
    try {
      await opts.onWork(w);
      return true;
    } catch (err) {
      seen.delete(w.key);
      log.error({ err, key: w.key, kind: w.kind }, 'chat_b work could not be handed on; Slack will send it again');
      return false;
    }
  }

  // Reconnection is this listener's, not the SDK's: the SDK's own rejects unhandled (and so ends the process) when Slack refuses the app token.
  const socket = new SocketModeClient({
    appToken: opts.appToken,
    autoReconnectEnabled: false,
    logger: sdkLogger(log),
    clientPingTimeout: opts.pingTimeoutMs ?? 5000,
    clientOptions: webClientOptions({ apiUrl: opts.apiUrl, rateLimited: 'fail', logger: log }),
  });

  socket.on('slack_event', async (e: { ack: () => Promise<void>; envelope_id: string; type: string; body?: Record<string, unknown>; retry_num?: number }) => {
    if (stopped || !me) return;
    let handed = true;
    const eventId = typeof e.body?.event_id === 'string' ? `event:${e.body.event_id}` : null;
    const envelope = `envelope:${e.envelope_id}`;
    if (!seen.has(envelope) && !(eventId && seen.has(eventId))) {
      const work = envelopeWork(e.type, e.body, me);
      if (work) handed = await hand(work);
      if (handed) {
        remember(envelope);
        if (eventId) remember(eventId);
      }
    }
    if (!handed) return;
    try {
      await e.ack();
    } catch (err) {
      log.warn({ reason: err instanceof Error ? err.message : String(err), retry: e.retry_num ?? 0 }, 'a chat_b envelope could not be acknowledged; Slack will send it again');
    }
  });

  async function catchUp() {
    // From a margin before the newest message seen live: events come out of order (redeliveries), and what is seen twice is handed on once.
    const since = (Number(newest) - CATCH_UP_MARGIN_S).toFixed(6);
    let rooms: string[];
    let threads: Array<{ channel: string; ts: string }>;
    try {
      rooms = await opts.rooms();
      threads = (await opts.threads?.()) ?? [];
    } catch (err) {
      log.error({ err }, 'the rooms of chat_b teams could not be read: no catch-up after this reconnection');
      return;
    }
    const take = async (what: string, read: () => Promise<ChatBMessage[]>) => {
      try {
        for (const m of await read()) {
          const w = me && messageWork(m, me, 'catch_up');
          if (w) await hand(w);
        }
      } catch (err) {
        log.warn({ what, reason: err instanceof ChatBError ? err.message : String(err) }, 'catching up on chat_b failed');
      }
    };
    for (const room of rooms) await take(room, () => rest.history(room, since));
    for (const t of threads) await take(`${t.channel}:${t.ts}`, () => rest.replies(t.channel, t.ts, since));
  }

  socket.on('connected', () => {
    connections++;
    if (connections > 1 && !stopped) void catchUp();
  });

  let attempt = 0;
  let connecting = false;
  let timer: NodeJS.Timeout | null = null;
  let refused: Error | null = null;

  /** One try at a connection (`apps.connections.open`, then the WebSocket); a failure a retry can mend schedules the next. */
  async function connect(): Promise<void> {
    if (stopped || connecting || refused) return;
    connecting = true;
    try {
      await socket.start();
      attempt = 0;
    } catch (err) {
      const code = (err as { data?: { error?: string } }).data?.error ?? '';
      if (REFUSED.has(code)) {
        refused = new ChatBError(`Slack refused the token in ${CHAT_B_SECRET.app} (${code}) while opening a Socket Mode connection: chat_b hears nothing until an admin writes the app's current app-level token and the listener starts again`, code);
        log.error({ reason: refused.message }, 'the chat_b listener stopped');
        throw refused;
      }
      log.warn({ attempt, reason: err instanceof Error ? err.message : String(err) }, 'a chat_b Socket Mode connection failed; trying again');
      const retryAfter = (err as { retryAfter?: unknown }).retryAfter;
      schedule(typeof retryAfter === 'number' ? retryAfter * 1000 : 0);
    } finally {
      connecting = false;
    }
  }

  /** The next try: at once after a connection that worked, then backing off; never sooner than Slack asked (`Retry-After`). */
  function schedule(atLeastMs = 0) {
    if (stopped || refused || timer) return;
    const wait = Math.max(atLeastMs, attempt === 0 ? 0 : Math.min(60_000, (opts.reconnectMs ?? 1000) * 2 ** (attempt - 1)));
    attempt++;
    timer = setTimeout(() => {
      timer = null;
      connect().catch(() => {});
    }, wait);
    timer.unref();
  }

  // A `disconnect` message, a dropped socket, a ping unanswered: connect again.
  socket.on('disconnected', () => {
    if (!connecting) schedule();
  });

  const ready = (async () => {
    const id = await rest.me();
    me = { userId: id.userId, botId: id.botId };
    await connect();
  })();

  return {
    /** Resolves once the bot is known and a first connection was made or is being retried; rejects when a token is refused. */
    ready,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await socket.disconnect();
    },
  };
}

export type ChatBListener = ReturnType<typeof startChatBListener>;
