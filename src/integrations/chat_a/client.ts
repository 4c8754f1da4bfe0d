import { Client4 } from '@mattermost/client';

/**
 * The chat_a (Mattermost-compatible) server as this project calls it: one `Client4` per base
 * URL and token, every call through Client4's own routes. Client4 throws an error without the
 * HTTP status when the server answers in plain text (its 429 does), so each call reads the
 * response itself (`ignoreStatus`) and turns a failure into a `ChatAError` with the status,
 * a reason written for people, and how long the server asked us to wait.
 */

export interface ChatAUser {
  id: string;
  username: string;
  is_bot: boolean;
}

export interface ChatAChannel {
  id: string;
  team_id: string;
  name: string;
  display_name: string;
  type: string;
}

export interface ChatAPost {
  id: string;
  channel_id: string;
  root_id: string;
  user_id: string;
  message: string;
  create_at: number;
  update_at?: number;
  edit_at?: number;
  delete_at?: number;
  /** Empty for a person's message; a system message has a type (`system_join_channel`, ...). */
  type?: string;
  props?: Record<string, unknown>;
  /** The files attached to the post. */
  file_ids?: string[];
}

/** What went wrong with a call: `status` 0 when the server could not be reached. Never carries the token. */
export class ChatAError extends Error {
  override name = 'ChatAError';
  readonly status: number;
  /** Seconds the server asked us to wait (429 `Retry-After` or `X-Ratelimit-Reset`), when it said. */
  readonly retryAfterSeconds: number | null;
  constructor(message: string, status: number, retryAfterSeconds: number | null = null) {
    super(message);
    this.status = status;
    this.retryAfterSeconds = retryAfterSeconds;
  }
  /** Worth trying again later: unreachable, rate-limited or a server error. */
  get transient(): boolean {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }
}

const ID = /^[a-z0-9]{26}$/;
/** Mattermost ids are 26 lower-case letters and digits. */
export const isChatAId = (s: string) => ID.test(s);

function reasonOf(status: number, what: string, body: unknown): string {
  switch (status) {
    case 401:
      return `the chat server refused the bot's token while ${what}: check the secret integrations/chat_a/bot_token (a bot access token, not a password)`;
    case 403:
      return `the bot is not allowed to do this on the chat server (${what}): add it to the channel or give it the permission`;
    case 404:
      return `the chat server has no such thing (${what})`;
    case 429:
      // What happened only: whether it is tried again is the caller's to say (a job is, a link check or a connection test is not).
      return `the chat server is rate-limiting the bot (${what})`;
    default: {
      const said = typeof body === 'object' && body && typeof (body as { message?: unknown }).message === 'string' ? (body as { message: string }).message.slice(0, 200) : '';
      if (status >= 500) return `the chat server failed (HTTP ${status}) while ${what}${said ? `: ${said}` : ''}; try again later`;
      return `the chat server refused the request (HTTP ${status}) while ${what}${said ? `: ${said}` : ''}`;
    }
  }
}

function waitOf(headers: Headers): number | null {
  const retry = Number(headers.get('retry-after'));
  if (Number.isFinite(retry) && retry > 0) return retry;
  const reset = Number(headers.get('x-ratelimit-reset'));
  return Number.isFinite(reset) && reset > 0 ? reset : null;
}

/**
 * When each server (by base URL) lets the next call through: a 429 (its `Retry-After` or
 * `X-Ratelimit-Reset`) holds every call to that server in this process as long as it says; an
 * answer saying no request is left (`X-Ratelimit-Remaining: 0`) holds them for the time one
 * request is earned back (a second over `X-Ratelimit-Limit`).
 */
const gates = new Map<string, number>();

async function throughGate(url: string, signal?: AbortSignal): Promise<void> {
  const until = gates.get(url) ?? 0;
  const wait = until - Date.now();
  if (wait <= 0) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, wait);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

function holdGate(url: string, headers: Headers, status: number) {
  const remaining = headers.get('x-ratelimit-remaining');
  if (status !== 429 && remaining !== '0') return;
  // A 429: as long as the server says. None left in the window: the time the server earns one
  // request back (X-Ratelimit-Limit is per second), not the whole window's whole seconds.
  const limit = Number(headers.get('x-ratelimit-limit'));
  const ms = status === 429 ? (waitOf(headers) ?? 1) * 1000 : Number.isFinite(limit) && limit > 0 ? 1000 / limit : (waitOf(headers) ?? 1) * 1000;
  gates.set(url, Math.max(gates.get(url) ?? 0, Date.now() + ms));
}

export interface ChatAClient {
  readonly url: string;
  me(): Promise<ChatAUser>;
  user(userId: string): Promise<ChatAUser>;
  getPost(postId: string): Promise<ChatAPost>;
  channel(channelId: string): Promise<ChatAChannel>;
  /** The user's membership of a channel, or null when they are not a member; `readOnly` for a guest-like member who cannot post. */
  membership(channelId: string, userId: string): Promise<{ roles: string } | null>;
  teamName(teamId: string): Promise<string>;
  post(input: { channel_id: string; message: string; root_id?: string; props?: Record<string, unknown>; file_ids?: string[] }): Promise<ChatAPost>;
  /** Uploads a file into a channel (`POST /files`, Client4's `uploadFile` form: `channel_id` and `files`), to attach to this user's next post by its id. */
  uploadFile(channelId: string, file: { name: string; content: string; type: string }): Promise<{ id: string }>;
  /** Changes a post of this bot's (its message, its props: e.g. a confirmation's buttons removed). */
  patch(postId: string, input: { message?: string; props?: Record<string, unknown> }): Promise<ChatAPost>;
  ephemeral(userId: string, input: { channel_id: string; message: string; root_id?: string }): Promise<void>;
  thread(postId: string): Promise<ChatAPost[]>;
  /** A channel's posts created or changed after `since` (ms), oldest first: the catch-up after a reconnection. */
  postsSince(channelId: string, since: number): Promise<ChatAPost[]>;
  /** Sets a bot's display name (a bot may patch itself with its own token). */
  setBotDisplayName(botUserId: string, displayName: string): Promise<void>;
  botDisplayName(botUserId: string): Promise<string>;
  setProfileImage(userId: string, image: Blob): Promise<void>;
  /** The permalink people open: `<url>/<team name>/pl/<post id>`. */
  permalink(teamName: string, postId: string): string;
}

