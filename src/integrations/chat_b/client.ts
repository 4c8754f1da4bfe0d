import { ErrorCode, WebClient, type Block, type KnownBlock } from '@slack/web-api';
import type { Logger } from 'pino';
import { redactSecrets } from '../../logger.ts';

/**
 * The chat_b (Slack-compatible) workspace as this project calls it: one `WebClient` of
 * `@slack/web-api` per API base URL (the `api_url` setting, Slack's by default) and token, every
 * call through the SDK's own methods. A failure becomes a `ChatBError` naming what was being
 * done, Slack's error code and what to do about it; never the token.
 *
 * Rate limits: with `rateLimited: 'wait'` (posts, catch-up) the SDK waits the `Retry-After`
 * Slack asked for and tries again; with `'fail'` (a person waiting on an answer: the connection
 * test, a team's room check) the call fails at once with a `ChatBError` carrying the wait.
 */

export const CHAT_B_SECRET = { bot: 'integrations/chat_b/bot_token', app: 'integrations/chat_b/app_token' } as const;

/** What went wrong with a call. `code` is Slack's error (`channel_not_found`, ...), `http_<status>`, `unreachable` or `ratelimited`. */
export class ChatBError extends Error {
  override name = 'ChatBError';
  readonly code: string;
  /** Seconds Slack asked us to wait (429 `Retry-After`), when it said. */
  readonly retryAfterSeconds: number | null;
  constructor(message: string, code: string, retryAfterSeconds: number | null = null) {
    super(message);
    this.code = code;
    this.retryAfterSeconds = retryAfterSeconds;
  }
  /** Worth trying again later: unreachable, rate-limited or a server failure. */
  get transient(): boolean {
    return this.code === 'unreachable' || this.code === 'ratelimited' || /^http_5/.test(this.code) || ['internal_error', 'fatal_error', 'service_unavailable', 'request_timeout'].includes(this.code);
  }
  /** The token itself was refused: no retry mends it, an admin must. */
  get refusedToken(): boolean {
    return AUTH_ERRORS.has(this.code);
  }
}

const AUTH_ERRORS = new Set(['not_authed', 'invalid_auth', 'account_inactive', 'token_revoked', 'token_expired', 'not_allowed_token_type', 'no_permission', 'ekm_access_denied']);

/** Slack ids: a letter (C, G, D channels; U, W users) then upper-case letters and digits. */
export const isChannelId = (s: string) => /^[CGD][A-Z0-9]{6,20}$/.test(s);

export interface ChatBIdentity {
  userId: string;
  botId: string | null;
  name: string;
  team: string;
  /** The scopes Slack reports for the token (`X-OAuth-Scopes`). */
  scopes: string[];
}

export interface ChatBChannel {
  id: string;
  name: string;
  isPrivate: boolean;
  isArchived: boolean;
  /** Whether the caller (the bot) is a member. */
  isMember: boolean;
}

/** A message as Slack gives it (the fields this adapter reads). */
export interface ChatBMessage {
  ts: string;
  channel: string;
  user?: string;
  text?: string;
  thread_ts?: string;
  bot_id?: string;
  app_id?: string;
  subtype?: string;
  edited?: unknown;
  files?: unknown[];
  /** The message's metadata (read with `include_all_metadata`): a run post's key is kept there. */
  metadata?: { event_type?: string; event_payload?: Record<string, unknown> };
}

export interface ChatBPost {
  channel: string;
  text: string;
  thread_ts?: string;
  /** The role's name and picture: applied only when the app has `chat:write.customize`. */
  username?: string;
  icon_url?: string;
  blocks?: Array<Block | KnownBlock>;
  /** Message metadata: the post's own key, so a retried post finds the one made before. */
  metadata?: { event_type: string; event_payload: Record<string, string> };
}

