// The console's request path against a bare Fastify route doing the same database read on the
// same database, in the same run: an authenticated GET /api/v1/me (its read is the token and
// its user, through the same look-up the console makes: from memory after the first request
// on the embedded database), and two lists: GET /api/v1/users (a page of 50 users) and
// GET /api/v1/agents (a page of 50 agents, each with its current version, avatar and uses).
// The bare list routes do the list's read only: no token look-up, which the console's do.
// Goal: at least 0.8 of the bare throughput.
//
// The machine may be shared, and a neighbour's burst in one run skews that run: each pair is
// measured in alternating rounds, and the ratio reported is the median of the rounds' ratios.
import Fastify from 'fastify';
import { findToken } from '../src/auth/auth.service.ts';
import { lookupCredential } from '../src/auth/credential-cache.ts';
import { hashToken } from '../src/auth/credentials.ts';
import { listUsers } from '../src/console/users/users.store.ts';
import { authUser, presentUser } from '../src/console/users/users.service.ts';
import { consoleInMemory, fmt, load, type BenchReport, type LoadResult } from './lib.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const GOAL = 0.8;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export default async function consoleBench(): Promise<BenchReport[]> {
  const { db, close, services, token, app } = await consoleInMemory();
  for (let i = 0; i < 60; i++) await db.insertInto('users').values({ name: `bench-${i}`, email: null, role: 'viewer', password_hash: null }).execute();
  for (let i = 0; i < 60; i++) {
    const res = await app.inject({
      method: 'POST',
      url: '/api/v1/agents',
      headers: { authorization: `Bearer ${token}` },
      payload: { name: `bench-agent-${i}`, description: 'an agent of the bench', version: { system_prompt: 'You write code.', note: 'first' } },
    });
    if (res.statusCode !== 201) throw new Error(`creating an agent: ${res.statusCode} ${res.body}`);
  }
  const bare = Fastify({ logger: false });
  // The same reads, without the kernel: no auth hook, validation, problem handling or metrics.
  bare.get('/me', async (req) => {
    const hash = hashToken(String(req.headers.authorization).slice('Bearer '.length));
    const row = await lookupCredential(db, `t:${hash}`, async () => {
      const token = await findToken(db, hash);
      const user = token ? await authUser(db, token.user_id) : null;
      return token && user ? { ...token, ...user } : undefined;
    });
    return { id: row!.user_id, name: row!.name, email: row!.email, role: row!.role, via: 'token' };
  });
  bare.get('/users', async () => {
    const rows = await listUsers(db, null, 50);
    return { items: rows.slice(0, 50).map(presentUser), next_cursor: null };
  });
  // The agents service's own read (it is several queries), without the kernel around it.
  bare.get('/agents', async () => services.agents.list({ limit: 50 }));
  const ours = await app.listen({ port: 0, host: '127.0.0.1' });
  const base = await bare.listen({ port: 0, host: '127.0.0.1' });
  const headers = { authorization: `Bearer ${token}` };

  const reports: BenchReport[] = [];
  try {
    for (const [label, path, barePath] of [
      ['GET /api/v1/me', '/api/v1/me', '/me'],
      ['GET /api/v1/users (a page of 50)', '/api/v1/users', '/users'],
      ['GET /api/v1/agents (a page of 50)', '/api/v1/agents', '/agents'],
    ] as const) {
      await load({ url: ours + path, headers, seconds: 1 }); // warm up both
      await load({ url: base + barePath, headers, seconds: 1 });
      const rounds: Array<{ a: LoadResult; b: LoadResult }> = [];
      for (let i = 0; i < ROUNDS; i++) {
        const a = await load({ url: ours + path, headers, seconds: SECONDS });
        const b = await load({ url: base + barePath, headers, seconds: SECONDS });
        rounds.push({ a, b });
      }
      const ratios = rounds.map((r) => r.a.rps / r.b.rps);
      const ratio = median(ratios);
      const mid = rounds[ratios.indexOf(ratio)];
      const clean = rounds.every((r) => r.a.errors === 0 && r.a.non2xx === 0 && r.b.errors === 0 && r.b.non2xx === 0);
      reports.push({
        name: `${label} vs a bare Fastify route with the same read (embedded database)`,
        lines: [
          `console: ${fmt(mid.a)}`,
          `bare:    ${fmt(mid.b)}`,
          `ratio:   ${ratio.toFixed(2)} (median of ${ROUNDS} alternating rounds: ${ratios.map((r) => r.toFixed(2)).join(' ')})`,
        ],
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
