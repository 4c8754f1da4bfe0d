import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { acceptWebSocket, refuseUpgrade, type WsPeer } from './websocket.ts';

/**
 * A fake Slack workspace speaking Slack's wire protocols, so `@slack/web-api` and
 * `@slack/socket-mode` talk to it unchanged:
 *
 * - the Web API at `<url>/api/<method>` (POST, a form-encoded or JSON body, the token as
 *   `Authorization: Bearer` or the `token` field): `auth.test`, `apps.connections.open` (the app
 *   token only; it answers a `ws://` URL of this fake with a one-use ticket), `chat.postMessage`
 *   (`thread_ts`; `username` and `icon_url` applied only when the token has
 *   `chat:write.customize`, silently ignored otherwise, as Slack does), `chat.update`,
 *   `chat.postEphemeral`, `chat.getPermalink`, `conversations.info`, `conversations.members`,
 *   `conversations.history`, `conversations.replies` (the root first on every page, then the
 *   replies after `oldest`, oldest first, `limit` a page with a `next_cursor`), `users.info`, and the three steps of
 *   `files.uploadV2` (`files.getUploadURLExternal`, the upload, `files.completeUploadExternal`).
 *   Every answer is HTTP 200 with `{ok:false, error}` on failure (`not_authed`, `invalid_auth`,
 *   `not_allowed_token_type`, `channel_not_found`, `not_in_channel`, `user_not_found`,
 *   `message_not_found`, `cant_update_message`, ...); `throttleNext` answers 429 with
 *   `Retry-After` and `{ok:false, error:"ratelimited"}`; `failing` answers HTTP 500. A token's
 *   scopes are in `X-OAuth-Scopes` of every authenticated answer.
 * - Socket Mode at the URL `apps.connections.open` gave: `hello`; `events_api` envelopes
 *   (`message` for every message a person, a bot or the app posts, edits or deletes, and
 *   `app_mention` for a message that mentions the app's bot user), `slash_commands` and
 *   `interactive` (`block_actions`) envelopes, each with an `envelope_id`; acks recorded
 *   (`acks`); an envelope not acknowledged is sent again, with `retry_attempt` one higher and
 *   `retry_reason: "timeout"`, by `redeliverUnacked()` and to every new connection (an event
 *   sent while no connection is open waits for one, as Slack retries it), unless
 *   `loseWhileDisconnected`; `disconnect()` sends Slack's `disconnect` message, `dropSockets()`
 *   cuts the connections.
 */

export interface FakeSlackUser {
  id: string;
  name: string;
  real_name: string;
  is_bot: boolean;
  /** The bot id of a bot user (messages it posts carry it). */
  bot_id: string | null;
  app_id: string | null;
  image_72: string;
}

export interface FakeSlackChannel {
  id: string;
  name: string;
  is_private: boolean;
  is_archived: boolean;
  members: Set<string>;
}

export interface FakeSlackMessage {
  type: 'message';
  ts: string;
  channel: string;
  user: string;
  text: string;
  thread_ts?: string;
  bot_id?: string;
  app_id?: string;
  username?: string;
  icon_url?: string;
  blocks?: unknown[];
  files?: Array<{ id: string; name: string; title: string }>;
  edited?: { user: string; ts: string };
  subtype?: string;
  reply_count?: number;
  /** Message metadata (`event_type`, `event_payload`): shown by history and replies only with `include_all_metadata`. */
  metadata?: { event_type: string; event_payload: Record<string, unknown> };
}

interface Token {
  kind: 'bot' | 'app' | 'user';
  user: string | null;
  scopes: string[];
}

export interface FakeSlackEnvelope {
  envelope_id: string;
  type: 'events_api' | 'slash_commands' | 'interactive';
  payload: Record<string, unknown>;
  accepts_response_payload: boolean;
  retry_attempt: number;
  retry_reason: string;
}

interface Socket {
  peer: WsPeer;
}

const alnum = (n: number) => {
  const chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  return Array.from(crypto.randomBytes(n), (b) => chars[b % chars.length]).join('');
};

export const BOT_SCOPES = ['chat:write', 'channels:read', 'groups:read', 'channels:history', 'groups:history', 'users:read', 'app_mentions:read', 'commands', 'files:write'];