function reasonOf(err: unknown, what: string, secret: string, apiUrl: string): ChatBError {
  const e = err as { code?: string; data?: { error?: string; needed?: string }; statusCode?: number; retryAfter?: number; original?: unknown };
  switch (e.code) {
    case ErrorCode.RateLimitedError:
      return new ChatBError(`Slack is rate-limiting the app while ${what}; it asked to wait ${e.retryAfter ?? '?'} s: try again then`, 'ratelimited', e.retryAfter ?? null);
    case ErrorCode.HTTPError:
      return new ChatBError(`Slack failed (HTTP ${e.statusCode}) while ${what}; try again later`, `http_${e.statusCode}`);
    case ErrorCode.RequestError:
      return new ChatBError(`Slack's API at ${apiUrl} could not be reached while ${what}: check the chat_b api_url setting and the network`, 'unreachable');
    case ErrorCode.PlatformError: {
      const code = String(e.data?.error ?? 'unknown_error').slice(0, 60);
      if (code === 'not_allowed_token_type') return new ChatBError(`the token in ${secret} is not the right kind of token (not_allowed_token_type) while ${what}: the bot token starts with xoxb-, the app-level token with xapp-`, code);
      if (AUTH_ERRORS.has(code)) return new ChatBError(`Slack refused the token in ${secret} (${code}) while ${what}: copy the app's current token into the secret`, code);
      if (code === 'missing_scope') return new ChatBError(`the app lacks the scope ${String(e.data?.needed ?? '?').slice(0, 80)} (missing_scope) while ${what}: add it under OAuth & Permissions and reinstall the app`, code);
      if (code === 'ratelimited') return new ChatBError(`Slack is rate-limiting the app while ${what}; try again later`, code);
      return new ChatBError(`Slack refused ${what} (${code})`, code);
    }
    default:
      return new ChatBError(`Slack answered in a way the adapter does not understand while ${what}`, 'unknown_error');
  }
}

/**
 * The `@slack/logger` interface over the service's logger; the SDK's debug lines (whole
 * payloads) are not kept, and its other lines (which may quote an error, a URL or a header) go
 * through the logger's redaction.
 */
export function sdkLogger(logger: Logger) {
  let level = 'info';
  const line = (msg: unknown[]) => redactSecrets(msg.map(String).join(' '));
  return {
    debug() {},
    info: (...msg: unknown[]) => logger.info(line(msg)),
    warn: (...msg: unknown[]) => logger.warn(line(msg)),
    error: (...msg: unknown[]) => logger.error(line(msg)),
    setLevel: (l: string) => void (level = l),
    getLevel: () => level as never,
    setName() {},
  };
}

export interface ChatBClientOptions {
  apiUrl: string;
  token: string;
  /** Which secret the token came from, to name it in errors. */
  secret: string;
  rateLimited: 'wait' | 'fail';
  logger: Logger;
}

/** The `WebClient` options for a base URL and rate-limit policy (shared with the Socket Mode client). */
export function webClientOptions(opts: Pick<ChatBClientOptions, 'apiUrl' | 'rateLimited' | 'logger'>) {
  return {
    slackApiUrl: opts.apiUrl,
    logger: sdkLogger(opts.logger),
    timeout: 30_000,
    rejectRateLimitedCalls: opts.rateLimited === 'fail',
    retryConfig: opts.rateLimited === 'fail' ? { retries: 0 } : { retries: 4, factor: 2, minTimeout: 250, maxTimeout: 10_000 },
  };
}

