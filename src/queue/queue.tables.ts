import type { ColumnType } from 'kysely';
import type { Generated, Json, NullableTimestamp, Timestamp } from '../db/columns.ts';

export type JobState = 'queued' | 'running' | 'done' | 'failed';
export const JOB_STATES: readonly JobState[] = ['queued', 'running', 'done', 'failed'];

export interface QueueTables {
  jobs: {
    id: ColumnType<number, never, never>;
    kind: string;
    payload: Json<unknown>;
    key: string | null;
    /** The one runner that takes the job (a sandbox host's id), while that host lives; null: any runner. */
    target: string | null;
    state: Generated<JobState>;
    attempts: Generated<number>;
    max_attempts: number;
    run_at: Timestamp;
    /** Incremented at each claim; a runner may finish a job only with the generation it claimed. */
    generation: Generated<number>;
    lease_owner: string | null;
    lease_until: NullableTimestamp;
    last_error: string | null;
    created_at: Timestamp;
    updated_at: Timestamp;
    finished_at: NullableTimestamp;
  };
}
