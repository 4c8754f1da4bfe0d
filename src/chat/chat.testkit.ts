// Test support for the chat (imported by *.test.ts only): a chat server listening on
// 127.0.0.1 on an ephemeral port over a fresh database, its first organization, accounts of
// any role, the real zulip-js client, and raw HTTP.
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { systemActor } from '../audit/audit.ts';
import { captureLogger, testConfig, testDb, uniq } from '../../test/harness.ts';
import { assertZulipResponse } from '../../test/zulip-openapi.ts';
import type { Db } from '../db/database.ts';
import type { App } from '../http/kernel.ts';
import { loadCipher } from '../secrets/cipher.ts';
import { buildChatApp, createChatServices, type ChatServices } from './app.ts';
import type { ChatRole } from './chat.tables.ts';
import type { QueueLimits } from './events/queues.ts';
import type { RealmRow, UserRow } from './users/users.store.ts';

/** The zulip-js client as these tests use it (the package ships no types). */
export interface ZulipClient {
  config: { apiKey: string; username: string };
  callEndpoint(endpoint: string, method?: string, params?: Record<string, unknown>): Promise<any>;
  users: {
    retrieve(params?: Record<string, unknown>): Promise<any>;
    create(params: Record<string, unknown>): Promise<any>;
    me: { getProfile(): Promise<any>; subscriptions: { add(p: Record<string, unknown>): Promise<any>; remove(p: Record<string, unknown>): Promise<any> } };
  };
  streams: { retrieve(params?: Record<string, unknown>): Promise<any>; getStreamId(name: string): Promise<any>; subscriptions: { retrieve(params?: Record<string, unknown>): Promise<any> } };
  emojis: { retrieve(params?: Record<string, unknown>): Promise<any> };
  server: { settings(params?: Record<string, unknown>): Promise<any> };
  messages: {
    send(params: Record<string, unknown>): Promise<any>;
    retrieve(params: Record<string, unknown>): Promise<any>;
    update(params: Record<string, unknown>): Promise<any>;
    getById(params: Record<string, unknown>): Promise<any>;
    deleteById(params: Record<string, unknown>): Promise<any>;
    flags: { add(params: Record<string, unknown>): Promise<any>; remove(params: Record<string, unknown>): Promise<any> };
  };
  reactions: { add(params: Record<string, unknown>): Promise<any>; remove(params: Record<string, unknown>): Promise<any> };
  queues: { register(params?: Record<string, unknown>): Promise<any>; deregister(params: Record<string, unknown>): Promise<any> };
  events: { retrieve(params: Record<string, unknown>): Promise<any> };
  typing: { send(params: Record<string, unknown>): Promise<any> };
}
type ZulipFactory = (config: { realm: string; username: string; apiKey?: string; password?: string }) => Promise<ZulipClient>;
export const zulip = createRequire(import.meta.url)('zulip-js') as ZulipFactory;

export interface Account {
  id: number;
  email: string;
  apiKey: string;
  row: UserRow;
  client: ZulipClient;
}

export interface RawResponse {
  status: number;
  headers: Headers;
  body: any;
}

export interface ChatTestServer {
  app: App;
  db: Db;
  base: string;
  services: ChatServices;
  realm: RealmRow;
  owner: Account;
  logs: string[];
  /** A new account of a role (and options) with its own client. */
  account(role: ChatRole, opts?: { bot?: { type: number; ownerId: number | null }; visibility?: number; password?: string; email?: string; fullName?: string }): Promise<Account>;
  /**
   * Long-polls a queue until `count` events that `want` picks arrived (each answer checked
   * against zulip.yaml); an earlier change's event may reach a queue registered after it, so
   * `want` names what the test waits for.
   */
  events(who: Account, queueId: string, count: number, want: (e: any) => boolean): Promise<any[]>;
  /** Raw HTTP: `form` goes form-encoded in the body, `query` in the URL. */
  raw(method: string, path: string, opts?: { auth?: Account | string | null; form?: Record<string, string>; query?: Record<string, string>; headers?: Record<string, string>; body?: string | Buffer }): Promise<RawResponse>;
  close(): Promise<void>;
}

export const basic = (email: string, key: string) => `Basic ${Buffer.from(`${email}:${key}`).toString('base64')}`;

export async function chatTestServer(opts: { config?: Record<string, string>; queueLimits?: Partial<QueueLimits>; db?: Db } = {}): Promise<ChatTestServer> {
  const { db, close: closeDb } = opts.db ? { db: opts.db, close: async () => {} } : await testDb();
  const config = testConfig({ SERVICE_CHAT_RATE_LIMIT: '0', ...opts.config });
  const { logger, lines } = captureLogger();
  const services = createChatServices({ db, cipher: loadCipher(config), queueLimits: opts.queueLimits, maxFileUploadMib: config.chatMaxFileUploadMib, deleteUnclaimedUploadsDays: config.chatDeleteUnclaimedUploadsDays });
  const app = await buildChatApp({ config, logger, services });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const created = await services.realms.createRealm(systemActor('test'), {
    stringId: uniq('org').toLowerCase().replace(/[^a-z0-9-]/g, '-').slice(0, 39),
    name: 'Test organization',
    url: base,
    ownerEmail: 'owner@example.com',
    ownerName: 'Olivia Owner',
    ownerPassword: 'owner-password',
  });
  const realm = created.realm;
  const asAccount = async (row: UserRow, apiKey: string): Promise<Account> => ({
    id: row.id,
    email: row.delivery_email,
    apiKey,
    row,
    client: await zulip({ realm: base, username: row.delivery_email, apiKey }),
  });
  const owner = await asAccount(created.owner, created.apiKey);

  const raw: ChatTestServer['raw'] = async (method, path, o = {}) => {
    const headers: Record<string, string> = { ...o.headers };
    if (o.auth && typeof o.auth === 'object') headers.authorization = basic(o.auth.email, o.auth.apiKey);
    else if (typeof o.auth === 'string') headers.authorization = o.auth;
    let body: string | Buffer | undefined = o.body;
    if (o.form) {
      body = new URLSearchParams(o.form).toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    }
    const url = `${base}/api/v1${path}${o.query ? `?${new URLSearchParams(o.query)}` : ''}`;
    const res = await fetch(url, { method, headers, body });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: res.status, headers: res.headers, body: parsed };
  };

  return {
    app,
    db,
    base,
    services,
    realm,
    owner,
    logs: lines,
    async account(role, o = {}) {
      const name = uniq('u').toLowerCase();
      const email = o.email ?? (o.bot ? `${name}-bot@127.0.0.1` : `${name}@example.com`);
      const { row, apiKey } = await db.transaction().execute((trx) =>
        services.users.createAccount(trx, realm, { email, fullName: o.fullName ?? `User ${name}`, role, bot: o.bot, visibility: o.visibility, password: o.password }),
      );
      return asAccount(row, apiKey);
    },
    raw,
    async events(who, queueId, count, want) {
      const seen: any[] = [];
      for (let last = -1; seen.length < count; ) {
        const res = await raw('GET', '/events', { auth: who, query: { queue_id: queueId, last_event_id: String(last) } });
        if (res.status !== 200) throw new Error(`GET /events answered ${res.status}: ${JSON.stringify(res.body)}`);
        assertZulipResponse('GET', '/events', res.body);
        for (const e of res.body.events) {
          last = Math.max(last, e.id);
          if (want(e)) seen.push(e);
        }
      }
      return seen;
    },
    async close() {
      await app.close();
      await closeDb();
    },
  };
}
