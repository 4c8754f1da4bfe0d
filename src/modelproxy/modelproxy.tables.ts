import type { ColumnType, Generated } from 'kysely';
import type { NullableTimestamp, RowVersion, Timestamp } from '../db/columns.ts';

/** A virtual key. Only the hash of the key is stored; the key itself is shown once, at mint. */
export interface MpKeysTable {
  key_id: string;
  key_hash: string;
  key_prefix: string;
  team: string;
  role: string;
  agent: string;
  models: ColumnType<string[], string[] | undefined, string[]>;
  max_budget: number | null;
  budget_duration: string | null;
  /** The duration as a PostgreSQL interval ('30 days'); read as text. */
  budget_interval: ColumnType<unknown, string | null, string | null>;
  window_started_at: Timestamp;
  window_spend: Generated<number>;
  spend_total: Generated<number>;
  reserved: Generated<number>;
  rpm_limit: number | null;
  tpm_limit: number | null;
  rl_minute: Generated<string>;
  rl_requests: Generated<number>;
  rl_tokens: Generated<number>;
  last_used_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
  row_version: RowVersion;
}

/** A team's daily budget (USD per UTC day) and what it spent and holds reserved today. */
export interface MpTeamsTable {
  team: string;
  budget_usd_per_day: number | null;
  day: ColumnType<string, string | undefined, string>;
  day_spend: Generated<number>;
  reserved: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
  row_version: RowVersion;
}

export interface MpReservationsTable {
  id: Generated<number>;
  key_id: string;
  team: string;
  amount: number;
  tokens: number;
  rl_minute: Timestamp;
  created_at: Timestamp;
  expires_at: Timestamp;
}

/** One line per request: who, which model, tokens, cost, status, latency. Never the prompt or the key. */
export interface MpRequestLogTable {
  id: Generated<number>;
  at: Timestamp;
  team: string | null;
  role: string | null;
  key_id: string | null;
  model: string | null;
  stream: Generated<boolean>;
  tokens_in: Generated<number>;
  tokens_out: Generated<number>;
  cost_usd: Generated<number>;
  status: number;
  latency_ms: Generated<number>;
  upstream_request_id: string | null;
  request_id: string | null;
  error: string | null;
}

/** Spend aggregated as it happens: one row per team, UTC day, role and key. */
export interface MpSpendDailyTable {
  team: string;
  day: ColumnType<string, string, string>;
  role: string;
  key_id: string;
  spend_usd: number;
  tokens_in: number;
  tokens_out: number;
  requests: number;
}

export interface ModelProxyTables {
  mp_keys: MpKeysTable;
  mp_teams: MpTeamsTable;
  mp_reservations: MpReservationsTable;
  mp_request_log: MpRequestLogTable;
  mp_spend_daily: MpSpendDailyTable;
}
