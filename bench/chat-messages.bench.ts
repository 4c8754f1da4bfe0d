// Chat messages through the event system: one sender posts to a channel that 100 people follow,
// each with an open event queue long-polled as a Zulip client does. Measured: messages sent per
// second, deliveries per second (message x queue), and the delay from the send to each long
// poll's answer (p50, p99); against a bare Fastify route that writes the same row and answers
// the same 100 long polls from memory, in the same run.
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { systemActor } from '../src/audit/audit.ts';
import { buildChatApp, createChatServices } from '../src/chat/app.ts';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createLogger } from '../src/logger.ts';
import { loadCipher } from '../src/secrets/cipher.ts';
import type { BenchReport } from './lib.ts';

const QUEUES = 100;
const MESSAGES = 150;

interface Run {
  seconds: number;
  sentPerSecond: number;
  deliveriesPerSecond: number;
  p50: number;
  p99: number;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/**
 * Drives one server: `poll(i, last)` long-polls queue i after event `last` and answers
 * [{id, messageId}]; `send(n)` posts message n and answers its id.
 */
async function drive(poll: (i: number, last: number) => Promise<Array<{ id: number; messageId: number | null }>>, send: (n: number) => Promise<number>): Promise<Run> {
  const sentAt = new Map<number, number>();
  // Receipts are matched to sends at the end: a poll may answer before the send's own answer arrives.
  const received: Array<[number, number]> = [];
  let delivered = 0;
  let stop = false;
  let allDone: () => void = () => {};
  const done = new Promise<void>((r) => (allDone = r));
  const pollers = Array.from({ length: QUEUES }, async (_, i) => {
    let last = -1;
    while (!stop) {
      const events = await poll(i, last);
      const now = performance.now();
      for (const e of events) {
        last = Math.max(last, e.id);
        if (e.messageId === null) continue;
        received.push([e.messageId, now]);
        if (++delivered === QUEUES * MESSAGES) allDone();
      }
    }
  });
  await new Promise((r) => setTimeout(r, 300));
  const start = performance.now();
  for (let n = 0; n < MESSAGES; n++) {
    const t0 = performance.now();
    const id = await send(n);
    sentAt.set(id, t0);
  }
  const sentSeconds = (performance.now() - start) / 1000;
  await Promise.race([done, new Promise((r) => setTimeout(r, 120_000))]);
  const seconds = (performance.now() - start) / 1000;
  stop = true;
  await send(-1).catch(() => {});
  await Promise.race([Promise.all(pollers), new Promise((r) => setTimeout(r, 5000))]);
  const delays = received.filter(([id]) => sentAt.has(id)).map(([id, at]) => at - sentAt.get(id)!);
  return { seconds, sentPerSecond: MESSAGES / sentSeconds, deliveriesPerSecond: delivered / seconds, p50: pct(delays, 50), p99: pct(delays, 99) };
}

export default async function chatMessagesBench(): Promise<BenchReport[]> {
  const config = loadConfig({ SERVICE_DATA_DIR: ':memory:', SERVICE_CHAT_RATE_LIMIT: '0', SERVICE_LOG_LEVEL: 'warn', SERVICE_SECRET_KEY: Buffer.alloc(32, 3).toString('base64') });
  const { db, close } = await openDatabase({ databaseUrl: null, dataDir: ':memory:' });
  await migrateToLatest(db);
  const services = createChatServices({ db, cipher: loadCipher(config) });
  const chat = await buildChatApp({ config, logger: createLogger({ level: 'warn' }), services });
  await chat.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(chat.server.address() as AddressInfo).port}/api/v1`;
  const { realm, owner, apiKey } = await services.realms.createRealm(systemActor('bench'), { stringId: 'bench', name: 'Bench', url: base, ownerEmail: 'owner@bench.example', ownerName: 'Owner', ownerPassword: null });
  const auth = (email: string, key: string) => `Basic ${Buffer.from(`${email}:${key}`).toString('base64')}`;
  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  const ownerAuth = auth(owner.delivery_email, apiKey);
  await fetch(`${base}/users/me/subscriptions`, { method: 'POST', headers: { ...form, authorization: ownerAuth }, body: `subscriptions=${encodeURIComponent('[{"name":"bench"}]')}` });
  const people: string[] = [];
  for (let i = 0; i < QUEUES; i++) {
    const { apiKey: key, row } = await db.transaction().execute((trx) => services.users.createAccount(trx, realm, { email: `p${i}@bench.example`, fullName: `Person ${i}`, role: 400 }));
    const a = auth(row.delivery_email, key);
    await fetch(`${base}/users/me/subscriptions`, { method: 'POST', headers: { ...form, authorization: a }, body: `subscriptions=${encodeURIComponent('[{"name":"bench"}]')}` });
    people.push(a);
  }
  const queues: string[] = [];
  for (const a of people) {
    const r = (await (await fetch(`${base}/register`, { method: 'POST', headers: { ...form, authorization: a }, body: 'event_types=["message"]' })).json()) as { queue_id: string };
    queues.push(r.queue_id);
  }

  // The bare route: the same row written, the same 100 long polls answered from memory.
  const bare = Fastify({ logger: false });
  const bareQueues = Array.from({ length: QUEUES }, () => ({ events: [] as Array<{ id: number; messageId: number }>, next: 0, waiter: null as null | (() => void) }));
  bare.post('/send', async () => {
    const row = await db
      .insertInto('chat_messages')
      .values({ realm_id: realm.id, sender_id: owner.id, type: 'stream', stream_id: 1, topic: 'bare', dm_key: null, content: 'hello', rendered_content: '<p>hello</p>', date_sent: new Date(), edit_history: '[]' })
      .returning('id')
      .executeTakeFirstOrThrow();
    for (const q of bareQueues) {
      q.events.push({ id: q.next++, messageId: row.id });
      q.waiter?.();
    }
    return { id: row.id };
  });
  bare.get('/poll', async (req) => {
    const { i, last } = req.query as { i: string; last: string };
    const q = bareQueues[Number(i)];
    q.events = q.events.filter((e) => e.id > Number(last));
    if (!q.events.length) await new Promise<void>((r) => {
      const t = setTimeout(r, 45_000);
      q.waiter = () => {
        clearTimeout(t);
        q.waiter = null;
        setImmediate(r);
      };
    });
    return { events: q.events };
  });
  await bare.listen({ host: '127.0.0.1', port: 0 });
  const bareBase = `http://127.0.0.1:${(bare.server.address() as AddressInfo).port}`;

