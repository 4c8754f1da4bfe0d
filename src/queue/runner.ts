import { sql, type RawBuilder } from 'kysely';
import type { Logger } from 'pino';
import { listen, type Db, type Unlisten } from '../db/database.ts';
import { leaseOwner } from '../db/lease.ts';
import { redactSecrets } from '../logger.ts';
import type { Registry } from '../metrics.ts';
import { channelSql, countJobs, PermanentJobError, pruneDoneJobs, schemaProblem, type Job, type JobHandler } from './queue.ts';

export interface BackoffOptions {
  /** The pause after the first failed attempt (before jitter); it doubles with each attempt. */
  baseMs: number;
  maxMs: number;
}

export interface JobRunnerOptions {
  db: Db;
  logger: Logger;
  /** Counters of completions, retries and failures, and a gauge of jobs by kind and state. */
  metrics?: Registry;
  /** The kinds this runner performs; it claims no other. */
  handlers: Record<string, JobHandler>;
  /** Jobs performed at once (of the kinds no lane names). */
  concurrency?: number;
  /**
   * Kinds that have slots of their own, so that jobs of other kinds never wait for them nor they
   * for others: the engine's runs, which hold a slot for as long as they work, beside outbound
   * calls to a slow chat server. A kind is in one lane at most; the rest share `concurrency`.
   */
  lanes?: Array<{ kinds: string[]; concurrency: number }>;
  /** How long a claim holds a job without a heartbeat; another runner takes it over after. */
  leaseMs?: number;
  heartbeatMs?: number;
  /** Looks for due jobs at least this often, notifications or not (jobs due later, lost notifications). */
  pollMs?: number;
  backoff?: BackoffOptions;
  /** For the backoff's jitter; Math.random by default. */
  random?: () => number;
  /** The clock leases and backoff are counted on; the database's clock (now()) by default. */
  now?: () => Date;
  /** How long stop() waits for running handlers before abandoning them (their leases then run out). */
  stopTimeoutMs?: number;
  /** How long done jobs are kept (and their keys held) before they are deleted. */
  keepDoneMs?: number;
  /**
   * The caller's own deletions of old rows, run with the hourly prune of done jobs (the queue
   * knows nothing of what they delete): each answers how many rows went, `what` names them in
   * the log line.
   */
  housekeeping?: Array<{ what: string; run(): Promise<number> }>;
  /** Names this runner in leases and logs. */
  owner?: string;
  /**
   * What this runner is a target of (a sandbox host's id), and the targets alive now: it claims
   * jobs targeted at none, at it, or at a target not alive (so a dead host's jobs do not wait
   * forever). Without it, targets are not looked at: every job is this runner's (one process).
   */
  target?: { id: string; alive(): Promise<string[]> };
}

export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 2_000, maxMs: 3_600_000 };

