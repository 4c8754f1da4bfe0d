import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { acceptWebSocket, refuseUpgrade, type WsPeer } from './websocket.ts';

/**
 * A fake Mattermost server: the REST v4 routes the chat_a adapter uses (users/me and users,
 * bots and their display names, profile images, teams, channels and channel members, posts with
 * `root_id` threads and `file_ids`, file uploads (`POST /files`, multipart `channel_id` and
 * `files`, answering `file_infos`), ephemeral posts, a channel's posts since a time) with Mattermost's JSON
 * bodies and error shape, token auth (`Authorization: Bearer <token>`, or `Token <token>`),
 * a plain-text 429 with `X-Ratelimit-*` and `Retry-After` when a test asks for one, and the
 * WebSocket at /api/v4/websocket: the `authentication_challenge` action, the `hello` event, a
 * `posted` event for every post (its `post` field a JSON string, as Mattermost sends it), `seq`
 * numbers, `ping` answered, and `dropSockets()` to cut every connection.
 *
 * A reconnection is never resumed: every connection gets a new connection id, as after a
 * restart of the server, so a client catches up through REST (its missed-message listeners).
 * The WebSocket is test/fakes/websocket.ts; `@mattermost/client` connects with Node's own WebSocket.
 */

export interface FakeMmUser {
  id: string;
  username: string;
  is_bot: boolean;
  first_name: string;
  last_name: string;
  nickname: string;
  /** A bot's display name (PUT /bots/{id}); null for people. */
  bot_display_name: string | null;
  bot_description: string;
}

export interface FakeMmChannel {
  id: string;
  team_id: string;
  name: string;
  display_name: string;
  type: 'O' | 'P' | 'D' | 'G';
  members: Set<string>;
  /** Members who may read and not post (a read-only channel's members). */
  readOnly: Set<string>;
}

export interface FakeMmPost {
  id: string;
  create_at: number;
  update_at: number;
  edit_at: number;
  delete_at: number;
  user_id: string;
  channel_id: string;
  root_id: string;
  message: string;
  type: string;
  props: Record<string, unknown>;
  /** The files attached (uploaded by the poster to the post's channel, attached once). */
  file_ids: string[];
  /** Ephemeral posts are shown to one user and never stored in the channel. */
  ephemeral_to: string | null;
}

function stripIntegrations(props: Record<string, unknown>): Record<string, unknown> {
  if (!Array.isArray(props.attachments)) return props;
  const attachments = (props.attachments as Array<Record<string, unknown>>).map((a) => ({
    ...a,
    ...(Array.isArray(a.actions) ? { actions: (a.actions as Array<Record<string, unknown>>).map(({ integration: _hidden, ...rest }) => rest) } : {}),
  }));
  return { ...props, attachments };
}

const newId = () => crypto.randomBytes(13).toString('base64url').toLowerCase().replace(/[^a-z0-9]/g, 'x').slice(0, 26).padEnd(26, 'a');

interface Socket {
  peer: WsPeer;
  connectionId: string;
  userId: string | null;
  seq: number;
}

export class FakeMattermost {
  readonly users = new Map<string, FakeMmUser>();
  readonly tokens = new Map<string, string>();
  readonly teams = new Map<string, { id: string; name: string; display_name: string }>();
  readonly channels = new Map<string, FakeMmChannel>();
  readonly posts: FakeMmPost[] = [];
  /** Ephemeral posts (POST /posts/ephemeral): shown to one user, never in the channel. */
  readonly ephemerals: FakeMmPost[] = [];
  readonly profileImages = new Map<string, { bytes: Buffer; type: string }>();
  /** Uploaded files (POST /files): who uploaded them where, and the post they were attached to ('' until then). */
  readonly files = new Map<string, { id: string; creator_id: string; channel_id: string; post_id: string; name: string; mime_type: string; bytes: Buffer; create_at: number }>();
  /** Every request: method, path, the Authorization scheme (never the token). */
  readonly requests: Array<{ method: string; path: string; auth: string | null }> = [];
  /** Answer the next N REST requests with Mattermost's plain-text 429. */
  throttleNext = 0;
  /**
   * Mattermost's own rate limiter when set: a bucket of `burst` requests refilled at `perSecond`;
   * every answer carries `X-Ratelimit-Limit`/`-Remaining`/`-Reset`, and a request over it gets the
   * plain-text 429 with `Retry-After`.
   */
  rateLimit: { perSecond: number; burst: number } | null = null;
  private bucket = { tokens: 0, at: 0 };
  /** Answer every REST request with a 500 while true. */
  failing = false;
  /** A slow server: every REST request is answered this many ms late. */
  latencyMs = 0;
  url = '';
  private server: http.Server;
  private sockets = new Set<Socket>();
  private clock = Date.now();

