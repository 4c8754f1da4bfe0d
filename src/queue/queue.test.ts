import crypto from 'node:crypto';
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { Type } from 'typebox';
import { startEchoUpstream } from '../../test/fakes/echo-upstream.ts';
import { captureLogger, dbKind, TEST_DATABASE_URL, testDb, uniq, waitFor, type TestDb } from '../../test/harness.ts';
import { ConfigError } from '../config.ts';
import type { Db } from '../db/database.ts';
import { Registry } from '../metrics.ts';
import { listJobsCommand, retryJobCommand } from './cli.ts';
import { channelSql, enqueue, getJob, JobInputError, jobType, PermanentJobError, type Job, type JobContext, type JobHandler } from './queue.ts';
import { liveHostIds } from '../runtime/sandboxes/placement.ts';
import { backoffMs, createJobRunner, describeError, LeaseLostError, type JobRunnerOptions } from './runner.ts';

describe(`job queue (${dbKind})`, () => {
  let tdb: TestDb;
  let db: Db;
  before(async () => {
    tdb = await testDb();
    db = tdb.db;
  });
  after(() => tdb.close());

  /** A kind of job no other test's runner performs. */
  const newKind = () => uniq('t');
  const runner = (handlers: Record<string, JobHandler>, opts: Partial<JobRunnerOptions> = {}) => {
    const { logger, lines } = captureLogger('debug');
    return { r: createJobRunner({ db, logger, handlers, pollMs: 600_000, ...opts }), lines };
  };
  const jobsOf = (kind: string) => db.selectFrom('jobs').selectAll().where('kind', '=', kind).orderBy('id').execute();
  /**
   * A promise and the function that settles it. Every gate is opened after its test, passed or
   * failed, so no handler is left waiting (its runner's heartbeat would keep the process alive).
   */
  const gates: Array<() => void> = [];
  const gate = () => {
    let open!: () => void;
    const p = new Promise<void>((resolve) => (open = resolve));
    gates.push(open);
    return { p, open };
  };
  afterEach(() => {
    for (const open of gates.splice(0)) open();
  });

  test('a job enqueued in a committed transaction runs once; one in a rolled-back transaction never runs', async () => {
    const kind = newKind();
    const seen: unknown[] = [];
    const { r } = runner({ [kind]: { perform: async (p) => void seen.push(p) } });
    await assert.rejects(
      db.transaction().execute(async (trx) => {
        await enqueue(trx, { kind, payload: { n: 1 } });
        throw new Error('roll back');
      }),
      /roll back/,
    );
    await db.transaction().execute(async (trx) => {
      await enqueue(trx, { kind, payload: { n: 2 } });
    });
    await r.drain();
    await r.drain();
    assert.deepEqual(seen, [{ n: 2 }]);
    const rows = await jobsOf(kind);
    assert.equal(rows.length, 1, 'the rolled-back job does not exist');
    assert.equal(rows[0].state, 'done');
    assert.equal(rows[0].attempts, 1);
    assert.equal(rows[0].lease_owner, null);
    assert.ok(rows[0].finished_at);
  });

  test('an idle runner wakes at once when a job is committed (NOTIFY), with no polling to fall back on', async () => {
    const kind = newKind();
    const seen: number[] = [];
    const { r } = runner({ [kind]: { perform: async (p: { n: number }) => void seen.push(p.n) } }, { pollMs: 600_000 });
    await r.start();
    try {
      await db.transaction().execute(async (trx) => {
        await enqueue(trx, { kind, payload: { n: 1 } });
      });
      await waitFor('the runner to perform the job', () => seen.length === 1);
      await enqueue(db, { kind, payload: { n: 2 } });
      await waitFor('the runner to perform the second job', () => seen.length === 2);
    } finally {
      await r.stop();
    }
    assert.deepEqual(seen, [1, 2]);
  });

  test('a key makes enqueueing idempotent: the second enqueue returns the first job and adds nothing', async () => {
    const kind = newKind();
    let performed = 0;
    const { r } = runner({ [kind]: { perform: async () => void performed++ } });
    const key = uniq('key');
    const first = await enqueue(db, { kind, payload: { v: 1 }, key });
    const second = await enqueue(db, { kind, payload: { v: 2 }, key });
    assert.equal(second.id, first.id);
    assert.deepEqual(second.payload, { v: 1 });
    // In one transaction too.
    const key2 = uniq('key');
    const [a, b] = await db.transaction().execute(async (trx) => [await enqueue(trx, { kind, payload: {}, key: key2 }), await enqueue(trx, { kind, payload: {}, key: key2 })]);
    assert.equal(a.id, b.id);
    await r.drain();
    assert.equal(performed, 2);
    // A done job still holds its key: enqueueing it again does not run it again.
    const again = await enqueue(db, { kind, payload: { v: 3 }, key });
    assert.equal(again.id, first.id);
    assert.equal(again.state, 'done');
    await r.drain();
    assert.equal(performed, 2);
    // A rolled-back enqueue holds no key.
    const key3 = uniq('key');
    await assert.rejects(
      db.transaction().execute(async (trx) => {
        await enqueue(trx, { kind, payload: {}, key: key3 });
        throw new Error('roll back');
      }),
    );
    const fresh = await enqueue(db, { kind, payload: { v: 4 }, key: key3 });
    assert.deepEqual(fresh.payload, { v: 4 });
    assert.equal((await jobsOf(kind)).length, 3);
  });

  test('backoff: exponential from the base, capped, jitter in the upper half', () => {
    const b = { baseMs: 1_000, maxMs: 10_000 };
    assert.equal(backoffMs(1, b, () => 0), 500);
    assert.equal(backoffMs(1, b, () => 1), 1_000);
    assert.equal(backoffMs(2, b, () => 0.5), 1_500);
    assert.equal(backoffMs(3, b, () => 1), 4_000);
    assert.equal(backoffMs(50, b, () => 1), 10_000);
    assert.equal(backoffMs(50, b, () => 0), 5_000);
  });

  test('a failed attempt is retried after its backoff on the runner clock, and the job ends done', async () => {
    const kind = newKind();
    let calls = 0;
    const attempts: number[] = [];
    let nowMs = Date.now() + 5_000;
    const { r, lines } = runner(
      {
        [kind]: {
          perform: async (_p, ctx: JobContext) => {
            attempts.push(ctx.attempt);
            if (++calls < 3) throw new Error(`flaky ${calls}`);
          },
        },
      },
      { now: () => new Date(nowMs), random: () => 0.5, backoff: { baseMs: 1_000, maxMs: 10_000 } },
    );
    const job = await enqueue(db, { kind, payload: {}, maxAttempts: 5 });
    await r.drain();
    let row = (await getJob(db, job.id))!;
    assert.equal(row.state, 'queued');
    assert.equal(row.attempts, 1);
    assert.equal(row.last_error, 'flaky 1');
    assert.equal(Date.parse(row.run_at), nowMs + 750, 'due after backoffMs(1)');
    await r.drain();
    assert.equal(calls, 1, 'not due yet');
    nowMs += 750;
    await r.drain();
    row = (await getJob(db, job.id))!;
    assert.equal(row.last_error, 'flaky 2');
    assert.equal(Date.parse(row.run_at), nowMs + 1_500, 'due after backoffMs(2)');
    nowMs += 1_500;
    await r.drain();
    row = (await getJob(db, job.id))!;
    assert.equal(row.state, 'done');
    assert.equal(row.attempts, 3);
    assert.equal(row.last_error, null);
    assert.deepEqual(attempts, [1, 2, 3]);
    assert.ok(lines.some((l) => l.includes('will retry') && l.includes('flaky 1')));
  });

  test('a failure whose text or fields echo a credential (an outside service quoting the request) is logged and recorded without it, on a retry and for good', async (t) => {
    // The outside service answers with the request it got, its Authorization header included, as
    // a misbehaving API's error body may; the handler fails as an SDK does, quoting the answer in
    // its message and keeping the request's headers and the answer in its fields.
    const upstream = await startEchoUpstream(null);
    t.after(() => upstream.close());
    const token = `xoxb-${crypto.randomUUID().replace(/-/g, '')}`;
    const apiKey = crypto.randomUUID().replace(/-/g, '') + crypto.randomUUID().replace(/-/g, '');
    const kind = newKind();
    let nowMs = Date.now() + 5_000;
    const { r, lines } = runner(
      {
        [kind]: {
          perform: async (_p, ctx) => {
            const res = await fetch(`http://127.0.0.1:${upstream.port}/reflect?api_key=${apiKey}`, { headers: { authorization: `Bearer ${token}` } });
            const body = await res.text();
            const err = Object.assign(new Error(`the service refused the call to ${res.url}: ${body}`), { config: { headers: { Authorization: `Bearer ${token}` } }, data: JSON.parse(body) });
            ctx.logger.warn({ err }, 'the call failed');
            throw err;
          },
        },
      },
      { now: () => new Date(nowMs), backoff: { baseMs: 100, maxMs: 100 } },
    );
    const job = await enqueue(db, { kind, payload: {}, maxAttempts: 2 });
    await r.drain();
    const retried = (await getJob(db, job.id))!;
    assert.equal(retried.state, 'queued');
    nowMs += 100;
    await r.drain();
    const failed = (await getJob(db, job.id))!;
    assert.equal(failed.state, 'failed');
    assert.equal(upstream.seen.length, 2, 'the outside service was called on each attempt');
    assert.ok(upstream.seen.every((s) => s.headers.authorization === `Bearer ${token}`), 'the token did reach the service (and its answer)');
    const leaks = (text: string) => text.includes(token) || text.includes(apiKey);
    for (const text of [retried.last_error!, failed.last_error!]) {
      assert.match(text, /^the service refused the call to http:\/\/127\.0\.0\.1:\d+\/reflect\?api_key=\[redacted\]/, 'what failed is still said');
      assert.ok(!leaks(text), `the recorded error quotes the credential: ${text}`);
    }
    const listed = await listJobsCommand(db, { state: 'failed', kind });
    assert.ok(listed.includes(kind) && !leaks(listed), 'crewhouse jobs shows no credential');
    const logged = lines.filter((l) => l.includes(`"job":${job.id},`));
    for (const msg of ['the call failed', 'job attempt failed; will retry', 'job failed for good']) assert.ok(logged.some((l) => l.includes(msg)), `logged: ${msg}`);
    for (const l of logged) assert.ok(!leaks(l), `a log line quotes the credential: ${l}`);
    // The fields an SDK keeps are there, their credentials censored.
    const warned = JSON.parse(logged.find((l) => l.includes('the call failed'))!);
    assert.equal(warned.err.config.headers.Authorization, '[redacted]');
    assert.equal(warned.err.data.method, 'GET');
  });

  test('attempts used up: the job is failed with its last error, visible in `crewhouse jobs`, and `jobs retry` requeues it', async () => {
    const kind = newKind();
    let nowMs = Date.now() + 5_000;
    let healthy = false;
    const thrown: unknown[] = ['plain string', { code: 42 }];
    const { r } = runner(
      {
        [kind]: {
          perform: async () => {
            if (!healthy) throw thrown.shift();
          },
        },
      },
      { now: () => new Date(nowMs), backoff: { baseMs: 100, maxMs: 100 } },
    );
    const job = await enqueue(db, { kind, payload: { team: 'x' }, maxAttempts: 2 });
    await r.drain();
    assert.equal((await getJob(db, job.id))!.last_error, 'threw a non-Error value: "plain string"');
    nowMs += 100;
    await r.drain();
    const failed = (await getJob(db, job.id))!;
    assert.equal(failed.state, 'failed');
    assert.equal(failed.attempts, 2);
    assert.equal(failed.last_error, 'threw a non-Error value: {"code":42}');
    assert.ok(failed.finished_at);
    nowMs += 10_000;
    await r.drain();
    assert.equal((await getJob(db, job.id))!.state, 'failed', 'a failed job is not run again');

    const listed = (await listJobsCommand(db, { state: 'failed', kind })).trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(listed.length, 1);
    assert.equal(listed[0].id, job.id);
    assert.equal(listed[0].last_error, failed.last_error);
    assert.deepEqual(listed[0].payload, { team: 'x' });
    assert.equal((await listJobsCommand(db, { state: 'queued', kind })), '');

    const retried = JSON.parse(await retryJobCommand(db, String(job.id)));
    assert.equal(retried.state, 'queued');
    assert.equal(retried.attempts, 0);
    await assert.rejects(retryJobCommand(db, String(job.id)), (e: Error) => e instanceof ConfigError && /is queued, not failed/.test(e.message));
    healthy = true;
    await r.drain();
    assert.equal((await getJob(db, job.id))!.state, 'done');

    // The options' values are checked here; unknown options and arguments by the CLI's parser (test/cli.test.ts).
    for (const [call, message] of [
      [() => listJobsCommand(db, { state: 'stuck' }), /--state must be one of queued, running, done, failed/],
      [() => listJobsCommand(db, { limit: '0' }), /--limit must be/],
      [() => listJobsCommand(db, { limit: 'many' }), /--limit must be/],
      [() => retryJobCommand(db, 'seven'), /a whole number/],
      [() => retryJobCommand(db, undefined), /a whole number/],
      [() => retryJobCommand(db, '999999999'), /no job 999999999/],
    ] as const) {
      await assert.rejects(call(), (e: Error) => e instanceof ConfigError && message.test(e.message), String(message));
    }
  });

  test('a handler that throws PermanentJobError fails at once; describeError names what was thrown', async () => {
    const kind = newKind();
    const { r } = runner({ [kind]: { perform: async () => Promise.reject(new PermanentJobError('the team is gone')) } });
    const job = await enqueue(db, { kind, payload: {} });
    await r.drain();
    const row = (await getJob(db, job.id))!;
    assert.equal(row.state, 'failed');
    assert.equal(row.attempts, 1);
    assert.equal(row.last_error, 'PermanentJobError: the team is gone');
    assert.equal(describeError(new TypeError('bad')), 'TypeError: bad');
    assert.equal(describeError(null), 'threw a non-Error value: null');
    assert.equal(describeError(undefined), 'threw a non-Error value: undefined');
    assert.equal(describeError(12n), 'threw a non-Error value: 12');
    assert.ok(describeError(new Error('x'.repeat(5_000))).length <= 2_001);
  });

  test('payloads are checked: at enqueue (JSON data, bounded, the job type\'s schema) and again before performing', async () => {
    const kind = newKind();
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const bad: Array<[Parameters<typeof enqueue>[1], RegExp]> = [
      [{ kind, payload: undefined }, /payload is undefined/],
      [{ kind, payload: { f: () => 1 } }, /payload\.f is a function/],
      [{ kind, payload: { at: new Date() } }, /payload\.at is a Date/],
      [{ kind, payload: { n: 10n } }, /payload\.n is a bigint/],
      [{ kind, payload: { n: Number.NaN } }, /payload\.n is not a finite number/],
      [{ kind, payload: cyclic }, /payload\.self refers back to itself/],
      [{ kind, payload: { s: 'a\u0000b' } }, /payload\.s holds a NUL/],
      [{ kind, payload: { s: 'x'.repeat(70_000) } }, /larger than 65536 bytes/],
      [{ kind: 'Not A Kind', payload: {} }, /job kind "Not A Kind"/],
      [{ kind, payload: {}, key: '' }, /key must be/],
      [{ kind, payload: {}, maxAttempts: 0 }, /maxAttempts/],
      [{ kind, payload: {}, runAt: new Date('nope') }, /runAt/],
    ];
    for (const [input, message] of bad) await assert.rejects(enqueue(db, input), (e: Error) => e instanceof JobInputError && message.test(e.message), String(message));
    assert.equal((await jobsOf(kind)).length, 0);

    const Typed = jobType(newKind(), Type.Object({ n: Type.Integer() }, { additionalProperties: false }));
    await assert.rejects(Typed.enqueue(db, { n: 'one' } as never), (e: Error) => e instanceof JobInputError && /payload\.n/.test(e.message));
    let performed = 0;
    const { r } = runner({ [Typed.kind]: Typed.handler(async () => void performed++) });
    // A payload stored by an older version of the code (or by hand) that the handler cannot take.
    const stale = await enqueue(db, { kind: Typed.kind, payload: { n: 1, extra: true } });
    const good = await Typed.enqueue(db, { n: 2 });
    await r.drain();
    assert.equal(performed, 1);
    const row = (await getJob(db, stale.id))!;
    assert.equal(row.state, 'failed');
    assert.equal(row.attempts, 1);
    assert.match(row.last_error!, /invalid payload/);
    assert.equal((await getJob(db, good.id))!.state, 'done');
  });

  test('an expired lease is taken over; the stale owner is told through its signal and its completion is refused', async () => {
    const kind = newKind();
    const nowMs = Date.now() + 5_000;
    const hold = gate();
    let aCtx: JobContext | null = null;
    const a = runner(
      {
        [kind]: {
          perform: async (_p, ctx) => {
            aCtx = ctx;
            await hold.p;
          },
        },
      },
      { now: () => new Date(nowMs), leaseMs: 30_000, heartbeatMs: 20, owner: 'runner-a' },
    );
    const bSeen: number[] = [];
    const b = (offsetMs: number) =>
      runner({ [kind]: { perform: async (_p, ctx) => void bSeen.push(ctx.attempt) } }, { now: () => new Date(nowMs + offsetMs), leaseMs: 30_000, owner: 'runner-b' });
    const job = await enqueue(db, { kind, payload: {} });
    const aDone = a.r.drain();
    await waitFor('runner A to start the job', () => aCtx !== null);
    let row = (await getJob(db, job.id))!;
    assert.equal(row.state, 'running');
    assert.equal(row.generation, 1);
    assert.equal(row.lease_owner, 'runner-a');
    assert.equal(Date.parse(row.lease_until!), nowMs + 30_000);

    // Before the lease runs out, nobody else takes the job.
    await b(29_000).r.drain();
    assert.deepEqual(bSeen, []);
    // After, another runner does. Its claim skips a row locked at that moment (runner A's
    // heartbeat renewing, every 20 ms, on PostgreSQL), so it is tried until it takes the job.
    const late = b(31_000);
    await waitFor('runner B to take the job over', async () => (await late.r.drain(), bSeen.length > 0));
    assert.deepEqual(bSeen, [2]);
    row = (await getJob(db, job.id))!;
    assert.equal(row.state, 'done');
    assert.equal(row.generation, 2);

    await waitFor("runner A's heartbeat to find the lease lost", () => aCtx!.signal.aborted);
    assert.ok(aCtx!.signal.reason instanceof LeaseLostError);
    hold.open();
    await aDone;
    assert.ok(a.lines.some((l) => l.includes('outcome refused')), 'the refusal is logged');
    const after = (await getJob(db, job.id))!;
    assert.equal(after.state, 'done');
    assert.equal(after.generation, 2);
    assert.equal(after.attempts, 2);
  });

  test('a job whose lease ran out on its last attempt is failed, not run again', async () => {
    const kind = newKind();
    const nowMs = Date.now() + 5_000;
    const hold = gate();
    let started = false;
    let again = 0;
    const a = runner({ [kind]: { perform: async () => ((started = true), await hold.p) } }, { now: () => new Date(nowMs), leaseMs: 1_000, heartbeatMs: 500 });
    const b = runner({ [kind]: { perform: async () => void again++ } }, { now: () => new Date(nowMs + 600_000) });
    const job = await enqueue(db, { kind, payload: {}, maxAttempts: 1 });
    const aDone = a.r.drain();
    await waitFor('runner A to start the job', () => started);
    // B's claim skips the row while A's heartbeat holds it locked, so it is tried until the job is settled.
    const row = await waitFor('runner B to settle the job', async () => {
      await b.r.drain();
      const r = (await getJob(db, job.id))!;
      return r.state !== 'running' && r;
    });
    assert.equal(again, 0);
    assert.equal(row.state, 'failed');
    assert.match(row.last_error!, /gave up after 1 attempts: the lease of the last one ran out/);
    hold.open();
    await aDone;
    assert.equal((await getJob(db, job.id))!.state, 'failed');
  });

  test('stop() waits for a running handler to finish, and aborts one that outlives its bound', async () => {
    const kind = newKind();
    const hold = gate();
    const started: JobContext[] = [];
    const { r } = runner(
      {
        [kind]: {
          perform: async (_p, ctx) => {
            started.push(ctx);
            await hold.p;
          },
        },
      },
      { stopTimeoutMs: 120_000 },
    );
    await r.start();
    const finishing = await enqueue(db, { kind, payload: {} });
    await waitFor('the first job to start', () => started.length === 1);
    const stopped = r.stop();
    hold.open();
    await stopped;
    assert.equal((await getJob(db, finishing.id))!.state, 'done', 'stop waited for it');

    const untilAborted = async (_p: unknown, ctx: JobContext) => {
      started.push(ctx);
      await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
    };
    const { r: r2 } = runner({ [kind]: { perform: untilAborted } }, { stopTimeoutMs: 50 });
    await enqueue(db, { kind, payload: {} });
    await r2.start();
    await waitFor('the second job to start', () => started.length === 2);
    await r2.stop();
    assert.ok(started[1].signal.aborted, 'the handler is told to stop');
  });

  test('kinds in a lane have slots of their own: jobs of other kinds holding every shared slot do not hold them up', async () => {
    const slow = newKind();
    const run = newKind();
    const stuck = gate();
    let slowStarted = 0;
    const ran: number[] = [];
    const { r } = runner(
      {
        [slow]: { perform: async () => void (slowStarted++, await stuck.p) },
        [run]: { perform: async (p: { n: number }) => void ran.push(p.n) },
      },
      { concurrency: 2, lanes: [{ kinds: [run], concurrency: 1 }] },
    );
    await r.start();
    try {
      await db.transaction().execute(async (trx) => {
        for (let i = 0; i < 3; i++) await enqueue(trx, { kind: slow, payload: {} });
      });
      await waitFor('two slow jobs to hold both shared slots', async () => slowStarted === 2);
      await db.transaction().execute(async (trx) => {
        for (let n = 0; n < 3; n++) await enqueue(trx, { kind: run, payload: { n } });
      });
      await waitFor("the lane's jobs to be done", async () => (await jobsOf(run)).every((j) => j.state === 'done'));
      assert.deepEqual(ran.sort(), [0, 1, 2]);
      assert.equal(slowStarted, 2, 'the third slow job still waits for a shared slot');
    } finally {
      stuck.open();
      await r.stop();
    }
    assert.throws(() => runner({ [run]: { perform: async () => {} } }, { lanes: [{ kinds: [run], concurrency: 1 }, { kinds: [run], concurrency: 2 }] }), /is in two lanes/);
  });

  test('metrics: completions and failures by kind; jobs by kind and state', async () => {
    const [ok, bad, other] = [newKind(), newKind(), newKind()];
    const metrics = new Registry();
    const { r } = runner({ [ok]: { perform: async () => {} }, [bad]: { perform: async () => Promise.reject(new Error('no')) } }, { metrics });
    await enqueue(db, { kind: ok, payload: {} });
    await enqueue(db, { kind: bad, payload: {}, maxAttempts: 1 });
    await enqueue(db, { kind: other, payload: {} });
    await r.drain();
    await r.start();
    await r.stop();
    const text = metrics.render();
    assert.match(text, new RegExp(`crewhouse_jobs_completed_total\\{kind="${ok}"\\} 1`));
    assert.match(text, new RegExp(`crewhouse_jobs_failed_total\\{kind="${bad}"\\} 1`));
    assert.match(text, new RegExp(`crewhouse_jobs\\{kind="${other}",state="queued"\\} 1`));
    assert.match(text, new RegExp(`crewhouse_jobs\\{kind="${ok}",state="done"\\} 1`));
    assert.match(text, /# TYPE crewhouse_jobs gauge/);
  });

  test("the caller's housekeeping runs with the prune of done jobs: each logs what it deleted, and one that fails does not keep the next from running", async () => {
    const last = gate();
    const ran: string[] = [];
    const { r, lines } = runner(
      {},
      {
        housekeeping: [
          {
            what: 'broken rows',
            run: async () => {
              ran.push('broken');
              throw new Error('no such table');
            },
          },
          {
            what: 'test rows',
            run: async () => {
              ran.push('test');
              last.open();
              return 3;
            },
          },
        ],
      },
    );
    await r.start();
    await last.p;
    await r.stop();
    assert.deepEqual(ran, ['broken', 'test']);
    await waitFor('the log line of the rows deleted', () => lines.some((l) => l.includes('deleted old test rows') && l.includes('"deleted":3')));
    assert.ok(lines.some((l) => l.includes('could not delete old broken rows') && l.includes('no such table')));
  });

  test('a target is checked at enqueue', async () => {
    for (const target of ['', 'x'.repeat(201), 'a\u0000b']) {
      await assert.rejects(enqueue(db, { kind: newKind(), payload: {}, target }), (e: Error) => e instanceof JobInputError && /target must be 1 to 200 characters/.test(e.message));
    }
  });

  describe('several runners on PostgreSQL', { skip: TEST_DATABASE_URL ? false : 'FOR UPDATE SKIP LOCKED between runners needs PostgreSQL (the embedded database has one connection)' }, () => {
    test('a job locked by another transaction is skipped, not waited for', async () => {
      const kind = newKind();
      const seen: number[] = [];
      const { r } = runner({ [kind]: { perform: async (p: { n: number }) => void seen.push(p.n) } });
      const jobs: Job[] = [];
      for (let n = 1; n <= 3; n++) jobs.push(await enqueue(db, { kind, payload: { n } }));
      const locked = gate();
      const release = gate();
      const holder = db.transaction().execute(async (trx) => {
        await trx.selectFrom('jobs').select('id').where('id', '=', jobs[0].id).forUpdate().execute();
        locked.open();
        await release.p;
      });
      try {
        await locked.p;
        await r.drain();
        assert.deepEqual(seen.sort(), [2, 3]);
        assert.equal((await getJob(db, jobs[0].id))!.state, 'queued');
      } finally {
        release.open();
        await holder;
      }
      await r.drain();
      assert.deepEqual(seen.sort(), [1, 2, 3]);
    });

    test('a runner whose LISTEN connection is cut connects again and still wakes at once', async () => {
      const kind = newKind();
      const seen: number[] = [];
      const { r } = runner({ [kind]: { perform: async (p: { n: number }) => void seen.push(p.n) } }, { pollMs: 600_000 });
      const channel = (await sql<{ c: string }>`select ${channelSql} as c`.execute(db)).rows[0].c;
      const listeners = async () =>
        (await sql<{ pid: number }>`select pid from pg_stat_activity where query = ${`listen "${channel}"`} and pid <> pg_backend_pid()`.execute(db)).rows.map((x) => x.pid);
      await r.start();
      try {
        await waitFor('the runner to LISTEN', async () => (await listeners()).length === 1);
        const [first] = await listeners();
        await sql`select pg_terminate_backend(${first})`.execute(db);
        await waitFor('the runner to LISTEN again on a new connection', async () => {
          const now = await listeners();
          return now.length === 1 && now[0] !== first;
        });
        await enqueue(db, { kind, payload: { n: 1 } });
        await waitFor('the runner to perform the job', () => seen.length === 1);
      } finally {
        await r.stop();
      }
    });

    test('a runner stopped while it is still starting leaves no LISTEN connection behind', async () => {
      const { r } = runner({ [newKind()]: { perform: async () => {} } });
      const channel = (await sql<{ c: string }>`select ${channelSql} as c`.execute(db)).rows[0].c;
      const listeners = async () => (await sql<{ pid: number }>`select pid from pg_stat_activity where query = ${`listen "${channel}"`} and pid <> pg_backend_pid()`.execute(db)).rows.length;
      const starting = r.start();
      await r.stop();
      await starting;
      await waitFor('the LISTEN connection to be gone', async () => (await listeners()) === 0);
    });

    test('a targeted job is taken only by its host\'s runner while that host lives; by any runner once it is dead', async () => {
      const kind = newKind();
      // Host rows that run no provider, so no placement of another test picks them.
      const [hostA, hostB] = [uniq('host-a'), uniq('host-b')];
      await db.insertInto('sandbox_hosts').values([hostA, hostB].map((id) => ({ id, address: '127.0.0.1', providers: sql<string[]>`'{}'::text[]`, vcpus: 1, memory_mib: 1024, disk_gib: 1 }))).execute();
      const alive = () => liveHostIds(db, 30);
      const performed: Array<{ n: number; by: string }> = [];
      const handler = (by: string): JobHandler => ({ perform: async (p: { n: number }) => void performed.push({ n: p.n, by }) });
      const a = runner({ [kind]: handler('a') }, { target: { id: hostA, alive } });
      const b = runner({ [kind]: handler('b') }, { target: { id: hostB, alive } });
      try {
        const toB = await enqueue(db, { kind, payload: { n: 1 }, target: hostB });
        await enqueue(db, { kind, payload: { n: 2 } });
        await a.r.drain();
        assert.deepEqual(performed, [{ n: 2, by: 'a' }], 'host A takes the untargeted job and leaves the one for host B');
        assert.equal((await getJob(db, toB.id))?.state, 'queued');
        const listed = (await listJobsCommand(db, { kind })).trim().split('\n').map((l) => JSON.parse(l) as { id: number; target: string | null });
        assert.equal(listed.find((j) => j.id === toB.id)?.target, hostB, '`crewhouse jobs` shows the target');
        await b.r.drain();
        assert.deepEqual(performed.at(-1), { n: 1, by: 'b' });

        // Host B's heartbeat is older than the bound: its job is anyone's, not stuck.
        const stranded = await enqueue(db, { kind, payload: { n: 3 }, target: hostB });
        await a.r.drain();
        assert.equal((await getJob(db, stranded.id))?.state, 'queued', 'not yet: host B lives');
        await db.updateTable('sandbox_hosts').set({ heartbeat_at: sql`now() - interval '1 hour'` }).where('id', '=', hostB).execute();
        await a.r.drain();
        assert.deepEqual(performed.at(-1), { n: 3, by: 'a' });
        assert.equal((await getJob(db, stranded.id))?.state, 'done');

        // A stopped host is dead at once.
        const ofStopped = await enqueue(db, { kind, payload: { n: 4 }, target: hostA });
        await db.updateTable('sandbox_hosts').set({ stopped_at: sql`now()` }).where('id', '=', hostA).execute();
        await b.r.drain();
        assert.deepEqual(performed.at(-1), { n: 4, by: 'b' });
        assert.equal((await getJob(db, ofStopped.id))?.state, 'done');
        assert.equal(performed.length, 4, 'each job performed once');
      } finally {
        await db.updateTable('sandbox_hosts').set({ stopped_at: sql`now()` }).where('id', 'in', [hostA, hostB]).execute();
      }
    });

    test('two runners share the queue: each job performed once, both take part', async () => {
      const kind = newKind();
      const performedBy = new Map<number, string[]>();
      let inFlight = 0;
      const full = gate();
      const handler = (owner: string): JobHandler => ({
        perform: async (p: { n: number }) => {
          performedBy.set(p.n, [...(performedBy.get(p.n) ?? []), owner]);
          // Each runner holds at most 3: six at once means both are working.
          if (++inFlight === 6) full.open();
          await full.p;
        },
      });
      const a = runner({ [kind]: handler('a') }, { concurrency: 3, owner: 'a' });
      const b = runner({ [kind]: handler('b') }, { concurrency: 3, owner: 'b' });
      await a.r.start();
      await b.r.start();
      try {
        await db.transaction().execute(async (trx) => {
          for (let n = 0; n < 12; n++) await enqueue(trx, { kind, payload: { n } });
        });
        await waitFor('all twelve jobs to be done', async () => (await jobsOf(kind)).every((j) => j.state === 'done'));
      } finally {
        await a.r.stop();
        await b.r.stop();
      }
      assert.equal(performedBy.size, 12);
      for (const [n, owners] of performedBy) assert.equal(owners.length, 1, `job ${n} ran once`);
      const owners = new Set([...performedBy.values()].flat());
      assert.deepEqual([...owners].sort(), ['a', 'b']);
    });
  });
});
