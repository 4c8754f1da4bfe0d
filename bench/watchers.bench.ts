// Posts per second a run publishes (the journal's notice: a transaction that appends the post,
// then the signal to this process's watchers) with nobody watching, against the same with 20
// watchers reading its event stream (GET /runs/{id}/posts as text/event-stream) and one that
// stopped reading, on the embedded database. The run never waits on a watcher: the goal is that
// watchers cost the run at most a third of its rate, and the stalled one none of the others' posts.
//
// What it measures is the server's side: the signal, the watchers' reads of the database (if
// any) and one socket write per watcher per post, all on the run's event loop. The watchers
// themselves run in a process of their own (watchers-worker.ts), as browsers elsewhere would:
// in this process their reading (a data event per post per watcher) ran on the run's event loop
// too and was counted as a cost of publishing, which a real watcher never is. Each round the run
// publishes only once every reading watcher's stream has started (so each is subscribed).
// The sockets are on loopback, so each write also pays the receiving side's TCP work, which a
// watcher on another machine does not put on this one. Rounds alternate alone and watched; the
// goal uses the best of each, and each round's ratio (watched against alone just before it) is
// shown too, as the machine's load moves less within a round than across the run.
import { fork } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { consoleInMemory, type BenchReport } from './lib.ts';

const POSTS = Number(process.env.BENCH_POSTS ?? 500);
const WATCHERS = 20;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);

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
  // The watchers run in a process of their own (bench/watchers-worker.ts), as they would in
  // browsers elsewhere; each round the run publishes only once they are all streaming.
  const clients = fork(fileURLToPath(new URL('./watchers-worker.ts', import.meta.url)), [JSON.stringify({ port, token, watchers: WATCHERS })], { execPath: process.execPath, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  /** The watchers' process's next message. */
  const next = () =>
    new Promise<unknown>((resolve, reject) => {
      const exited = (code: number | null) => reject(new Error(`the watchers' process exited with ${code}`));
      clients.once('exit', exited);
      clients.once('message', (m) => {
        clients.off('exit', exited);
        resolve(m);
      });
    });
  await next();
  try {
    // Alternating rounds; the best of each, and each round's ratio (its watched rate against the
    // rate alone just before it: the machine's load changes less between the two).
    let alone = 0;
    let watched = 0;
    let lag = 0;
    const ratios: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const aloneNow = POSTS / (await publish(await newRun()));
      alone = Math.max(alone, aloneNow);
      const runId = await newRun();
      const ready = next();
      clients.send({ runId, last: POSTS });
      await ready;
      const seen = next();
      const seconds = await publish(runId);
      const done = performance.timeOrigin + performance.now();
      const last = (await seen) as number;
      watched = Math.max(watched, POSTS / seconds);
      ratios.push(POSTS / seconds / aloneNow);
      lag = Math.max(lag, Math.max(0, last - done));
    }
    const ratio = watched / alone;
    const median = ratios.sort((a, b) => a - b)[Math.floor(ratios.length / 2)];
    return [
      {
        name: `run posts to SSE watchers (embedded database, ${POSTS} posts, best of ${ROUNDS})`,
        lines: [
          `nobody watching: ${alone.toFixed(0)} posts/s`,
          `${WATCHERS} watchers reading and one stalled: ${watched.toFixed(0)} posts/s (${ratio.toFixed(2)} of it; each round's ratio ${ratios.map((r) => r.toFixed(2)).join(', ')}, median ${median.toFixed(2)})`,
          `the last watcher had the last post ${lag.toFixed(0)} ms after it was published`,
        ],
        goal: `with ${WATCHERS} watchers and a stalled one the run publishes at least 2/3 of its rate alone`,
        met: ratio >= 2 / 3,
      },
    ];
  } finally {
    const exited = new Promise((resolve) => clients.once('exit', resolve));
    clients.disconnect();
    await exited;
    await app.close();
    await close();
  }
}
