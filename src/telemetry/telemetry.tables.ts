import type { ColumnType } from 'kysely';
import type { Json, NullableTimestamp } from '../db/columns.ts';

export interface TelemetryTables {
  /**
   * Finished spans waiting to be sent to the OTLP collector (outbox.ts): written in the
   * transaction that records their events, deleted once the collector took them. A lease keeps
   * two exporters (two workers) from sending the same rows at once.
   */
  trace_outbox: {
    id: ColumnType<number, never, never>;
    span: Json<unknown>;
    created_at: ColumnType<string, never, never>;
    lease_owner: string | null;
    lease_until: NullableTimestamp;
  };
}