export class FakeSlack {
  readonly team = { id: `T${alnum(10)}`, name: 'Acme', domain: 'acme' };
  readonly users = new Map<string, FakeSlackUser>();
  readonly channels = new Map<string, FakeSlackChannel>();
  readonly messages: FakeSlackMessage[] = [];
  readonly ephemerals: Array<{ channel: string; user: string; text: string; thread_ts?: string; blocks?: unknown[] }> = [];
  readonly files = new Map<string, { id: string; name: string; title: string; length: number; bytes: Buffer | null; channel: string | null; thread_ts: string | null }>();
  /** Every Web API call: the method and the token's kind (never the token). */
  readonly calls: Array<{ method: string; token: Token['kind'] | null; body: Record<string, unknown> }> = [];
  /** Every ack received: the envelope id and the payload sent with it. */
  readonly acks: Array<{ envelope_id: string; payload: unknown }> = [];
  /** Every envelope sent (each redelivery too). */
  readonly sent: FakeSlackEnvelope[] = [];
  /** Answer the next N Web API calls with 429 `ratelimited` and `Retry-After: 1`. */
  throttleNext = 0;
  /** Answer every Web API call with HTTP 500 while true. */
  failing = false;
  /** Drop events sent while no connection is open instead of keeping them for the next. */
  loseWhileDisconnected = false;
  /** The app installed by `installApp`. */
  app: { id: string; botUser: FakeSlackUser; botToken: string; appToken: string } | null = null;
  url = '';
  private readonly tokens = new Map<string, Token>();
  private readonly tickets = new Set<string>();
  private readonly sockets = new Set<Socket>();
  private readonly pending = new Map<string, FakeSlackEnvelope>();
  private server: http.Server;
  private clock = Math.floor(Date.now() / 1000) * 1_000_000;

