import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Static, TSchema } from 'typebox';
import { Value } from 'typebox/value';
import type { Database } from '../db/schema.ts';
import { inspectJson } from '../db/json-values.ts';
import type { JobState } from './queue.tables.ts';

/** The database or the caller's transaction: a job enqueued on a transaction exists iff it commits. */
type Q = Kysely<Database>;

export interface Job {
  id: number;
  kind: string;
  payload: unknown;
  key: string | null;
  target: string | null;
  state: JobState;
  attempts: number;
  max_attempts: number;
  run_at: string;
  generation: number;
  lease_owner: string | null;
  lease_until: string | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

export interface EnqueueInput {
  kind: string;
  /** JSON data only (no secrets: the CLI prints payloads). */
  payload: unknown;
  /** Makes the enqueue idempotent: a second enqueue with the same key returns the first job. */
  key?: string;
  runAt?: Date;
  maxAttempts?: number;
  /**
   * Only the runner started with this target (a sandbox host's id) takes the job, until that
   * host is dead; then any runner does.
   */
  target?: string;
}

/** What a job's handler gets besides its payload. */
export interface JobContext {
  id: number;
  kind: string;
  /** 1 on the first attempt. */
  attempt: number;
  maxAttempts: number;
  logger: Logger;
  /** Aborted when this runner loses the job's lease (another may run it now) or stops. */
  signal: AbortSignal;
}

/**
 * A kind of job's work. `perform` may run more than once for one job (a lease lost half-way,
 * a crash after the effect and before completion): the job makes its effect idempotent.
 */
export interface JobHandler {
  /** Checked before perform; a payload that does not match fails the job at once. */
  payload?: TSchema;
  perform(payload: any, ctx: JobContext): Promise<void>;
}

/** Thrown by a handler when trying again cannot help: the job fails at once, without retries. */
export class PermanentJobError extends Error {
  override name = 'PermanentJobError';
}

/** Bad input to enqueue: a programming error in the caller, named precisely. */
export class JobInputError extends Error {
  override name = 'JobInputError';
}

export const DEFAULT_MAX_ATTEMPTS = 10;
const MAX_PAYLOAD_BYTES = 64 * 1024;
const KIND = /^[a-z][a-z0-9._-]{0,99}$/;

/**
 * The channel runners LISTEN on: one per schema, so deployments (and test schemas) sharing a
 * server do not wake each other. PostgreSQL cuts channel names at 63 bytes; so do we.
 */
export const channelSql = sql<string>`left('crewhouse_jobs:' || current_schema(), 63)`;

/** Why a value cannot be a job's payload, or null when it can: JSON data, bounded, no NUL. */
export function payloadProblem(value: unknown): string | null {
  const seen = new Set<object>();
  const walk = (v: unknown, at: string): string | null => {
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return null;
    if (typeof v === 'number') return Number.isFinite(v) ? null : `${at} is not a finite number`;
    if (typeof v !== 'object') return `${at} is ${typeof v === 'undefined' ? 'undefined' : `a ${typeof v}`}, which JSON cannot hold`;
    if (seen.has(v)) return `${at} refers back to itself`;
    const proto = Object.getPrototypeOf(v);
    if (!Array.isArray(v) && proto !== Object.prototype && proto !== null) return `${at} is a ${proto?.constructor?.name ?? 'class instance'}, not plain JSON data`;
    seen.add(v);
    for (const [k, child] of Object.entries(v)) {
      if (child === undefined && !Array.isArray(v)) continue;
      const problem = walk(child, Array.isArray(v) ? `${at}[${k}]` : `${at}.${k}`);
      if (problem) return problem;
    }
    seen.delete(v);
    return null;
  };
  const problem = walk(value, 'payload');
  if (problem) return problem;
  const inspected = inspectJson(value);
  if (inspected && 'nul' in inspected) return `payload${inspected.nul ? `.${inspected.nul}` : ''} holds a NUL character`;
  if (inspected) return `payload nests deeper than JSON data a job carries (at ${inspected.tooDeep || 'the top'})`;
  if (Buffer.byteLength(JSON.stringify(value)) > MAX_PAYLOAD_BYTES) return `payload is larger than ${MAX_PAYLOAD_BYTES} bytes`;
  return null;
}

function checkInput(input: EnqueueInput): void {
  if (typeof input.kind !== 'string' || !KIND.test(input.kind)) throw new JobInputError(`job kind ${JSON.stringify(input.kind)} must be 1 to 100 of a-z 0-9 . _ -, starting with a letter`);
  const problem = payloadProblem(input.payload);
  if (problem) throw new JobInputError(`job ${input.kind}: ${problem}`);
  if (input.key !== undefined && (typeof input.key !== 'string' || input.key.length < 1 || input.key.length > 300 || input.key.includes('\u0000'))) {
    throw new JobInputError(`job ${input.kind}: key must be 1 to 300 characters without NUL`);
  }
  if (input.target !== undefined && (typeof input.target !== 'string' || input.target.length < 1 || input.target.length > 200 || input.target.includes('\u0000'))) {
    throw new JobInputError(`job ${input.kind}: target must be 1 to 200 characters without NUL`);
  }
  if (input.runAt !== undefined && !(input.runAt instanceof Date && Number.isFinite(input.runAt.getTime()))) throw new JobInputError(`job ${input.kind}: runAt must be a valid Date`);
  if (input.maxAttempts !== undefined && !(Number.isInteger(input.maxAttempts) && input.maxAttempts >= 1 && input.maxAttempts <= 100)) {
    throw new JobInputError(`job ${input.kind}: maxAttempts must be a whole number from 1 to 100`);
  }
}

/**
 * Adds a job on `q`, the caller's transaction (or the database): it exists, and runners hear of
 * it, only when that transaction commits. With a key, a job of that key that already exists is
 * returned instead and nothing is added.
 */
export async function enqueue(q: Q, input: EnqueueInput): Promise<Job> {
  checkInput(input);
  // One statement: the insert, and the NOTIFY only when it inserted. Inside a transaction,
  // PostgreSQL delivers the notification at commit and drops it on rollback.
  const inserted = (
    await sql<Job>`
      with added as (
        insert into jobs (kind, payload, key, target, max_attempts, run_at)
        values (${input.kind}, ${JSON.stringify(input.payload)}::jsonb, ${input.key ?? null}, ${input.target ?? null}, ${input.maxAttempts ?? DEFAULT_MAX_ATTEMPTS}, ${input.runAt ? sql`${input.runAt.toISOString()}::timestamptz` : sql`now()`})
        on conflict (key) do nothing
        returning *
      )
      select added.* from added cross join lateral (select pg_notify(${channelSql}, '') where added.id is not null) notified`.execute(q)
  ).rows[0];
  if (inserted) return inserted;
  const existing = await q.selectFrom('jobs').selectAll().where('key', '=', input.key!).executeTakeFirst();
  if (!existing) throw new Error(`job ${input.kind}: key ${JSON.stringify(input.key)} conflicted, but no job holds it`);
  return existing as Job;
}

/**
 * A kind of job with its payload's schema: `enqueue` checks the payload against it (and is
 * typed by it), `handler` makes the runner's handler that checks it again before performing.
 */
export function jobType<S extends TSchema>(kind: string, payload: S, defaults: { maxAttempts?: number } = {}) {
  if (!KIND.test(kind)) throw new JobInputError(`job kind "${kind}" must be 1 to 100 of a-z 0-9 . _ -, starting with a letter`);
  return {
    kind,
    payload,
    async enqueue(q: Q, value: Static<S>, opts: Omit<EnqueueInput, 'kind' | 'payload'> = {}): Promise<Job> {
      const problem = schemaProblem(payload, value);
      if (problem) throw new JobInputError(`job ${kind}: ${problem}`);
      return enqueue(q, { kind, payload: value, ...defaults, ...opts });
    },
    handler(perform: (value: Static<S>, ctx: JobContext) => Promise<void>): JobHandler {
      return { payload, perform };
    },
  };
}

/**
 * One kind of job, as its `*.job.ts` file declares it: the kind (`<module>.<verb>-<object>`,
 * the module being the folder that owns the job and the file named `<verb>-<object>.job.ts`),
 * its payload's schema, and its work given the narrow pieces `D` it needs. The worker's table of
 * every kind (src/jobs.ts) hands each job its pieces through `handler`.
 */
export function defineJob<S extends TSchema, D = void>(def: { kind: string; payload: S; maxAttempts?: number; perform(deps: D, value: Static<S>, ctx: JobContext): Promise<void> }) {
  const type = jobType(def.kind, def.payload, def.maxAttempts === undefined ? {} : { maxAttempts: def.maxAttempts });
  return {
    kind: type.kind,
    payload: type.payload,
    enqueue: type.enqueue,
    handler: (deps: D): KindHandler => ({ kind: type.kind, ...type.handler((value, ctx) => def.perform(deps, value, ctx)) }),
  };
}

/** A job's handler that names its kind. */
export type KindHandler = JobHandler & { kind: string };

/** The runner's handlers by kind; a kind given twice is a programming error, named. */
export function byKind(handlers: KindHandler[]): Record<string, JobHandler> {
  const out: Record<string, JobHandler> = {};
  for (const h of handlers) {
    if (out[h.kind]) throw new JobInputError(`job kind "${h.kind}" has two handlers`);
    out[h.kind] = h;
  }
  return out;
}

/** A job as `defineJob` makes it, whatever its pieces. */
export type JobDefinition<D = any> = ReturnType<typeof defineJob<TSchema, D>>;

/** The first way a value breaks a schema, or null when it matches. */
export function schemaProblem(schema: TSchema, value: unknown): string | null {
  if (Value.Check(schema, value)) return null;
  const first = [...Value.Errors(schema, value)][0];
  return first ? `payload${first.instancePath ? first.instancePath.replace(/\//g, '.') : ''} ${first.message}` : 'payload does not match its schema';
}

/** One job, or null. */
export async function getJob(q: Q, id: number): Promise<Job | null> {
  return ((await q.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirst()) as Job | undefined) ?? null;
}

/** Jobs, newest first, for the CLI. */
export async function listJobs(q: Q, opts: { state?: JobState; kind?: string; limit: number }): Promise<Job[]> {
  let query = q.selectFrom('jobs').selectAll().orderBy('id', 'desc').limit(opts.limit);
  if (opts.state) query = query.where('state', '=', opts.state);
  if (opts.kind) query = query.where('kind', '=', opts.kind);
  return (await query.execute()) as Job[];
}

/**
 * Puts a failed job back in the queue, due now, with its attempts counted from zero (its last
 * error stays until it runs). Null when there is no failed job of that id.
 */
export async function retryJob(q: Q, id: number): Promise<Job | null> {
  const row = await q
    .updateTable('jobs')
    .set({ state: 'queued', attempts: 0, run_at: sql`now()`, updated_at: sql`now()`, finished_at: null })
    .where('id', '=', id)
    .where('state', '=', 'failed')
    .returningAll()
    .executeTakeFirst();
  if (row) await sql`select pg_notify(${channelSql}, '')`.execute(q);
  return (row as Job | undefined) ?? null;
}

/** How many jobs there are of each kind in each state, for the metrics. */
export async function countJobs(q: Q): Promise<Array<{ kind: string; state: JobState; count: number }>> {
  const rows = await q.selectFrom('jobs').select(['kind', 'state', sql<number>`count(*)::int`.as('count')]).groupBy(['kind', 'state']).execute();
  return rows;
}

/** Deletes done jobs finished before `before` (their keys may then be used again); how many went. */
export async function pruneDoneJobs(q: Q, before: Date): Promise<number> {
  const r = await q.deleteFrom('jobs').where('state', '=', 'done').where('finished_at', '<', before.toISOString()).executeTakeFirst();
  return Number(r.numDeletedRows);
}
