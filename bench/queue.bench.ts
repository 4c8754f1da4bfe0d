// The job queue on the embedded database, against plain statements on the same database in the
// same run. Enqueueing in a transaction against inserting the same row into a plain table in a
// transaction and reading it back, as any create does (goal: at most 4x: the enqueue also
// checks the payload, keeps five indexes, resolves a key conflict and NOTIFYs); performing a no-op job (claimed in a
// batch, leased, completed under its generation) against its enqueue (goal: at most 3x).
import { sql } from 'kysely';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createLogger } from '../src/logger.ts';
import { enqueue } from '../src/queue/queue.ts';
import { createJobRunner } from '../src/queue/runner.ts';
import type { BenchReport } from './lib.ts';

const N = Number(process.env.BENCH_JOBS ?? 2_000);
const ROUNDS = 3;

async function timed(fn: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

export default async function queueBench(): Promise<BenchReport[]> {
  const { db, close } = await openDatabase({ databaseUrl: null, dataDir: ':memory:' });
  await migrateToLatest(db);
  await sql`create table bench_plain (id bigint generated always as identity primary key, kind text not null, payload jsonb not null)`.execute(db);
  const payload = { team: 'bench.1', actor: 'bench' };
  let performed = 0;
  const runner = createJobRunner({ db, logger: createLogger({ level: 'warn' }), handlers: { 'bench.noop': { perform: async () => void performed++ } }, concurrency: 16 });

  const best = { plain: Infinity, enqueue: Infinity, perform: Infinity };
  for (let round = 0; round < ROUNDS; round++) {
    best.plain = Math.min(
      best.plain,
      await timed(async () => {
        for (let i = 0; i < N; i++) {
          await db.transaction().execute(async (trx) => {
            await sql`insert into bench_plain (kind, payload) values ('bench.noop', ${JSON.stringify(payload)}) returning *`.execute(trx);
          });
        }
      }),
    );
    best.enqueue = Math.min(
      best.enqueue,
      await timed(async () => {
        for (let i = 0; i < N; i++) await db.transaction().execute((trx) => enqueue(trx, { kind: 'bench.noop', payload }));
      }),
    );
    best.perform = Math.min(best.perform, await timed(() => runner.drain()));
  }
  await runner.stop();
  await close();
  if (performed !== N * ROUNDS) throw new Error(`performed ${performed} jobs, expected ${N * ROUNDS}`);

  const per = (ms: number) => `${((ms * 1000) / N).toFixed(0)} µs each`;
  const enqueueRatio = best.enqueue / best.plain;
  const performRatio = best.perform / best.enqueue;
  return [
    {
      name: `queue: enqueue in a transaction vs a plain insert returning the row in a transaction (embedded database, ${N} each, best of ${ROUNDS})`,
      lines: [`plain insert: ${per(best.plain)}`, `enqueue: ${per(best.enqueue)} (${enqueueRatio.toFixed(2)}x)`],
      goal: 'enqueue at most 4x a plain insert',
      met: enqueueRatio <= 4,
    },
    {
      name: `queue: performing a no-op job vs enqueueing it (concurrency 16)`,
      lines: [`perform: ${per(best.perform)} (${performRatio.toFixed(2)}x the enqueue)`],
      goal: 'perform at most 3x the enqueue',
      met: performRatio <= 3,
    },
  ];
}
