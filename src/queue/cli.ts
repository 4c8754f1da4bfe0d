import { ConfigError } from '../config.ts';
import type { Db } from '../db/database.ts';
import { getJob, listJobs, retryJob, type Job } from './queue.ts';
import { JOB_STATES, type JobState } from './queue.tables.ts';

/** The states a job is in, as `crewhouse jobs --state` takes them. */
export { JOB_STATES };

/** A job as the CLI prints it. */
const present = (j: Job) => ({
  id: j.id,
  kind: j.kind,
  state: j.state,
  attempts: j.attempts,
  max_attempts: j.max_attempts,
  run_at: j.run_at,
  key: j.key,
  target: j.target,
  last_error: j.last_error,
  lease_owner: j.lease_owner,
  lease_until: j.lease_until,
  created_at: j.created_at,
  finished_at: j.finished_at,
  payload: j.payload,
});

/** `crewhouse jobs retry ID`: returns what to print. */
export async function retryJobCommand(db: Db, raw: string | undefined): Promise<string> {
  if (!raw || !/^\d{1,15}$/.test(raw) || Number(raw) < 1) throw new ConfigError(`jobs retry needs the id of a job (a whole number), got ${JSON.stringify(raw ?? '')}`);
  const id = Number(raw);
  const job = await retryJob(db, id);
  if (!job) {
    const found = await getJob(db, id);
    throw new ConfigError(found ? `job ${id} is ${found.state}, not failed; only failed jobs can be retried` : `no job ${id}`);
  }
  return JSON.stringify(present(job)) + '\n';
}

/** `crewhouse jobs [--state S] [--kind K] [--limit N]`: returns what to print. */
export async function listJobsCommand(db: Db, values: { state?: string; kind?: string; limit?: string }): Promise<string> {
  const { state, kind, limit = '100' } = values;
  if (state !== undefined && !(JOB_STATES as readonly string[]).includes(state)) throw new ConfigError(`--state must be one of ${JOB_STATES.join(', ')}, got "${state}"`);
  if (kind !== undefined && (kind.length < 1 || kind.length > 100)) throw new ConfigError('--kind must be 1 to 100 characters');
  if (!/^\d{1,5}$/.test(limit) || Number(limit) < 1 || Number(limit) > 10_000) throw new ConfigError(`--limit must be a whole number from 1 to 10000, got "${limit}"`);
  const rows = await listJobs(db, { state: state as JobState | undefined, kind, limit: Number(limit) });
  return rows.map((j) => JSON.stringify(present(j)) + '\n').join('');
}