/** A client for the server at `url` (the integration's `url` setting) acting with `token`. */
export function chatAClient(url: string, token: string): ChatAClient {
  const c = new Client4();
  c.setUrl(url.replace(/\/+$/, ''));
  c.setToken(token);
  c.setIncludeCookies(false);

  async function call<T>(what: string, route: string, options: { method: string; body?: string | FormData }): Promise<T> {
    let out: { response: Response; headers: Headers; data: unknown };
    try {
      // Client4's own request (its headers, its Bearer token), answering whatever the status.
      await throughGate(c.getUrl());
      out = await (c as unknown as { doFetchWithResponse: (u: string, o: object) => Promise<typeof out> }).doFetchWithResponse(route, { ...options, ignoreStatus: true });
    } catch {
      throw new ChatAError(`the chat server at ${c.getUrl()} could not be reached while ${what}: check the chat_a url setting and that the server is up`, 0);
    }
    const status = out.response.status;
    holdGate(c.getUrl(), out.response.headers, status);
    if (status >= 200 && status < 300) return out.data as T;
    throw new ChatAError(reasonOf(status, what, out.data), status, status === 429 ? waitOf(out.response.headers) : null);
  }

  return {
    url: c.getUrl(),
    me: () => call<ChatAUser>('reading the bot\'s own account', `${c.getUsersRoute()}/me`, { method: 'get' }),
    user: (id) => call<ChatAUser>(`reading user ${id}`, c.getUserRoute(id), { method: 'get' }),
    getPost: (id) => call<ChatAPost>(`reading post ${id}`, c.getPostRoute(id), { method: 'get' }),
    channel: (id) => call<ChatAChannel>(`reading channel ${id}`, c.getChannelRoute(id), { method: 'get' }),
    async membership(channelId, userId) {
      try {
        return await call<{ roles: string }>(`reading the bot's membership of channel ${channelId}`, c.getChannelMemberRoute(channelId, userId), { method: 'get' });
      } catch (err) {
        if (err instanceof ChatAError && err.status === 404) return null;
        throw err;
      }
    },
    teamName: async (teamId) => (await call<{ name: string }>(`reading team ${teamId}`, c.getTeamRoute(teamId), { method: 'get' })).name,
    post: (input) => call<ChatAPost>(`posting in channel ${input.channel_id}`, c.getPostsRoute(), { method: 'post', body: JSON.stringify(input) }),
    async uploadFile(channelId, file) {
      const form = new FormData();
      form.append('channel_id', channelId);
      form.append('files', new Blob([file.content], { type: file.type }), file.name);
      const out = await call<{ file_infos?: Array<{ id: string }> }>(`uploading ${file.name} to channel ${channelId}`, c.getFilesRoute(), { method: 'post', body: form });
      const id = out.file_infos?.[0]?.id;
      if (!id) throw new ChatAError(`the chat server answered the upload of ${file.name} without a file id`, 502);
      return { id };
    },
    patch: (postId, input) => call<ChatAPost>(`changing post ${postId}`, `${c.getPostRoute(postId)}/patch`, { method: 'put', body: JSON.stringify(input) }),
    async ephemeral(userId, input) {
      await call(`answering in channel ${input.channel_id}`, `${c.getPostsRoute()}/ephemeral`, { method: 'post', body: JSON.stringify({ user_id: userId, post: input }) });
    },
    async thread(postId) {
      const list = await call<{ order: string[]; posts: Record<string, ChatAPost> }>(`reading the thread of post ${postId}`, `${c.getPostRoute(postId)}/thread`, { method: 'get' });
      return Object.values(list.posts).sort((a, b) => a.create_at - b.create_at);
    },
    async postsSince(channelId, since) {
      const list = await call<{ order: string[]; posts: Record<string, ChatAPost> }>(`reading the recent posts of channel ${channelId}`, `${c.getChannelRoute(channelId)}/posts?since=${Math.max(0, Math.floor(since))}`, { method: 'get' });
      return Object.values(list.posts).sort((a, b) => a.create_at - b.create_at);
    },
    async setBotDisplayName(botUserId, displayName) {
      await call(`setting the display name of bot ${botUserId}`, c.getBotRoute(botUserId), { method: 'put', body: JSON.stringify({ display_name: displayName }) });
    },
    botDisplayName: async (botUserId) => (await call<{ display_name: string }>(`reading bot ${botUserId}`, c.getBotRoute(botUserId), { method: 'get' })).display_name,
    async setProfileImage(userId, image) {
      const form = new FormData();
      form.append('image', image, 'avatar');
      await call(`setting the picture of user ${userId}`, `${c.getUserRoute(userId)}/image`, { method: 'post', body: form });
    },
    permalink: (teamName, postId) => `${c.getUrl()}/${encodeURIComponent(teamName)}/pl/${postId}`,
  };
}
