import type { ColumnType } from 'kysely';
import type { NullableTimestamp, RowVersion, Timestamp } from '../../db/columns.ts';

export type RunState = 'running' | 'waiting' | 'succeeded' | 'failed' | 'cancelled';

/** The runs module's tables (created by migration 0401; the run engine grows them). */
export interface RunsTables {
  runs: {
    id: string;
    team_id: number;
    team_name: string;
    surface: ColumnType<string, string | undefined, string>;
    state: RunState;
    text: string;
    failure_reason: string | null;
    created_by: string;
    created_at: Timestamp;
    updated_at: Timestamp;
    finished_at: NullableTimestamp;
    row_version: RowVersion;
  };
}
