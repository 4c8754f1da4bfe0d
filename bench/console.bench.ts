// The console's request path against a bare Fastify route doing the same database read on the
// same database, in the same run: an authenticated GET /api/v1/me (its read is the token and
// its user) and GET /api/v1/users (a page of users). Goal: at least half the bare throughput.
import Fastify from 'fastify';
import { systemActor } from '../src/audit/audit.ts';
import { findToken } from '../src/auth/auth.service.ts';
import { hashToken, newSecret } from '../src/auth/credentials.ts';
import { loadConfig } from '../src/config.ts';
import { buildConsoleApp, createConsoleServices } from '../src/console/app.ts';
import { listUsers } from '../src/console/users/users.store.ts';
import { presentUser } from '../src/console/users/users.service.ts';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { Registry } from '../src/http/metrics.ts';
import { createLogger } from '../src/logger.ts';
import { fmt, load, type BenchReport, type LoadResult } from './lib.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const GOAL = 0.5;

export default async function consoleBench(): Promise<BenchReport[]> {
  const config = loadConfig({ SERVICE_DATA_DIR: ':memory:', SERVICE_LOG_LEVEL: 'warn', SERVICE_WEB_DIR: '/nonexistent-web' });
  const { db, close } = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrateToLatest(db);
  const logger = createLogger({ level: 'warn' });
  const services = createConsoleServices({ config, db, logger });
  const token = newSecret('chk_');
  await services.users.ensureFirstAdmin(systemActor('bench'), token);
  for (let i = 0; i < 60; i++) await db.insertInto('users').values({ name: `bench-${i}`, email: null, role: 'viewer', password_hash: null }).execute();

  const app = await buildConsoleApp({ config, db, logger, metrics: new Registry(), services });
  const bare = Fastify({ logger: false });
  // The same reads, without the kernel: no auth hook, validation, problem handling or metrics.
  bare.get('/me', async (req) => {
    const row = await findToken(db, hashToken(String(req.headers.authorization).slice('Bearer '.length)));
    return { id: row!.user_id, name: row!.name, email: row!.email, role: row!.role, via: 'token' };
  });
  bare.get('/users', async () => {
    const rows = await listUsers(db, null, 50);
    return { items: rows.slice(0, 50).map(presentUser), next_cursor: null };
  });
  const ours = await app.listen({ port: 0, host: '127.0.0.1' });
  const base = await bare.listen({ port: 0, host: '127.0.0.1' });
  const headers = { authorization: `Bearer ${token}` };

  const reports: BenchReport[] = [];
  try {
    for (const [label, path, barePath] of [
      ['GET /api/v1/me', '/api/v1/me', '/me'],
      ['GET /api/v1/users (a page of 50)', '/api/v1/users', '/users'],
    ] as const) {
      await load({ url: ours + path, headers, seconds: 1 }); // warm up both
      await load({ url: base + barePath, headers, seconds: 1 });
      const a: LoadResult = await load({ url: ours + path, headers, seconds: SECONDS });
      const b: LoadResult = await load({ url: base + barePath, headers, seconds: SECONDS });
      const ratio = a.rps / b.rps;
      const clean = a.errors === 0 && a.non2xx === 0 && b.errors === 0 && b.non2xx === 0;
      reports.push({
        name: `${label} vs a bare Fastify route with the same read (embedded database)`,
        lines: [`console: ${fmt(a)}`, `bare:    ${fmt(b)}`, `ratio:   ${ratio.toFixed(2)}`],
        goal: `throughput at least ${GOAL} of the bare route, every answer 2xx`,
        met: clean && ratio >= GOAL,
      });
    }
  } finally {
    await app.close();
    await bare.close();
    await close();
  }
  return reports;
}