  constructor() {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((err) => {
        if (!res.headersSent) this.error(res, 500, 'api.fake.internal', String(err));
      });
    });
    this.server.on('upgrade', (req, conn) => this.upgrade(req, conn));
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.dropSockets();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** A person or a bot; a token when asked (a bot's access token, a person's personal token). */
  addUser(opts: { username: string; bot?: boolean; displayName?: string; token?: string }): FakeMmUser & { token: string | null } {
    const u: FakeMmUser = {
      id: newId(),
      username: opts.username,
      is_bot: opts.bot ?? false,
      first_name: '',
      last_name: '',
      nickname: '',
      bot_display_name: opts.bot ? (opts.displayName ?? opts.username) : null,
      bot_description: '',
    };
    this.users.set(u.id, u);
    if (opts.token) this.tokens.set(opts.token, u.id);
    return { ...u, token: opts.token ?? null };
  }

  addTeam(name: string, displayName = name) {
    const t = { id: newId(), name, display_name: displayName };
    this.teams.set(t.id, t);
    return t;
  }

  addChannel(opts: { teamId: string; name: string; displayName?: string; type?: 'O' | 'P'; members?: string[]; readOnly?: string[] }): FakeMmChannel {
    const c: FakeMmChannel = {
      id: newId(),
      team_id: opts.teamId,
      name: opts.name,
      display_name: opts.displayName ?? opts.name,
      type: opts.type ?? 'O',
      members: new Set([...(opts.members ?? []), ...(opts.readOnly ?? [])]),
      readOnly: new Set(opts.readOnly ?? []),
    };
    this.channels.set(c.id, c);
    return c;
  }

  /** A post by a user (a person typing in the channel), broadcast as a `posted` event. */
  post(userId: string, channelId: string, message: string, rootId = ''): FakeMmPost {
    return this.createPost(userId, { channel_id: channelId, message, root_id: rootId, props: {} }, null);
  }

  /**
   * A person clicks a button of an interactive message (`props.attachments[].actions[]`):
   * Mattermost POSTs its action request (JSON: the user, channel, post, a trigger id, the
   * action's `context`) to the action's `integration.url`, and applies the answer: `update`
   * replaces the post's message and props, `ephemeral_text` is shown to the person. Mattermost
   * signs nothing, so the integration must trust only what its own context carries.
   */
  async clickAction(postId: string, actionId: string, userId: string): Promise<{ status: number; body: any }> {
    const post = this.posts.find((p) => p.id === postId);
    if (!post) throw new Error(`no post ${postId}`);
    const attachments = (post.props.attachments ?? []) as Array<{ actions?: Array<{ id: string; integration?: { url: string; context?: Record<string, unknown> } }> }>;
    const action = attachments.flatMap((a) => a.actions ?? []).find((a) => a.id === actionId);
    if (!action?.integration?.url) throw new Error(`post ${postId} has no action ${actionId}`);
    const channel = this.channels.get(post.channel_id)!;
    const team = this.teams.get(channel.team_id);
    const res = await fetch(action.integration.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'Mattermost-Bot/1.1' },
      body: JSON.stringify({
        user_id: userId,
        user_name: this.users.get(userId)?.username ?? '',
        channel_id: channel.id,
        channel_name: channel.name,
        team_id: team?.id ?? '',
        team_domain: team?.name ?? '',
        post_id: post.id,
        trigger_id: crypto.randomBytes(48).toString('base64url'),
        type: '',
        data_source: '',
        context: action.integration.context ?? {},
      }),
    });
    const text = await res.text();
    let body: any = null;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    if (res.ok && body && typeof body === 'object') {
      if (body.update) {
        if (typeof body.update.message === 'string') post.message = body.update.message;
        if (body.update.props && typeof body.update.props === 'object') post.props = { ...body.update.props, ...(post.props.from_bot ? { from_bot: post.props.from_bot } : {}) };
        post.update_at = this.now();
        post.edit_at = post.update_at;
        this.broadcastPost('post_edited', post);
      }
      if (typeof body.ephemeral_text === 'string' && body.ephemeral_text) this.createPost(post.user_id, { channel_id: post.channel_id, message: body.ephemeral_text, root_id: post.root_id }, userId);
    }
    return { status: res.status, body };
  }

  /** The posts of a thread (its root first), as people see them. */
  threadOf(rootId: string): FakeMmPost[] {
    return this.posts.filter((p) => p.id === rootId || p.root_id === rootId).sort((a, b) => a.create_at - b.create_at);
  }

  /** Cuts every WebSocket connection without a close frame, as a network failure would. */
  dropSockets(): void {
    for (const s of this.sockets) s.peer.destroy();
    this.sockets.clear();
  }

  /** How many authenticated WebSocket connections are open. */
  get openSockets(): number {
    return [...this.sockets].filter((s) => s.userId !== null).length;
  }

  /**
   * The request Mattermost sends for a slash command: the form body (with the `token` field)
   * and the headers (`Authorization: Token <token>`), for a test to send to the route.
   */
  slashCommand(opts: { token: string; channelId: string; userId: string; command?: string; text: string; triggerId?: string }) {
    const user = this.users.get(opts.userId);
    const channel = this.channels.get(opts.channelId);
    const team = channel ? this.teams.get(channel.team_id) : undefined;
    const form = new URLSearchParams({
      channel_id: opts.channelId,
      channel_name: channel?.name ?? '',
      command: opts.command ?? '/crewhouse',
      response_url: `${this.url}/hooks/commands/${newId()}`,
      team_domain: team?.name ?? '',
      team_id: team?.id ?? '',
      text: opts.text,
      token: opts.token,
      trigger_id: opts.triggerId ?? crypto.randomBytes(48).toString('base64url'),
      user_id: opts.userId,
      user_name: user?.username ?? '',
    });
    return {
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Token ${opts.token}`, accept: 'application/json', 'user-agent': 'Mattermost-Bot/1.1' },
      body: form.toString(),
    };
  }

  private now(): number {
    // Strictly increasing, as Mattermost's create_at is for posts created one after another.
    this.clock = Math.max(this.clock + 1, Date.now());
    return this.clock;
  }

  private json(res: http.ServerResponse, status: number, body: unknown) {
    res.writeHead(status, { 'content-type': 'application/json', 'x-version-id': '10.0.0.fake' });
    res.end(JSON.stringify(body));
  }

  private error(res: http.ServerResponse, status: number, id: string, message: string) {
    this.json(res, status, { id, message, detailed_error: '', request_id: newId(), status_code: status });
  }

  private userOf(header: string | undefined): string | null {
    const m = /^(?:Bearer|Token) (\S+)$/i.exec(header ?? '');
    return m ? (this.tokens.get(m[1]!) ?? null) : null;
  }

  private presentUser(u: FakeMmUser) {
    return {
      id: u.id,
      username: u.username,
      first_name: u.first_name,
      last_name: u.last_name,
      nickname: u.nickname,
      is_bot: u.is_bot,
      ...(u.is_bot ? { bot_description: u.bot_description } : {}),
      create_at: 0,
      update_at: 0,
      delete_at: 0,
      roles: 'system_user',
      locale: 'en',
      last_picture_update: this.profileImages.has(u.id) ? 1 : 0,
    };
  }

  private presentPost(p: FakeMmPost) {
    return {
      id: p.id,
      create_at: p.create_at,
      update_at: p.update_at,
      edit_at: p.edit_at,
      delete_at: p.delete_at,
      is_pinned: false,
      user_id: p.user_id,
      channel_id: p.channel_id,
      root_id: p.root_id,
      original_id: '',
      message: p.message,
      type: p.type,
      // Mattermost never shows an action's integration (its URL and context) to clients.
      props: stripIntegrations(p.props),
      ...(p.file_ids.length ? { file_ids: p.file_ids } : {}),
      hashtags: '',
      pending_post_id: '',
      reply_count: this.posts.filter((x) => x.root_id && x.root_id === (p.root_id || p.id)).length,
      metadata: p.file_ids.length ? { files: p.file_ids.map((id) => this.fileInfo(this.files.get(id)!)) } : {},
    };
  }

  private fileInfo(f: NonNullable<ReturnType<FakeMattermost['files']['get']>>) {
    const extension = /\.([^.]+)$/.exec(f.name)?.[1] ?? '';
    return { id: f.id, user_id: f.creator_id, post_id: f.post_id, channel_id: f.channel_id, create_at: f.create_at, update_at: f.create_at, delete_at: 0, name: f.name, extension, size: f.bytes.length, mime_type: f.mime_type, has_preview_image: false, mini_preview: null, remote_id: '', archived: false };
  }

  private postList(items: FakeMmPost[]) {
    const order = [...items].sort((a, b) => b.create_at - a.create_at).map((p) => p.id);
    return { order, posts: Object.fromEntries(items.map((p) => [p.id, this.presentPost(p)])), next_post_id: '', prev_post_id: '', has_next: false };
  }

  private createPost(userId: string, body: { channel_id: string; message: string; root_id?: string; props?: Record<string, unknown>; file_ids?: unknown }, ephemeralTo: string | null): FakeMmPost {
    const at = this.now();
    // As Mattermost's attachFilesToPost: only the poster's own uploads to this channel, not yet attached to a post, are attached; others are dropped.
    const fileIds = ephemeralTo || !Array.isArray(body.file_ids) ? [] : [...new Set(body.file_ids.filter((id): id is string => typeof id === 'string'))].slice(0, 10).filter((id) => {
      const f = this.files.get(id);
      return f !== undefined && f.creator_id === userId && f.channel_id === body.channel_id && f.post_id === '';
    });
    const p: FakeMmPost = {
      id: newId(),
      create_at: at,
      update_at: at,
      edit_at: 0,
      delete_at: 0,
      user_id: userId,
      channel_id: body.channel_id,
      root_id: body.root_id ?? '',
      message: body.message,
      type: '',
      // Mattermost marks a bot's post so clients can tell it from a person's.
      props: { ...(body.props ?? {}), ...(this.users.get(userId)?.is_bot ? { from_bot: 'true' } : {}) },
      file_ids: fileIds,
      ephemeral_to: ephemeralTo,
    };
    for (const id of fileIds) this.files.get(id)!.post_id = p.id;
    (ephemeralTo ? this.ephemerals : this.posts).push(p);
    const channel = this.channels.get(p.channel_id)!;
    const team = this.teams.get(channel.team_id);
    const sender = this.users.get(userId);
    this.broadcast(
      'posted',
      {
        channel_display_name: channel.display_name,
        channel_name: channel.name,
        channel_type: channel.type,
        post: JSON.stringify(this.presentPost(p)),
        sender_name: `@${sender?.username ?? ''}`,
        set_online: true,
        team_id: team?.id ?? '',
      },
      { omit_users: null, user_id: ephemeralTo ?? '', channel_id: ephemeralTo ? '' : p.channel_id, team_id: '' },
      (s) => (ephemeralTo ? s.userId === ephemeralTo : channel.members.has(s.userId ?? '')),
    );
    return p;
  }

  /** A post's event (`posted`, `post_edited`) to the channel's members' connections. */
  private broadcastPost(event: string, p: FakeMmPost) {
    const channel = this.channels.get(p.channel_id)!;
    this.broadcast(event, { post: JSON.stringify(this.presentPost(p)) }, { omit_users: null, user_id: '', channel_id: p.channel_id, team_id: '' }, (s) => channel.members.has(s.userId ?? ''));
  }

  private async readBody(req: http.IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://fake');
    const path = url.pathname;
    const scheme = /^(\S+) /.exec(req.headers.authorization ?? '')?.[1] ?? null;
    this.requests.push({ method: req.method ?? 'GET', path, auth: scheme });
    // A permalink (`/<team name>/pl/<post id>`) is a page of the web app: it exists when the post is in one of the team's channels.
    const pl = /^\/([^/]+)\/pl\/([a-z0-9]{26})$/.exec(path);
    if (pl && req.method === 'GET') {
      const post = this.posts.find((p) => p.id === pl[2]);
      const team = post ? this.teams.get(this.channels.get(post.channel_id)?.team_id ?? '') : undefined;
      res.writeHead(team?.name === decodeURIComponent(pl[1]!) ? 200 : 404, { 'content-type': 'text/html; charset=utf-8' });
      return res.end('<!doctype html><title>Mattermost</title>');
    }
    if (!path.startsWith('/api/v4/')) return this.error(res, 404, 'api.context.404.app_error', 'Sorry, we could not find the page.');
    if (this.latencyMs > 0) await new Promise((r) => setTimeout(r, this.latencyMs));
    if (this.throttleNext > 0) {
      this.throttleNext--;
      // Mattermost's rate limiter answers in plain text, with the window in headers.
      res.writeHead(429, { 'content-type': 'text/plain; charset=utf-8', 'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '1', 'retry-after': '1' });
      return res.end('limit exceeded\n');
    }
    if (this.rateLimit) {
      const { perSecond, burst } = this.rateLimit;
      const now = Date.now();
      if (this.bucket.at === 0) this.bucket = { tokens: burst, at: now };
      this.bucket.tokens = Math.min(burst, this.bucket.tokens + ((now - this.bucket.at) / 1000) * perSecond);
      this.bucket.at = now;
      const reset = String(Math.max(1, Math.ceil((1 - this.bucket.tokens) / perSecond)));
      if (this.bucket.tokens < 1) {
        res.writeHead(429, { 'content-type': 'text/plain; charset=utf-8', 'x-ratelimit-limit': String(perSecond), 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset, 'retry-after': reset });
        return res.end('limit exceeded\n');
      }
      this.bucket.tokens -= 1;
      res.setHeader('x-ratelimit-limit', String(perSecond));
      res.setHeader('x-ratelimit-remaining', String(Math.floor(this.bucket.tokens)));
      res.setHeader('x-ratelimit-reset', reset);
    }
    if (this.failing) return this.error(res, 500, 'app.fake.failing', 'We encountered an error.');
    const me = this.userOf(req.headers.authorization);
    if (!me) return this.error(res, 401, 'api.context.session_expired.app_error', 'Invalid or expired session, please login again.');
    const parts = path.slice('/api/v4/'.length).split('/');
    const method = req.method ?? 'GET';
    const [a, b, c, d] = parts;
    const forbidden = () => this.error(res, 403, 'api.context.permissions.app_error', 'You do not have the appropriate permissions.');

    if (a === 'users' && method === 'GET' && b && !c) {
      const u = this.users.get(b === 'me' ? me : b);
      return u ? this.json(res, 200, this.presentUser(u)) : this.error(res, 404, 'app.user.missing_account.const', 'Unable to find the user.');
    }
    if (a === 'users' && b && c === 'image') {
      const id = b === 'me' ? me : b;
      if (!this.users.has(id)) return this.error(res, 404, 'app.user.missing_account.const', 'Unable to find the user.');
      if (method === 'GET') {
        const img = this.profileImages.get(id);
        res.writeHead(200, { 'content-type': img?.type ?? 'image/png' });
        return res.end(img?.bytes ?? Buffer.alloc(0));
      }
      if (method === 'POST') {
        const owner = this.users.get(id)!;
        if (id !== me && !(owner.is_bot && this.users.get(me)?.is_bot === false)) return forbidden();
        const form = await new Request('http://fake/', { method: 'POST', headers: { 'content-type': req.headers['content-type'] ?? '' }, body: await this.readBody(req) }).formData().catch(() => null);
        const image = form?.get('image');
        if (!image || typeof image === 'string') return this.error(res, 400, 'api.user.upload_profile_user.no_file.app_error', 'No file under \'image\' in request.');
        this.profileImages.set(id, { bytes: Buffer.from(await image.arrayBuffer()), type: image.type || 'application/octet-stream' });
        return this.json(res, 200, { status: 'OK' });
      }
    }
    if (a === 'bots' && b && !c) {
      const u = this.users.get(b);
      if (!u?.is_bot) return this.error(res, 404, 'store.sql_bot.get.missing.app_error', 'Bot does not exist.');
      const present = () => ({ user_id: u.id, username: u.username, display_name: u.bot_display_name, description: u.bot_description, owner_id: '', create_at: 0, update_at: 0, delete_at: 0 });
      if (method === 'GET') return this.json(res, 200, present());
      if (method === 'PUT') {
        // A bot may change its own profile; Mattermost allows it with manage_bots on itself here.
        if (b !== me) return forbidden();
        let patch: { display_name?: unknown; description?: unknown };
        try {
          patch = JSON.parse((await this.readBody(req)).toString('utf8'));
        } catch {
          return this.error(res, 400, 'api.context.invalid_body_param.app_error', 'Invalid or missing bot in request body.');
        }
        if (typeof patch.display_name === 'string') u.bot_display_name = patch.display_name.slice(0, 64);
        if (typeof patch.description === 'string') u.bot_description = patch.description.slice(0, 1024);
        return this.json(res, 200, present());
      }
    }
    if (a === 'teams' && b && !c && method === 'GET') {
      const t = this.teams.get(b);
      return t ? this.json(res, 200, { ...t, type: 'O', create_at: 0, update_at: 0, delete_at: 0 }) : this.error(res, 404, 'app.team.get.find.app_error', 'Unable to find the existing team.');
    }
    if (a === 'channels' && b && method === 'GET') {
      const ch = this.channels.get(b);
      if (!ch) return this.error(res, 404, 'app.channel.get.existing.app_error', 'Unable to find the existing channel.');
      if (!ch.members.has(me) && ch.type !== 'O') return forbidden();
      if (!c) return this.json(res, 200, { id: ch.id, team_id: ch.team_id, name: ch.name, display_name: ch.display_name, type: ch.type, header: '', purpose: '', create_at: 0, update_at: 0, delete_at: 0 });
      if (c === 'members' && d) {
        const uid = d === 'me' ? me : d;
        if (!ch.members.has(uid)) return this.error(res, 404, 'app.channel.get_member.missing.app_error', 'No channel member found for that user ID and channel ID.');
        const roles = ch.readOnly.has(uid) ? 'channel_guest' : 'channel_user';
        return this.json(res, 200, { channel_id: ch.id, user_id: uid, roles, scheme_user: !ch.readOnly.has(uid), scheme_admin: false, scheme_guest: ch.readOnly.has(uid), msg_count: 0, mention_count: 0, last_viewed_at: 0, last_update_at: 0, notify_props: {} });
      }
      if (c === 'posts') {
        if (!ch.members.has(me)) return forbidden();
        const since = Number(url.searchParams.get('since') ?? '0');
        return this.json(res, 200, this.postList(this.posts.filter((p) => p.channel_id === ch.id && p.update_at > since)));
      }
    }
    if (a === 'posts' && method === 'POST' && (!b || b === 'ephemeral')) {
      let body: any;
      try {
        body = JSON.parse((await this.readBody(req)).toString('utf8'));
      } catch {
        return this.error(res, 400, 'api.context.invalid_body_param.app_error', 'Invalid or missing post in request body.');
      }
      const post = b === 'ephemeral' ? body?.post : body;
      if (!post || typeof post.channel_id !== 'string' || typeof post.message !== 'string') return this.error(res, 400, 'api.context.invalid_body_param.app_error', 'Invalid or missing post in request body.');
      const ch = this.channels.get(post.channel_id);
      if (!ch) return this.error(res, 404, 'app.channel.get.existing.app_error', 'Unable to find the existing channel.');
      if (!ch.members.has(me) || ch.readOnly.has(me)) return forbidden();
      if (post.root_id && !this.posts.some((p) => p.id === post.root_id && p.channel_id === ch.id)) return this.error(res, 400, 'api.post.create_post.root_id.app_error', 'Invalid RootId parameter.');
      if (post.message.length > 16383) return this.error(res, 400, 'model.post.is_valid.msg.app_error', 'Invalid Message.');
      const created = this.createPost(me, post, b === 'ephemeral' ? String(body.user_id ?? '') : null);
      return this.json(res, 201, this.presentPost(created));
    }
    if (a === 'files' && !b && method === 'POST') {
      // Client4's uploadFile: multipart with `channel_id` (before the files) and one or more `files`.
      const form = await new Request('http://fake/', { method: 'POST', headers: { 'content-type': req.headers['content-type'] ?? '' }, body: await this.readBody(req) }).formData().catch(() => null);
      if (!form) return this.error(res, 400, 'api.file.upload_file.read_request.app_error', 'Unable to upload file(s). Error reading or parsing request data.');
      const channelId = form.get('channel_id');
      if (typeof channelId !== 'string' || !channelId) return this.error(res, 400, 'api.context.invalid_body_param.app_error', 'Invalid or missing channel_id in request body.');
      const ch = this.channels.get(channelId);
      if (!ch) return this.error(res, 404, 'app.channel.get.existing.app_error', 'Unable to find the existing channel.');
      if (!ch.members.has(me) || ch.readOnly.has(me)) return forbidden();
      const uploads = form.getAll('files').filter((f): f is File => typeof f !== 'string');
      if (!uploads.length) return this.error(res, 400, 'api.file.upload_file.incorrect_number_of_files.app_error', 'Unable to upload files. Incorrect number of files specified.');
      const infos = [];
      for (const u of uploads) {
        const f = { id: newId(), creator_id: me, channel_id: ch.id, post_id: '', name: u.name || 'file', mime_type: u.type || 'application/octet-stream', bytes: Buffer.from(await u.arrayBuffer()), create_at: this.now() };
        this.files.set(f.id, f);
        infos.push(this.fileInfo(f));
      }
      return this.json(res, 201, { file_infos: infos, client_ids: [] });
    }
    if (a === 'posts' && b && c === 'patch' && method === 'PUT') {
      const p = this.posts.find((x) => x.id === b);
      if (!p) return this.error(res, 404, 'app.post.get.app_error', 'Unable to get the post.');
      if (p.user_id !== me) return forbidden();
      let patch: { message?: unknown; props?: unknown };
      try {
        patch = JSON.parse((await this.readBody(req)).toString('utf8'));
      } catch {
        return this.error(res, 400, 'api.context.invalid_body_param.app_error', 'Invalid or missing post in request body.');
      }
      if (typeof patch.message === 'string') p.message = patch.message;
      if (patch.props && typeof patch.props === 'object') p.props = { ...(patch.props as Record<string, unknown>), ...(p.props.from_bot ? { from_bot: p.props.from_bot } : {}) };
      p.update_at = this.now();
      p.edit_at = p.update_at;
      this.broadcastPost('post_edited', p);
      return this.json(res, 200, this.presentPost(p));
    }
    if (a === 'posts' && b && method === 'GET') {
      const p = this.posts.find((x) => x.id === b);
      if (!p) return this.error(res, 404, 'app.post.get.app_error', 'Unable to get the post.');
      if (!this.channels.get(p.channel_id)?.members.has(me)) return forbidden();
      if (!c) return this.json(res, 200, this.presentPost(p));
      if (c === 'thread') {
        const root = p.root_id || p.id;
        return this.json(res, 200, this.postList(this.posts.filter((x) => x.id === root || x.root_id === root)));
      }
    }
    return this.error(res, 404, 'api.context.404.app_error', 'Sorry, we could not find the page.');
  }

  /** The permalink Mattermost shows for a post: `<site>/<team name>/pl/<post id>`. */
  permalink(postId: string): string {
    const p = this.posts.find((x) => x.id === postId);
    const team = p ? this.teams.get(this.channels.get(p.channel_id)?.team_id ?? '') : undefined;
    return `${this.url}/${team?.name ?? ''}/pl/${postId}`;
  }

  // --- WebSocket (RFC 6455, test/fakes/websocket.ts) ---

  private upgrade(req: http.IncomingMessage, conn: Duplex) {
    const url = new URL(req.url ?? '/', 'http://fake');
    if (url.pathname !== '/api/v4/websocket') return refuseUpgrade(conn, 400, 'Bad Request');
    const s = { connectionId: newId(), userId: this.userOf(req.headers.authorization), seq: 0 } as Socket;
    const peer = acceptWebSocket(req, conn, { onText: (text) => this.onAction(s, text), onClose: () => this.sockets.delete(s) });
    if (!peer) return;
    s.peer = peer;
    this.sockets.add(s);
    if (s.userId) this.hello(s);
  }

  private hello(s: Socket) {
    this.sendEvent(s, 'hello', { connection_id: s.connectionId, server_version: '10.0.0.fake', server_hostname: 'fake-mattermost' }, { omit_users: null, user_id: s.userId ?? '', channel_id: '', team_id: '' });
  }

  private onAction(s: Socket, text: string) {
    let msg: { seq?: number; action?: string; data?: Record<string, unknown> };
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (msg.action === 'authentication_challenge') {
      const user = this.userOf(`Bearer ${String(msg.data?.token ?? '')}`);
      if (!user) {
        this.writeText(s, { status: 'FAIL', seq_reply: msg.seq, error: { id: 'api.web_socket_router.not_authenticated.app_error', message: 'The websocket connection was not authenticated.' } });
        return;
      }
      const first = s.userId === null;
      s.userId = user;
      this.writeText(s, { status: 'OK', seq_reply: msg.seq });
      if (first) this.hello(s);
      return;
    }
    if (msg.action === 'ping') {
      this.writeText(s, { status: 'OK', seq_reply: msg.seq, data: { text: 'pong', version: '10.0.0.fake', server_time: Date.now() } });
      return;
    }
    if (!s.userId) this.writeText(s, { status: 'FAIL', seq_reply: msg.seq, error: { id: 'api.web_socket_router.not_authenticated.app_error', message: 'The websocket connection was not authenticated.' } });
    else this.writeText(s, { status: 'OK', seq_reply: msg.seq });
  }

  private broadcast(event: string, data: Record<string, unknown>, broadcast: Record<string, unknown>, to: (s: Socket) => boolean) {
    for (const s of this.sockets) if (s.userId && to(s)) this.sendEvent(s, event, data, broadcast);
  }

  private sendEvent(s: Socket, event: string, data: Record<string, unknown>, broadcast: Record<string, unknown>) {
    this.writeText(s, { event, data, broadcast, seq: s.seq++ });
  }

  private writeText(s: Socket, body: unknown) {
    s.peer.sendText(JSON.stringify(body));
  }
}

export async function startFakeMattermost(): Promise<FakeMattermost> {
  return new FakeMattermost().start();
}
