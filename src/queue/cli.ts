import { parseArgs } from 'node:util';
import { ConfigError } from '../config.ts';
import type { Db } from '../db/database.ts';
import { getJob, listJobs, retryJob, type Job } from './queue.ts';
import { JOB_STATES, type JobState } from './queue.tables.ts';

export const JOBS_USAGE = `  jobs [--state S] [--kind K] [--limit N]
                                      print jobs, newest first, as JSON lines (S: ${JOB_STATES.join('|')})
  jobs retry ID                       put a failed job back in the queue, due now, with its attempts anew`;

const usage = () => new ConfigError(`usage:\n${JOBS_USAGE}`);

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

/** `crewhouse jobs …`: returns what to print. */
export async function runJobsCommand(args: string[], db: Db): Promise<string> {
  let parsed;
  try {
    parsed = parseArgs({ args, allowPositionals: true, options: { state: { type: 'string' }, kind: { type: 'string' }, limit: { type: 'string', default: '100' } } });
  } catch (err) {
    throw new ConfigError(`${(err as Error).message}\n${usage().message}`);
  }
  const { values, positionals } = parsed;
  if (positionals[0] === 'retry') {
    const raw = positionals[1];
    if (positionals.length !== 2 || !raw || !/^\d{1,15}$/.test(raw) || Number(raw) < 1) throw new ConfigError(`jobs retry needs the id of a job (a whole number), got ${JSON.stringify(raw ?? '')}`);
    const id = Number(raw);
    const job = await retryJob(db, id);
    if (!job) {
      const found = await getJob(db, id);
      throw new ConfigError(found ? `job ${id} is ${found.state}, not failed; only failed jobs can be retried` : `no job ${id}`);
    }
    return JSON.stringify(present(job)) + '\n';
  }
  if (positionals.length > 0) throw usage();
  const state = values.state;
  if (state !== undefined && !(JOB_STATES as readonly string[]).includes(state)) throw new ConfigError(`--state must be one of ${JOB_STATES.join(', ')}, got "${state}"`);
  if (values.kind !== undefined && (values.kind.length < 1 || values.kind.length > 100)) throw new ConfigError('--kind must be 1 to 100 characters');
  if (!/^\d{1,5}$/.test(values.limit) || Number(values.limit) < 1 || Number(values.limit) > 10_000) throw new ConfigError(`--limit must be a whole number from 1 to 10000, got "${values.limit}"`);
  const rows = await listJobs(db, { state: state as JobState | undefined, kind: values.kind, limit: Number(values.limit) });
  return rows.map((j) => JSON.stringify(present(j)) + '\n').join('');
}