/** The pause before the attempt after `attempt` failed: exponential, capped, with jitter in its upper half. */
export function backoffMs(attempt: number, backoff: BackoffOptions, random: () => number): number {
  const ceiling = Math.min(backoff.maxMs, backoff.baseMs * 2 ** Math.min(Math.max(attempt, 1) - 1, 40));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

const MAX_ERROR_CHARS = 2_000;

/**
 * A thrown value as one line of text: an Error's message, or what else was thrown, named as
 * such; credentials in it censored (redactSecrets), as an SDK's message may quote a request's
 * headers or an answer echoing a token. What a job's failure is logged and recorded with.
 */
export function describeError(err: unknown): string {
  let text: string;
  if (err instanceof Error) text = err.name && err.name !== 'Error' ? `${err.name}: ${err.message}` : err.message || err.name;
  else {
    let shown: string | undefined;
    try {
      shown = JSON.stringify(err);
    } catch {
      shown = undefined;
    }
    text = `threw a non-Error value: ${shown ?? String(err)}`;
  }
  text = redactSecrets(text);
  return text.length > MAX_ERROR_CHARS ? text.slice(0, MAX_ERROR_CHARS) + '…' : text;
}

/** The handler's signal is aborted with this when another runner may own the job now. */
export class LeaseLostError extends Error {
  override name = 'LeaseLostError';
}

interface Running {
  job: Job;
  controller: AbortController;
  done: Promise<void>;
}

/** Kinds claimed together, with their own slots. */
interface Lane {
  kinds: string[];
  concurrency: number;
  running: number;
}

export type JobRunner = ReturnType<typeof createJobRunner>;

/**
 * Performs jobs: claims due ones with FOR UPDATE SKIP LOCKED (so runners share the table),
 * leases them (owner, lease_until, a generation each claim increments), heartbeats the lease
 * while the handler runs, and records the outcome only while it still holds that generation.
 * A failed attempt is retried after an exponential backoff with jitter, up to the job's
 * attempts; then the job is `failed`, with its last error. Wakes on NOTIFY after an enqueue
 * commits, and polls as a fallback.
 */
export function createJobRunner(opts: JobRunnerOptions) {
  const { db, logger, handlers } = opts;
  const kinds = Object.keys(handlers);
  const concurrency = opts.concurrency ?? 4;
  const leaseMs = opts.leaseMs ?? 60_000;
  const heartbeatMs = opts.heartbeatMs ?? Math.max(Math.floor(leaseMs / 3), 10);
  const pollMs = opts.pollMs ?? 5_000;
  const backoff = opts.backoff ?? DEFAULT_BACKOFF;
  const random = opts.random ?? Math.random;
  const stopTimeoutMs = opts.stopTimeoutMs ?? 10_000;
  const keepDoneMs = opts.keepDoneMs ?? 7 * 86_400_000;
  const owner = opts.owner ?? leaseOwner();
  const log = logger.child({ component: 'jobs', owner });
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error('concurrency must be a whole number of at least 1');
  const lanes: Lane[] = [];
  const laned = new Set<string>();
  for (const l of opts.lanes ?? []) {
    if (!Number.isInteger(l.concurrency) || l.concurrency < 1) throw new Error(`the concurrency of the lane of ${l.kinds.join(', ')} must be a whole number of at least 1`);
    const kindsHere = l.kinds.filter((k) => kinds.includes(k));
    for (const k of kindsHere) {
      if (laned.has(k)) throw new Error(`job kind ${k} is in two lanes`);
      laned.add(k);
    }
    if (kindsHere.length) lanes.push({ kinds: kindsHere, concurrency: l.concurrency, running: 0 });
  }
  const rest = kinds.filter((k) => !laned.has(k));
  if (rest.length) lanes.unshift({ kinds: rest, concurrency, running: 0 });
  const laneOf = new Map(lanes.flatMap((l) => l.kinds.map((k) => [k, l] as const)));
  if (heartbeatMs >= leaseMs) throw new Error('the heartbeat must come more often than the lease runs out');

  const now = (): RawBuilder<string> => (opts.now ? sql<string>`${opts.now().toISOString()}::timestamptz` : sql<string>`now()`);
  const after = (ms: number) => sql<string>`(${now()} + ${Math.round(ms)}::double precision * interval '1 millisecond')`;

  const completed = opts.metrics?.counter('crewhouse_jobs_completed_total', 'Jobs performed to the end, by kind');
  const retried = opts.metrics?.counter('crewhouse_jobs_retried_total', 'Failed attempts that will be tried again, by kind');
  const failed = opts.metrics?.counter('crewhouse_jobs_failed_total', 'Jobs that failed for good (attempts used up, or an error retrying cannot help), by kind');
  const gauge = opts.metrics?.labelledGauge('crewhouse_jobs', 'Jobs in the table by kind and state (counted every 15 s)');

  const running = new Set<Running>();
  let stopping = false;
  let started = false;
  let loopDone: Promise<void> = Promise.resolve();
  let starting: Promise<void> = Promise.resolve();
  let unlisten: Unlisten | null = null;
  const timers: NodeJS.Timeout[] = [];

  // Wake-ups: a notification, a freed slot or the poll timer. One that arrives while the loop
  // is busy is remembered, so the loop looks again instead of sleeping through it.
  let wakePending = false;
  let wakeNow: (() => void) | null = null;
  const wake = () => {
    wakePending = true;
    wakeNow?.();
  };
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      if (wakePending || stopping) return resolve();
      const done = () => {
        clearTimeout(timer);
        wakeNow = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      wakeNow = done;
    });

  /**
   * Claims due jobs for the lanes with free slots, up to each one's free slots, in one statement
   * (a locking select per lane, so one lane's backlog never takes another's slots).
   */
  async function claim(wanted: Array<{ lane: Lane; free: number }>): Promise<Array<{ job: Job; lane: Lane }>> {
    const alive = opts.target ? await opts.target.alive() : [];
    const own = opts.target?.id ?? null;
    const picks = wanted.map(
      ({ lane, free }, i) => sql`${sql.id(`lane${i}`)} as (
        select id from jobs
        where kind in (${sql.join(lane.kinds)})
          and ((state = 'queued' and run_at <= ${now()}) or (state = 'running' and lease_until < ${now()}))
          and (target is null or target = ${own} or not (target = any(${alive}::text[])))
        order by run_at, id
        limit ${free}
        for update skip locked
      )`,
    );
    const result = await sql<Job>`
      with ${sql.join(picks)}
      update jobs j
      set state = 'running', attempts = j.attempts + 1, generation = j.generation + 1,
          lease_owner = ${owner}, lease_until = ${after(leaseMs)}, updated_at = ${now()}
      from (${sql.join(wanted.map((_, i) => sql`select id from ${sql.id(`lane${i}`)}`), sql` union all `)}) due
      where j.id = due.id
      returning j.*`.execute(db);
    return result.rows.map((job) => ({ job, lane: laneOf.get(job.kind)! }));
  }

  /** Records the outcome, only while this runner still holds the claim's generation. */
  async function settle(job: Job, error: unknown | undefined, jobLog: Logger): Promise<void> {
    const mine = sql`id = ${job.id} and generation = ${job.generation} and state = 'running'`;
    if (error === undefined) {
      const r = await sql`update jobs set state = 'done', lease_owner = null, lease_until = null, last_error = null, finished_at = ${now()}, updated_at = ${now()} where ${mine} returning id`.execute(db);
      if (r.rows.length === 0) return refused(job, jobLog, 'done');
      completed?.inc({ kind: job.kind });
      jobLog.info('job done');
      return;
    }
    const message = describeError(error);
    const final = error instanceof PermanentJobError || job.attempts >= job.max_attempts;
    if (final) {
      const r = await sql`update jobs set state = 'failed', lease_owner = null, lease_until = null, last_error = ${message}, finished_at = ${now()}, updated_at = ${now()} where ${mine} returning id`.execute(db);
      if (r.rows.length === 0) return refused(job, jobLog, 'failed');
      failed?.inc({ kind: job.kind });
      jobLog.error({ error: message, attempts: job.attempts }, 'job failed for good');
      return;
    }
    const delay = backoffMs(job.attempts, backoff, random);
    const r = await sql`update jobs set state = 'queued', lease_owner = null, lease_until = null, last_error = ${message}, run_at = ${after(delay)}, updated_at = ${now()} where ${mine} returning id`.execute(db);
    if (r.rows.length === 0) return refused(job, jobLog, 'retry');
    retried?.inc({ kind: job.kind });
    jobLog.warn({ error: message, retry_in_ms: delay }, 'job attempt failed; will retry');
  }

  function refused(job: Job, jobLog: Logger, outcome: string) {
    jobLog.warn({ generation: job.generation, outcome }, 'job outcome refused: the lease was lost and the job may belong to another runner now');
  }

  async function heartbeat(r: Running, jobLog: Logger) {
    try {
      const res = await sql`update jobs set lease_until = ${after(leaseMs)} where id = ${r.job.id} and generation = ${r.job.generation} and state = 'running' returning id`.execute(db);
      if (res.rows.length === 0 && !r.controller.signal.aborted) {
        jobLog.warn({ generation: r.job.generation }, 'job lease lost; the handler is told to stop');
        r.controller.abort(new LeaseLostError(`job ${r.job.id}: the lease was lost`));
      }
    } catch (err) {
      jobLog.warn({ error: describeError(err) }, 'job heartbeat failed');
    }
  }

  async function perform(r: Running, jobLog: Logger): Promise<void> {
    const { job } = r;
    if (job.attempts > job.max_attempts) {
      throw new PermanentJobError(`gave up after ${job.max_attempts} attempts: the lease of the last one ran out (its runner stopped or stalled)`);
    }
    const handler = handlers[job.kind];
    if (handler.payload) {
      const problem = schemaProblem(handler.payload, job.payload);
      if (problem) throw new PermanentJobError(`invalid payload: ${problem}`);
    }
    await handler.perform(job.payload, { id: job.id, kind: job.kind, attempt: job.attempts, maxAttempts: job.max_attempts, logger: jobLog, signal: r.controller.signal });
  }

  function start(job: Job, lane: Lane) {
    lane.running++;
    const jobLog = log.child({ job: job.id, kind: job.kind, attempt: job.attempts });
    const r = { job, controller: new AbortController() } as Running;
    r.done = (async () => {
      // The heartbeat serves the handler's work and does not of itself keep the process alive:
      // a handler waiting on nothing that can settle would otherwise pin it for good.
      const beat = setInterval(() => void heartbeat(r, jobLog), heartbeatMs);
      beat.unref();
      let error: unknown = undefined;
      try {
        await perform(r, jobLog);
      } catch (err) {
        // `undefined` thrown is still a failure.
        error = err === undefined ? new Error('threw undefined') : err;
      } finally {
        clearInterval(beat);
      }
      try {
        await settle(job, error, jobLog);
      } catch (err) {
        jobLog.error({ error: describeError(err) }, 'could not record the job outcome; its lease will run out and it will run again');
      }
    })().finally(() => {
      running.delete(r);
      lane.running--;
      wake();
    });
    running.add(r);
  }

  // Claims run one at a time, so the free slots counted are the ones filled.
  let filling: Promise<unknown> = Promise.resolve();
  function fill(): Promise<number> {
    const next = filling.then(async () => {
      const wanted = lanes.map((lane) => ({ lane, free: lane.concurrency - lane.running })).filter((w) => w.free > 0);
      if (!wanted.length) return 0;
      const claimed = await claim(wanted);
      for (const { job, lane } of claimed) start(job, lane);
      return claimed.length;
    });
    filling = next.catch(() => {});
    return next;
  }
  /** Whether some lane has a free slot. */
  const roomLeft = () => lanes.some((l) => l.running < l.concurrency);

  async function refreshGauge() {
    if (!gauge) return;
    try {
      gauge.replace((await countJobs(db)).map((r) => [{ kind: r.kind, state: r.state }, r.count]));
    } catch (err) {
      log.warn({ error: describeError(err) }, 'could not count jobs for the metrics');
    }
  }

  async function prune() {
    const tasks = [{ what: 'done jobs', run: () => pruneDoneJobs(db, new Date(Date.now() - keepDoneMs)) }, ...(opts.housekeeping ?? [])];
    // One after another: a failing one does not keep the others from running.
    for (const task of tasks) {
      try {
        const gone = await task.run();
        if (gone) log.info({ deleted: gone }, `deleted old ${task.what}`);
      } catch (err) {
        log.warn({ error: describeError(err) }, `could not delete old ${task.what}`);
      }
    }
  }

  async function loop() {
    while (!stopping) {
      wakePending = false;
      let claimed = 0;
      try {
        claimed = await fill();
      } catch (err) {
        log.error({ error: describeError(err) }, 'could not claim jobs');
      }
      if (stopping) break;
      if (claimed > 0 && roomLeft()) continue;
      await sleep(pollMs);
    }
  }

  async function begin(): Promise<void> {
    try {
      const { channel } = (await sql<{ channel: string }>`select ${channelSql} as channel`.execute(db)).rows[0];
      unlisten = await listen(db, channel, wake);
    } catch (err) {
      log.warn({ error: describeError(err) }, `could not LISTEN for new jobs; looking every ${pollMs} ms instead`);
    }
    await refreshGauge();
    // A count over the whole table: often enough for a dashboard, rarely enough to cost nothing.
    timers.push(setInterval(() => void refreshGauge(), 15_000));
    void prune();
    timers.push(setInterval(() => void prune(), 3_600_000));
    for (const t of timers) t.unref();
    loopDone = loop();
  }

  return {
    owner,

    /** Starts listening and claiming; returns once listening (or, failing that, polling). */
    start(): Promise<void> {
      if (started) return Promise.reject(new Error('the job runner is already started'));
      started = true;
      starting = begin();
      return starting;
    },

    /**
     * Performs every job that is due now, and the jobs those enqueue, until none is due and
     * none runs; jobs due later (a retry's backoff) are left for later.
     */
    async drain(): Promise<void> {
      for (;;) {
        const claimed = await fill();
        if (claimed === 0 && running.size === 0) return;
        if (running.size > 0) await Promise.race([...running].map((r) => r.done));
      }
    },

    /** Wakes the runner (what a notification does). */
    wake,

    /** How many handlers run now. */
    get running(): number {
      return running.size;
    },

    /**
     * Stops claiming, waits up to stopTimeoutMs for running handlers, then aborts the rest
     * (their leases run out and another runner takes them over).
     */
    async stop(): Promise<void> {
      stopping = true;
      wake();
      // A start still under way finishes first, so its LISTEN (a connection of its own on PostgreSQL) and timers are released below.
      await starting.catch(() => {});
      for (const t of timers) clearInterval(t);
      await loopDone;
      await filling;
      await unlisten?.().catch(() => {});
      unlisten = null;
      if (running.size > 0) {
        let timer: NodeJS.Timeout | undefined;
        const waited = await Promise.race([
          Promise.allSettled([...running].map((r) => r.done)).then(() => true),
          new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), stopTimeoutMs))),
        ]);
        clearTimeout(timer);
        if (!waited) {
          log.warn({ running: running.size }, 'stopping with jobs still running; their leases will run out');
          for (const r of running) r.controller.abort(new Error('the job runner is stopping'));
        }
      }
    },
  };
}