  try {
    const baseline = await drive(
      async (i, last) => ((await (await fetch(`${bareBase}/poll?i=${i}&last=${last}`)).json()) as { events: Array<{ id: number; messageId: number }> }).events,
      async () => ((await (await fetch(`${bareBase}/send`, { method: 'POST' })).json()) as { id: number }).id,
    );
    const ours = await drive(
      async (i, last) => {
        const r = (await (await fetch(`${base}/events?queue_id=${queues[i]}&last_event_id=${last}`, { headers: { authorization: people[i] } })).json()) as { events: Array<{ id: number; type: string; message?: { id: number } }> };
        return (r.events ?? []).map((e) => ({ id: e.id, messageId: e.type === 'message' ? e.message!.id : null }));
      },
      async (n) => {
        const body = new URLSearchParams({ type: 'stream', to: 'bench', topic: 'load', content: `message ${n}` });
        const r = (await (await fetch(`${base}/messages`, { method: 'POST', headers: { ...form, authorization: ownerAuth }, body })).json()) as { id: number };
        return r.id;
      },
    );
    const f = (r: Run) => `${r.sentPerSecond.toFixed(0)} sent/s, ${r.deliveriesPerSecond.toFixed(0)} deliveries/s, send-to-poll p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms`;
    const throughput = ours.deliveriesPerSecond / baseline.deliveriesPerSecond;
    const delay = ours.p50 / Math.max(baseline.p50, 0.1);
    return [
      {
        name: `chat POST /messages to a channel followed by ${QUEUES} open event queues (long-polled), ${MESSAGES} messages, vs a bare Fastify route writing the same row and answering the same polls`,
        lines: [`bare: ${f(baseline)}`, `chat: ${f(ours)}`, `deliveries ratio ${throughput.toFixed(2)}x, p50 delay ratio ${delay.toFixed(2)}x`],
        goal: 'deliveries per second at least 0.25x the bare route, p50 send-to-poll delay at most 4x',
        met: throughput >= 0.25 && delay <= 4,
      },
    ];
  } finally {
    await chat.close();
    await bare.close();
    await close();
  }
}