export function chatBClient(opts: ChatBClientOptions) {
  const web = new WebClient(opts.token, webClientOptions(opts));
  async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw reasonOf(err, what, opts.secret, opts.apiUrl);
    }
  }

  return {
    apiUrl: opts.apiUrl,

    /** Who the token is (`auth.test`), with the scopes Slack reports for it. */
    async me(): Promise<ChatBIdentity> {
      const r = await call('asking Slack who the bot is', () => web.auth.test());
      return { userId: r.user_id ?? '', botId: r.bot_id ?? null, name: r.user ?? '', team: r.team ?? '', scopes: r.response_metadata?.scopes ?? [] };
    },

    /** Asks for a Socket Mode URL (`apps.connections.open`, the app-level token only): proves the app token and Socket Mode work. */
    async openConnection(): Promise<void> {
      await call('opening a Socket Mode connection', () => web.apps.connections.open({}));
    },

    async channel(id: string): Promise<ChatBChannel> {
      const r = await call(`reading channel ${id}`, () => web.conversations.info({ channel: id }));
      const c = r.channel ?? {};
      return { id: c.id ?? id, name: c.name ?? id, isPrivate: c.is_private === true, isArchived: c.is_archived === true, isMember: c.is_member === true };
    },

    async user(id: string): Promise<{ id: string; name: string; realName: string; isBot: boolean }> {
      const r = await call(`reading user ${id}`, () => web.users.info({ user: id }));
      return { id, name: r.user?.name ?? id, realName: r.user?.real_name ?? r.user?.name ?? id, isBot: r.user?.is_bot === true };
    },

    /** Posts a message (in a thread with `thread_ts`); its `ts`. */
    async post(p: ChatBPost): Promise<{ ts: string }> {
      const r = await call(`posting in channel ${p.channel}`, () => web.chat.postMessage({ ...p, unfurl_links: false, unfurl_media: false }));
      return { ts: r.ts ?? '' };
    },

    async update(p: { channel: string; ts: string; text: string; blocks?: Array<Block | KnownBlock> }): Promise<void> {
      await call(`updating message ${p.ts} in channel ${p.channel}`, () => web.chat.update(p));
    },

    async ephemeral(p: { channel: string; user: string; text: string; thread_ts?: string }): Promise<void> {
      await call(`answering in channel ${p.channel}`, () => web.chat.postEphemeral(p));
    },

    async permalink(channel: string, ts: string): Promise<string> {
      const r = await call(`reading the link of message ${ts}`, () => web.chat.getPermalink({ channel, message_ts: ts }));
      return r.permalink ?? '';
    },

    /** A channel's top-level messages after `oldest` (a ts), oldest first: the catch-up after a reconnection. */
    async history(channel: string, oldest: string): Promise<ChatBMessage[]> {
      const out: ChatBMessage[] = [];
      let cursor: string | undefined;
      do {
        const r = await call(`reading the recent messages of channel ${channel}`, () => web.conversations.history({ channel, oldest, limit: 200, include_all_metadata: true, ...(cursor ? { cursor } : {}) }));
        for (const m of r.messages ?? []) out.push({ ...(m as ChatBMessage), channel });
        cursor = r.response_metadata?.next_cursor || undefined;
      } while (cursor);
      return out.sort((a, b) => Number(a.ts) - Number(b.ts));
    },

    /**
     * A thread's messages after `oldest`, oldest first, at most `max` (the newest beyond it are
     * left for later): Slack answers the root first on every page, so it is kept once, and only
     * when it is itself after `oldest`.
     */
    async replies(channel: string, threadTs: string, oldest: string, max = 1000): Promise<ChatBMessage[]> {
      const out = new Map<string, ChatBMessage>();
      let cursor: string | undefined;
      do {
        const r = await call(`reading thread ${threadTs}`, () => web.conversations.replies({ channel, ts: threadTs, oldest, limit: 200, include_all_metadata: true, ...(cursor ? { cursor } : {}) }));
        for (const m of r.messages ?? []) if (m.ts && Number(m.ts) > Number(oldest)) out.set(m.ts, { ...(m as ChatBMessage), channel });
        cursor = r.response_metadata?.next_cursor || undefined;
      } while (cursor && out.size < max);
      return [...out.values()].sort((a, b) => Number(a.ts) - Number(b.ts)).slice(0, max);
    },

    /** Long output (a diff, a log) as a file in a channel or thread, never a wall of text (`files.uploadV2`). */
    async upload(p: { channel: string; thread_ts?: string; filename: string; title: string; content: string; comment?: string }): Promise<void> {
      const file = { filename: p.filename, title: p.title, content: p.content, ...(p.comment ? { initial_comment: p.comment } : {}) };
      await call(`uploading ${p.filename} to channel ${p.channel}`, () => (p.thread_ts ? web.filesUploadV2({ ...file, channel_id: p.channel, thread_ts: p.thread_ts }) : web.filesUploadV2({ ...file, channel_id: p.channel })));
    },
  };
}

export type ChatBClient = ReturnType<typeof chatBClient>;
