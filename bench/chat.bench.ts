// GET /users of the chat server on an organization of 10,000 users, against a bare Fastify
// route returning the same rows from the same database, in the same run: p50 and peak memory.
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { sql } from 'kysely';
import { systemActor } from '../src/audit/audit.ts';
import { buildChatApp, createChatServices } from '../src/chat/app.ts';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createLogger } from '../src/logger.ts';
import { loadCipher } from '../src/secrets/cipher.ts';
import { fmt, load, type BenchReport, type LoadResult } from './lib.ts';

const USERS = 10_000;
const SECONDS = 8;

/** Runs a load while sampling this process's resident memory; returns the result and the peak (MiB). */
async function measured(url: string, headers: Record<string, string>): Promise<{ r: LoadResult; peakMiB: number }> {
  let peak = process.memoryUsage().rss;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 20);
  const r = await load({ url, headers, seconds: SECONDS, connections: 4 });
  clearInterval(timer);
  return { r, peakMiB: peak / 1024 / 1024 };
}

export default async function chatBench(): Promise<BenchReport[]> {
  const config = loadConfig({ SERVICE_DATA_DIR: ':memory:', SERVICE_CHAT_RATE_LIMIT: '0', SERVICE_LOG_LEVEL: 'warn', SERVICE_SECRET_KEY: Buffer.alloc(32, 3).toString('base64') });
  const { db, close } = await openDatabase({ databaseUrl: null, dataDir: ':memory:' });
  await migrateToLatest(db);
  const logger = createLogger({ level: 'warn' });
  const services = createChatServices({ db, cipher: loadCipher(config) });
  const chat = await buildChatApp({ config, logger, services });
  await chat.listen({ host: '127.0.0.1', port: 0 });
  const chatBase = `http://127.0.0.1:${(chat.server.address() as AddressInfo).port}`;
  const { realm, owner, apiKey } = await services.realms.createRealm(systemActor('bench'), {
    stringId: 'bench', name: 'Bench', url: chatBase, ownerEmail: 'owner@bench.example', ownerName: 'Owner', ownerPassword: null,
  });
  // The other accounts in one statement (keys are not used, so their hashes are just unique).
  await sql`
    insert into chat_users (realm_id, email, delivery_email, full_name, api_key_hash, api_key_sealed, api_key_key_id, role, timezone, email_address_visibility)
    select ${realm.id}, 'user' || g || '@bench.example', 'user' || g || '@bench.example', 'User ' || g, md5('k' || g), '', '', 400, 'Europe/Paris', 1 + (g % 5)
    from generate_series(1, ${USERS - 1}) g`.execute(db);

  const bare = Fastify({ logger: false });
  bare.get('/users', async () => ({ members: await db.selectFrom('chat_users').selectAll().where('realm_id', '=', realm.id).orderBy('id').execute() }));
  await bare.listen({ host: '127.0.0.1', port: 0 });
  const bareUrl = `http://127.0.0.1:${(bare.server.address() as AddressInfo).port}/users`;

  try {
    const auth = { authorization: `Basic ${Buffer.from(`${owner.delivery_email}:${apiKey}`).toString('base64')}` };
    const check = await fetch(`${chatBase}/api/v1/users`, { headers: auth });
    const count = ((await check.json()) as { members: unknown[] }).members.length;
    if (count !== USERS) throw new Error(`expected ${USERS} members, got ${count}`);

    const baseline = await measured(bareUrl, {});
    const ours = await measured(`${chatBase}/api/v1/users`, auth);
    const ratio = ours.r.p50 / Math.max(baseline.r.p50, 0.01);
    const memRatio = ours.peakMiB / baseline.peakMiB;
    return [
      {
        name: `chat GET /users, ${USERS} users (Basic auth, envelope, user objects) vs a bare Fastify route of the same rows`,
        lines: [
          `bare:  ${fmt(baseline.r)}, peak RSS ${baseline.peakMiB.toFixed(0)} MiB`,
          `chat:  ${fmt(ours.r)}, peak RSS ${ours.peakMiB.toFixed(0)} MiB`,
          `p50 ratio ${ratio.toFixed(2)}x, peak memory ratio ${memRatio.toFixed(2)}x`,
        ],
        goal: 'p50 at most 2x the bare route, peak memory at most 1.5x, no errors',
        met: ratio <= 2 && memRatio <= 1.5 && ours.r.errors === 0 && ours.r.non2xx === 0,
      },
    ];
  } finally {
    await chat.close();
    await bare.close();
    await close();
  }
}
