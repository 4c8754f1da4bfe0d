// Posts per second a run publishes (the journal's notice: a transaction that appends the post,
// then the signal to this process's watchers) with nobody watching, against the same with 20
// watchers reading its event stream (GET /runs/{id}/posts as text/event-stream) and one that
// stopped reading, on the embedded database. The run never waits on a watcher: the goal is that
// watchers cost the run at most a third of its rate, and the stalled one none of the others' posts.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { consoleInMemory, type BenchReport } from './lib.ts';

const POSTS = Number(process.env.BENCH_POSTS ?? 200);
const WATCHERS = 20;

export default async function watchersBench(): Promise<BenchReport[]> {
  const { db, close, services, token, app } = await consoleInMemory();
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  const team = await db
    .insertInto('teams')
    .values({ name: 'bench', status: 'active', template_name: 'bench', template_hash: 'x', lead: 'lead', home_surface: 'console', budget_usd_per_day: 1, idle_after_seconds: 60, deep_sleep_after_seconds: 600, isolation: 'shared', rework_rounds: 0, created_by: 'bench' })
    .returning('id')
    .executeTakeFirstOrThrow();
  let runs = 0;
  const newRun = async () => {
    const id = `run_bench${++runs}`;
    await db.insertInto('runs').values({ id, team_id: team.id, team_name: 'bench', state: 'running', text: 'bench', created_by: 'bench' }).execute();
    return id;
  };
  const text = 'a post of a few hundred bytes, as an agent writes them. '.repeat(6);
  /** Publishes POSTS posts; resolves with the seconds it took. */
  const publish = async (runId: string) => {
    const started = performance.now();
    for (let i = 1; i <= POSTS; i++) await services.runJournal.notice(runId, `${i} ${text}`, `bench:${i}`);
    return (performance.now() - started) / 1000;
  };
  /** A watcher that reads until it has seen post `last`; resolves with when it did. */
  const watcher = (runId: string, last: number) =>
    new Promise<number>((resolve, reject) => {
      const req = http.get({ agent: false, host: '127.0.0.1', port, path: `/api/v1/runs/${runId}/posts`, headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` } }, (res) => {
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          const seen = (buf + c).includes(`id: ${last}\n`);
          buf = (buf + c).slice(-20);
          if (seen) {
            resolve(performance.now());
            req.destroy();
          }
        });
        res.on('error', () => {});
      });
      req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
    });
  const stalled: net.Socket[] = [];
  try {
    // Alternating rounds; the best of each.
    let alone = 0;
    let watched = 0;
    let lag = 0;
    for (let round = 0; round < 2; round++) {
      alone = Math.max(alone, POSTS / (await publish(await newRun())));
      const runId = await newRun();
      const s = net.connect(port, '127.0.0.1');
      s.pause();
      s.write(`GET /api/v1/runs/${runId}/posts HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${token}\r\n\r\n`);
      stalled.push(s);
      const seen = Array.from({ length: WATCHERS }, () => watcher(runId, POSTS));
      const seconds = await publish(runId);
      const done = performance.now();
      const last = Math.max(...(await Promise.all(seen)));
      watched = Math.max(watched, POSTS / seconds);
      lag = Math.max(lag, Math.max(0, last - done));
    }
    const ratio = watched / alone;
    return [
      {
        name: `run posts to SSE watchers (embedded database, ${POSTS} posts, best of 2)`,
        lines: [
          `nobody watching: ${alone.toFixed(0)} posts/s`,
          `${WATCHERS} watchers reading and one stalled: ${watched.toFixed(0)} posts/s (${ratio.toFixed(2)} of it)`,
          `the last watcher had the last post ${lag.toFixed(0)} ms after it was published`,
        ],
        goal: `with ${WATCHERS} watchers and a stalled one the run publishes at least 2/3 of its rate alone`,
        met: ratio >= 2 / 3,
      },
    ];
  } finally {
    for (const s of stalled) s.destroy();
    await app.close();
    await close();
  }
}