  constructor() {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((err) => {
        if (!res.headersSent) this.json(res, 500, { ok: false, error: 'fatal_error', detail: String(err) });
      });
    });
    this.server.on('upgrade', (req, conn) => this.upgrade(req, conn));
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The Web API base URL, as `slackApiUrl` takes it. */
  get apiUrl(): string {
    return `${this.url}/api/`;
  }

  async stop(): Promise<void> {
    this.dropSockets();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** The app: its bot user (named `botName`), bot token with `scopes`, and app-level token. */
  installApp(opts: { botName: string; botToken: string; appToken: string; scopes?: string[] }) {
    const appId = `A${alnum(10)}`;
    const botUser = this.addUser({ name: opts.botName, bot: true, appId });
    this.tokens.set(opts.botToken, { kind: 'bot', user: botUser.id, scopes: opts.scopes ?? BOT_SCOPES });
    this.tokens.set(opts.appToken, { kind: 'app', user: null, scopes: ['connections:write'] });
    this.app = { id: appId, botUser, botToken: opts.botToken, appToken: opts.appToken };
    return this.app;
  }

  /** Revokes a token: Slack answers `invalid_auth` to it from now on. */
  revoke(token: string) {
    this.tokens.delete(token);
  }

  /** Token rotation: `next` is the same identity with the same scopes, and `token` is refused from now on. */
  rotate(token: string, next: string) {
    const t = this.tokens.get(token);
    if (!t) throw new Error('no such token');
    this.tokens.set(next, { ...t, scopes: [...t.scopes] });
    this.tokens.delete(token);
    if (this.app?.botToken === token) this.app.botToken = next;
    if (this.app?.appToken === token) this.app.appToken = next;
  }

  /** Changes the scopes a token was granted. */
  setScopes(token: string, scopes: string[]) {
    const t = this.tokens.get(token);
    if (t) t.scopes = scopes;
  }

  /** A person, or a bot user (another app's bot when `bot` and not the installed app). */
  addUser(opts: { name: string; realName?: string; bot?: boolean; appId?: string; token?: string }): FakeSlackUser {
    const u: FakeSlackUser = {
      id: `U${alnum(10)}`,
      name: opts.name,
      real_name: opts.realName ?? opts.name,
      is_bot: opts.bot ?? false,
      bot_id: opts.bot ? `B${alnum(10)}` : null,
      app_id: opts.bot ? (opts.appId ?? `A${alnum(10)}`) : null,
      image_72: `https://avatars.example/${opts.name}.png`,
    };
    this.users.set(u.id, u);
    if (opts.token) this.tokens.set(opts.token, { kind: opts.bot ? 'bot' : 'user', user: u.id, scopes: BOT_SCOPES });
    return u;
  }

  addChannel(opts: { name: string; private?: boolean; members?: string[] }): FakeSlackChannel {
    const c: FakeSlackChannel = { id: `${opts.private ? 'G' : 'C'}${alnum(10)}`, name: opts.name, is_private: opts.private ?? false, is_archived: false, members: new Set(opts.members ?? []) };
    this.channels.set(c.id, c);
    return c;
  }

  /** A person (or a bot user) writes in a channel or a thread: the `message` event, and `app_mention` when it mentions the app. */
  say(userId: string, channel: string, text: string, threadTs?: string): FakeSlackMessage {
    const u = this.users.get(userId);
    return this.addMessage({ channel, user: userId, text, ...(threadTs ? { thread_ts: threadTs } : {}), ...(u?.bot_id ? { bot_id: u.bot_id, app_id: u.app_id ?? undefined } : {}) });
  }

  /** A person edits their message: `message` with subtype `message_changed`. */
  edit(channel: string, ts: string, text: string): void {
    const m = this.messages.find((x) => x.channel === channel && x.ts === ts);
    if (!m) throw new Error(`no message ${ts} in ${channel}`);
    const previous = { ...m };
    m.text = text;
    m.edited = { user: m.user, ts: this.nextTs() };
    this.sendEvent({ type: 'message', subtype: 'message_changed', channel, hidden: true, ts: this.nextTs(), message: this.present(m), previous_message: this.present(previous), event_ts: m.edited.ts, channel_type: this.channelType(channel) });
  }

  /** A person deletes their message: `message` with subtype `message_deleted`. */
  remove(channel: string, ts: string): void {
    const i = this.messages.findIndex((x) => x.channel === channel && x.ts === ts);
    if (i < 0) throw new Error(`no message ${ts} in ${channel}`);
    const [m] = this.messages.splice(i, 1);
    const at = this.nextTs();
    this.sendEvent({ type: 'message', subtype: 'message_deleted', channel, hidden: true, ts: at, deleted_ts: ts, previous_message: this.present(m!), event_ts: at, channel_type: this.channelType(channel) });
  }

  /** A person types the app's slash command in a channel: a `slash_commands` envelope; its id. */
  slashCommand(userId: string, channel: string, text: string, command = '/crewhouse'): string {
    const c = this.channels.get(channel);
    const u = this.users.get(userId);
    return this.enqueue('slash_commands', {
      token: 'verification-token-unused',
      team_id: this.team.id,
      team_domain: this.team.domain,
      channel_id: channel,
      channel_name: c?.name ?? '',
      user_id: userId,
      user_name: u?.name ?? '',
      command,
      text,
      api_app_id: this.app?.id ?? '',
      is_enterprise_install: 'false',
      response_url: `${this.url}/commands/${this.team.id}/${alnum(12)}`,
      trigger_id: `${Date.now()}.${alnum(12)}`,
    }, true);
  }

  /** A person clicks a button of a message: an `interactive` envelope of type `block_actions`; its id. */
  click(userId: string, channel: string, messageTs: string, action: { action_id: string; value: string; block_id?: string }): string {
    const m = this.messages.find((x) => x.channel === channel && x.ts === messageTs);
    if (!m) throw new Error(`no message ${messageTs} in ${channel}`);
    const u = this.users.get(userId);
    const actionTs = this.nextTs();
    return this.enqueue('interactive', {
      type: 'block_actions',
      user: { id: userId, username: u?.name ?? '', name: u?.name ?? '', team_id: this.team.id },
      api_app_id: this.app?.id ?? '',
      token: 'verification-token-unused',
      container: { type: 'message', message_ts: m.ts, channel_id: channel, is_ephemeral: false, ...(m.thread_ts ? { thread_ts: m.thread_ts } : {}) },
      trigger_id: `${Date.now()}.${alnum(12)}`,
      team: { id: this.team.id, domain: this.team.domain },
      enterprise: null,
      is_enterprise_install: false,
      channel: { id: channel, name: this.channels.get(channel)?.name ?? '' },
      message: this.present(m),
      state: { values: {} },
      response_url: `${this.url}/actions/${this.team.id}/${alnum(12)}`,
      actions: [{ action_id: action.action_id, block_id: action.block_id ?? alnum(5), text: { type: 'plain_text', text: action.action_id, emoji: true }, value: action.value, type: 'button', action_ts: actionTs }],
    }, false);
  }

  /** Sends every envelope not acknowledged yet again, as Slack does after its timeout. */
  redeliverUnacked(): number {
    let n = 0;
    for (const e of this.pending.values()) {
      e.retry_attempt++;
      e.retry_reason = 'timeout';
      n += this.deliver(e) ? 1 : 0;
    }
    return n;
  }

  /** Sends an envelope again (acknowledged or not): the ack lost on its way, or a retry racing it. */
  redeliver(envelopeId: string): void {
    const e = this.sent.find((x) => x.envelope_id === envelopeId);
    if (!e) throw new Error(`no envelope ${envelopeId}`);
    this.deliver({ ...e, retry_attempt: e.retry_attempt + 1, retry_reason: 'timeout' });
  }

  /** Slack's `disconnect` message (`refresh_requested`, `warning`, `link_disabled`): the client reconnects. */
  disconnect(reason = 'refresh_requested'): void {
    for (const s of this.sockets) s.peer.sendText(JSON.stringify({ type: 'disconnect', reason, debug_info: { host: 'fake-slack' } }));
  }

  /** Cuts every Socket Mode connection without a close frame, as a network failure would. */
  dropSockets(): void {
    for (const s of [...this.sockets]) s.peer.destroy();
    this.sockets.clear();
  }

  get openSockets(): number {
    return this.sockets.size;
  }

  /** How many Web API calls of `method` were made. */
  callsOf(method: string): number {
    return this.calls.filter((c) => c.method === method).length;
  }

  /** Envelopes sent and not acknowledged. */
  get unacked(): string[] {
    return [...this.pending.keys()];
  }

  /** The permalink Slack gives a message: `/archives/<channel>/p<ts without the dot>`, with `thread_ts` for a reply. */
  permalink(channel: string, ts: string): string {
    const m = this.messages.find((x) => x.channel === channel && x.ts === ts);
    const base = `${this.url}/archives/${channel}/p${ts.replace('.', '')}`;
    return m?.thread_ts && m.thread_ts !== m.ts ? `${base}?thread_ts=${m.thread_ts}&cid=${channel}` : base;
  }

  // --- messages and events ---

  private nextTs(): string {
    this.clock = Math.max(this.clock + 1, Date.now() * 1000);
    return `${Math.floor(this.clock / 1_000_000)}.${String(this.clock % 1_000_000).padStart(6, '0')}`;
  }

  private channelType(channel: string) {
    return this.channels.get(channel)?.is_private ? 'group' : 'channel';
  }

  private present(m: FakeSlackMessage): Record<string, unknown> {
    const { channel: _channel, metadata: _metadata, ...rest } = m;
    const replies = this.messages.filter((x) => x.channel === m.channel && x.thread_ts === m.ts && x.ts !== m.ts);
    return { ...rest, team: this.team.id, ...(replies.length && (!m.thread_ts || m.thread_ts === m.ts) ? { thread_ts: m.ts, reply_count: replies.length } : {}) };
  }

  private addMessage(m: Omit<FakeSlackMessage, 'type' | 'ts'>): FakeSlackMessage {
    const msg: FakeSlackMessage = { type: 'message', ts: this.nextTs(), ...m };
    this.messages.push(msg);
    const event = { ...this.present(msg), channel: msg.channel, event_ts: msg.ts, channel_type: this.channelType(msg.channel) };
    this.sendEvent(event);
    const bot = this.app?.botUser;
    if (bot && msg.user !== bot.id && msg.text.includes(`<@${bot.id}>`)) {
      const { channel_type: _t, ...mention } = event;
      this.sendEvent({ ...mention, type: 'app_mention' });
    }
    return msg;
  }

  private sendEvent(event: Record<string, unknown>) {
    this.enqueue('events_api', {
      token: 'verification-token-unused',
      team_id: this.team.id,
      context_team_id: this.team.id,
      api_app_id: this.app?.id ?? '',
      event,
      type: 'event_callback',
      event_id: `Ev${alnum(10)}`,
      event_time: Math.floor(Date.now() / 1000),
      authorizations: [{ enterprise_id: null, team_id: this.team.id, user_id: this.app?.botUser.id ?? '', is_bot: true, is_enterprise_install: false }],
      is_ext_shared_channel: false,
      event_context: `4-${alnum(20)}`,
    }, false);
  }

  private enqueue(type: FakeSlackEnvelope['type'], payload: Record<string, unknown>, acceptsResponse: boolean): string {
    const e: FakeSlackEnvelope = { envelope_id: crypto.randomUUID(), type, payload, accepts_response_payload: acceptsResponse, retry_attempt: 0, retry_reason: '' };
    if (!this.app) return e.envelope_id;
    if (this.sockets.size === 0 && this.loseWhileDisconnected) return e.envelope_id;
    this.pending.set(e.envelope_id, e);
    this.deliver(e);
    return e.envelope_id;
  }

  /** To one open connection (Slack picks one of the app's connections); false when none is open. */
  private deliver(e: FakeSlackEnvelope): boolean {
    const s = [...this.sockets][0];
    if (!s) return false;
    const copy = { ...e };
    this.sent.push(copy);
    s.peer.sendText(JSON.stringify(copy));
    return true;
  }

  // --- Socket Mode ---

  private upgrade(req: http.IncomingMessage, conn: Duplex) {
    const url = new URL(req.url ?? '/', 'http://fake');
    const ticket = url.searchParams.get('ticket') ?? '';
    if (url.pathname !== '/link/' || !this.tickets.delete(ticket)) return refuseUpgrade(conn, 401, 'Unauthorized');
    const s = {} as Socket;
    const peer = acceptWebSocket(req, conn, { onText: (text) => this.onSocketText(text), onClose: () => this.sockets.delete(s) });
    if (!peer) return;
    s.peer = peer;
    this.sockets.add(s);
    peer.sendText(JSON.stringify({ type: 'hello', num_connections: this.sockets.size, debug_info: { host: 'fake-slack', build_number: 1, approximate_connection_time: 18060 }, connection_info: { app_id: this.app?.id ?? '' } }));
    // What waited for a connection (or was sent on one that went away unacknowledged) comes now.
    for (const e of this.pending.values()) {
      if (this.sent.some((x) => x.envelope_id === e.envelope_id)) {
        e.retry_attempt++;
        e.retry_reason = 'timeout';
      }
      this.deliver(e);
    }
  }

  private onSocketText(text: string) {
    let msg: { envelope_id?: unknown; payload?: unknown };
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (typeof msg.envelope_id !== 'string') return;
    this.acks.push({ envelope_id: msg.envelope_id, payload: msg.payload ?? null });
    this.pending.delete(msg.envelope_id);
  }

  // --- Web API ---

  private json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(JSON.stringify(body));
  }

  private async readBody(req: http.IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  }

  /** A form-encoded or JSON body (JSON needs the token in the header, as Slack says); multipart is read as a form. */
  private async args(req: http.IncomingMessage, raw: Buffer): Promise<Record<string, unknown> | null> {
    const type = req.headers['content-type'] ?? '';
    if (/^application\/json/i.test(type)) {
      try {
        const v = JSON.parse(raw.toString('utf8') || '{}');
        return v && typeof v === 'object' && !Array.isArray(v) ? v : null;
      } catch {
        return null;
      }
    }
    if (/^multipart\/form-data/i.test(type)) {
      const form = await new Request('http://fake/', { method: 'POST', headers: { 'content-type': type }, body: raw }).formData().catch(() => null);
      if (!form) return null;
      return Object.fromEntries([...form.entries()].map(([k, v]) => [k, typeof v === 'string' ? v : '[file]']));
    }
    return Object.fromEntries(new URLSearchParams(raw.toString('utf8')));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://fake');
    const upload = /^\/upload\/(F[A-Z0-9]+)$/.exec(url.pathname);
    if (upload && req.method === 'POST') {
      const f = this.files.get(upload[1]!);
      const raw = await this.readBody(req);
      if (!f) {
        res.writeHead(404);
        return res.end();
      }
      const type = req.headers['content-type'] ?? '';
      if (/^multipart\/form-data/i.test(type)) {
        const form = await new Request('http://fake/', { method: 'POST', headers: { 'content-type': type }, body: raw }).formData();
        const file = [...form.values()].find((v) => typeof v !== 'string');
        f.bytes = file ? Buffer.from(await (file as Blob).arrayBuffer()) : Buffer.alloc(0);
      } else f.bytes = raw;
      res.writeHead(200, { 'content-type': 'text/plain' });
      return res.end(`OK - ${f.bytes.length}`);
    }
    const m = /^\/api\/([a-zA-Z.]+)$/.exec(url.pathname);
    if (!m || req.method !== 'POST') {
      res.writeHead(404, { 'content-type': 'text/html' });
      return res.end('<html><body>Slack fake: no such page</body></html>');
    }
    const method = m[1]!;
    const raw = await this.readBody(req);
    const args = await this.args(req, raw);
    const bearer = /^Bearer (\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? null;
    const tokenValue = bearer ?? (typeof args?.token === 'string' ? args.token : null);
    const token = tokenValue ? (this.tokens.get(tokenValue) ?? null) : null;
    this.calls.push({ method, token: token?.kind ?? null, body: Object.fromEntries(Object.entries(args ?? {}).filter(([k]) => k !== 'token')) });
    if (this.throttleNext > 0) {
      this.throttleNext--;
      return this.json(res, 429, { ok: false, error: 'ratelimited' }, { 'retry-after': '1' });
    }
    if (this.failing) {
      res.writeHead(500, { 'content-type': 'text/html' });
      return res.end('<html><body>Internal Server Error</body></html>');
    }
    if (!args) return this.json(res, 200, { ok: false, error: 'invalid_json' });
    if (!tokenValue) return this.json(res, 200, { ok: false, error: 'not_authed' });
    if (!token) return this.json(res, 200, { ok: false, error: 'invalid_auth' });
    const scopes = { 'x-oauth-scopes': token.scopes.join(',') };
    const ok = (body: Record<string, unknown>) => this.json(res, 200, { ok: true, ...body }, scopes);
    const fail = (error: string, extra: Record<string, unknown> = {}) => this.json(res, 200, { ok: false, error, ...extra }, scopes);
    const str = (k: string) => (typeof args[k] === 'string' ? (args[k] as string) : typeof args[k] === 'number' ? String(args[k]) : '');

    if (method === 'apps.connections.open') {
      if (token.kind !== 'app') return fail('not_allowed_token_type');
      const ticket = crypto.randomUUID();
      this.tickets.add(ticket);
      return ok({ url: `${this.url.replace(/^http/, 'ws')}/link/?ticket=${ticket}&app_id=${this.app?.id ?? ''}` });
    }
    if (token.kind === 'app') return fail('not_allowed_token_type');
    const me = this.users.get(token.user ?? '')!;
    const channelOf = (id: string) => {
      const c = this.channels.get(id);
      // A private channel the caller is not in does not exist for it.
      return c && (!c.is_private || c.members.has(me.id)) ? c : null;
    };

    switch (method) {
      case 'auth.test':
        return ok({ url: `https://${this.team.domain}.slack.com/`, team: this.team.name, user: me.name, team_id: this.team.id, user_id: me.id, ...(me.bot_id ? { bot_id: me.bot_id } : {}), is_enterprise_install: false });
      case 'users.info': {
        const u = this.users.get(str('user'));
        if (!u) return fail('user_not_found');
        return ok({ user: { id: u.id, team_id: this.team.id, name: u.name, real_name: u.real_name, deleted: false, is_bot: u.is_bot, is_app_user: false, profile: { real_name: u.real_name, display_name: u.name, image_72: u.image_72, ...(u.bot_id ? { bot_id: u.bot_id } : {}) } } });
      }
      case 'conversations.info': {
        const c = channelOf(str('channel'));
        if (!c) return fail('channel_not_found');
        return ok({ channel: { id: c.id, name: c.name, is_channel: !c.is_private, is_group: false, is_im: false, is_private: c.is_private, is_archived: c.is_archived, is_general: false, is_member: c.members.has(me.id), created: 1_700_000_000, creator: '', name_normalized: c.name, num_members: c.members.size } });
      }
      case 'conversations.members': {
        const c = channelOf(str('channel'));
        if (!c) return fail('channel_not_found');
        const all = [...c.members];
        const limit = Math.max(1, Math.min(1000, Number(str('limit')) || 100));
        const start = Number(Buffer.from(str('cursor'), 'base64').toString('utf8').replace(/^offset:/, '')) || 0;
        const next = start + limit < all.length ? Buffer.from(`offset:${start + limit}`).toString('base64') : '';
        return ok({ members: all.slice(start, start + limit), response_metadata: { next_cursor: next } });
      }
      case 'conversations.history':
      case 'conversations.replies': {
        const c = channelOf(str('channel'));
        if (!c) return fail('channel_not_found');
        if (!c.members.has(me.id)) return fail('not_in_channel');
        const oldest = Number(str('oldest') || '0');
        const inclusive = str('inclusive') === 'true' || str('inclusive') === '1';
        const after = (m: FakeSlackMessage) => (inclusive ? Number(m.ts) >= oldest : Number(m.ts) > oldest);
        const withMetadata = str('include_all_metadata') === 'true' || str('include_all_metadata') === '1' || args.include_all_metadata === true;
        const shown = (m: FakeSlackMessage) => ({ ...this.present(m), ...(withMetadata && m.metadata ? { metadata: m.metadata } : {}) });
        if (method === 'conversations.history') {
          const list = this.messages.filter((x) => x.channel === c.id && (!x.thread_ts || x.thread_ts === x.ts) && after(x)).reverse();
          return ok({ messages: list.map(shown), has_more: false, response_metadata: { next_cursor: '' } });
        }
        const ts = str('ts');
        const root = this.messages.find((x) => x.channel === c.id && x.ts === ts);
        if (!root) return fail('thread_not_found');
        // Replies oldest first, `limit` (1 to 1000, 1000 by default) per page; the next page's cursor names its first reply (`next_ts:<ts>`, base64) as Slack's does.
        const latest = str('latest') ? Number(str('latest')) : Infinity;
        const replies = this.messages.filter((x) => x.channel === c.id && x.thread_ts === ts && x.ts !== ts && after(x) && Number(x.ts) <= latest);
        const limit = Math.max(1, Math.min(1000, Number(str('limit')) || 1000));
        let start = 0;
        if (str('cursor')) {
          const from = /^next_ts:(\d{7,})$/.exec(Buffer.from(str('cursor'), 'base64').toString('utf8'))?.[1];
          if (!from) return fail('invalid_cursor');
          start = replies.findIndex((x) => Number(x.ts.replace('.', '')) >= Number(from));
          if (start < 0) start = replies.length;
        }
        const page = replies.slice(start, start + limit);
        const next = replies[start + limit];
        // The thread's root comes first on every page, whatever `oldest` says, as Slack answers.
        return ok({ messages: [root, ...page].map(shown), has_more: next !== undefined, response_metadata: { next_cursor: next ? Buffer.from(`next_ts:${next.ts.replace('.', '')}`).toString('base64') : '' } });
      }
      case 'chat.postMessage':
      case 'chat.postEphemeral': {
        const c = channelOf(str('channel'));
        if (!c) return fail('channel_not_found');
        if (c.is_archived) return fail('is_archived');
        if (!c.members.has(me.id)) return fail('not_in_channel');
        const text = str('text');
        const blocks = typeof args.blocks === 'string' ? (JSON.parse(args.blocks) as unknown[]) : Array.isArray(args.blocks) ? args.blocks : undefined;
        if (!text && !blocks) return fail('no_text');
        if (text.length > 40_000) return fail('msg_too_long');
        const threadTs = str('thread_ts') || undefined;
        const rawMetadata = typeof args.metadata === 'string' ? (JSON.parse(args.metadata) as unknown) : args.metadata;
        const metadata = rawMetadata && typeof rawMetadata === 'object' ? (rawMetadata as { event_type?: unknown; event_payload?: unknown }) : null;
        if (metadata && (typeof metadata.event_type !== 'string' || !metadata.event_payload || typeof metadata.event_payload !== 'object')) return fail('invalid_metadata_format');
        if (method === 'chat.postEphemeral') {
          const user = str('user');
          if (!this.users.has(user)) return fail('user_not_found');
          if (!c.members.has(user)) return fail('user_not_in_channel');
          this.ephemerals.push({ channel: c.id, user, text, ...(threadTs ? { thread_ts: threadTs } : {}), ...(blocks ? { blocks } : {}) });
          return ok({ message_ts: this.nextTs() });
        }
        // Without chat:write.customize Slack ignores username and icon_url.
        const custom = token.scopes.includes('chat:write.customize');
        const msg = this.addMessage({
          channel: c.id,
          user: me.id,
          text,
          ...(threadTs ? { thread_ts: threadTs } : {}),
          ...(me.bot_id ? { bot_id: me.bot_id, app_id: me.app_id ?? undefined } : {}),
          ...(custom && str('username') ? { username: str('username') } : {}),
          ...(custom && str('icon_url') ? { icon_url: str('icon_url') } : {}),
          ...(blocks ? { blocks } : {}),
          ...(metadata ? { metadata: { event_type: metadata.event_type as string, event_payload: metadata.event_payload as Record<string, unknown> } } : {}),
        });
        return ok({ channel: c.id, ts: msg.ts, message: this.present(msg) });
      }
      case 'chat.update': {
        const c = channelOf(str('channel'));
        if (!c) return fail('channel_not_found');
        const msg = this.messages.find((x) => x.channel === c.id && x.ts === str('ts'));
        if (!msg) return fail('message_not_found');
        if (msg.user !== me.id) return fail('cant_update_message');
        const previous = { ...msg };
        if (typeof args.text === 'string') msg.text = args.text;
        if (args.blocks !== undefined) msg.blocks = typeof args.blocks === 'string' ? (JSON.parse(args.blocks) as unknown[]) : (args.blocks as unknown[]);
        msg.edited = { user: me.id, ts: this.nextTs() };
        this.sendEvent({ type: 'message', subtype: 'message_changed', channel: c.id, hidden: true, ts: msg.edited.ts, message: this.present(msg), previous_message: this.present(previous), event_ts: msg.edited.ts, channel_type: this.channelType(c.id) });
        return ok({ channel: c.id, ts: msg.ts, text: msg.text, message: this.present(msg) });
      }
      case 'chat.getPermalink': {
        const c = channelOf(str('channel'));
        if (!c) return fail('channel_not_found');
        const ts = str('message_ts');
        if (!this.messages.some((x) => x.channel === c.id && x.ts === ts)) return fail('message_not_found');
        return ok({ channel: c.id, permalink: this.permalink(c.id, ts) });
      }
      case 'files.getUploadURLExternal': {
        const length = Number(str('length'));
        if (!str('filename') || !Number.isInteger(length) || length < 0) return fail('invalid_arguments');
        const id = `F${alnum(10)}`;
        this.files.set(id, { id, name: str('filename'), title: str('filename'), length, bytes: null, channel: null, thread_ts: null });
        return ok({ upload_url: `${this.url}/upload/${id}`, file_id: id });
      }
      case 'files.completeUploadExternal': {
        let list: Array<{ id: string; title?: string }>;
        try {
          list = typeof args.files === 'string' ? JSON.parse(args.files) : (args.files as typeof list);
        } catch {
          return fail('invalid_arguments');
        }
        if (!Array.isArray(list) || list.length === 0) return fail('invalid_arguments');
        const channel = str('channel_id') || str('channels');
        const c = channel ? channelOf(channel) : null;
        if (channel && !c) return fail('channel_not_found');
        if (c && !c.members.has(me.id)) return fail('not_in_channel');
        const done = [];
        for (const item of list) {
          const f = this.files.get(item.id);
          if (!f || f.bytes === null) return fail('file_not_found');
          if (item.title) f.title = item.title;
          f.channel = c?.id ?? null;
          f.thread_ts = str('thread_ts') || null;
          done.push({ id: f.id, name: f.name, title: f.title, size: f.bytes.length });
        }
        if (c) {
          this.addMessage({
            channel: c.id,
            user: me.id,
            text: str('initial_comment'),
            subtype: 'file_share',
            files: done.map((d) => ({ id: d.id, name: d.name, title: d.title })),
            ...(str('thread_ts') ? { thread_ts: str('thread_ts') } : {}),
            ...(me.bot_id ? { bot_id: me.bot_id } : {}),
          });
        }
        return ok({ files: done });
      }
      default:
        return fail('unknown_method');
    }
  }
}

export async function startFakeSlack(): Promise<FakeSlack> {
  return new FakeSlack().start();
}
