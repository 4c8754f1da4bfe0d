import type { ColumnType, Generated } from 'kysely';
import type { NullableTimestamp, RowVersion, Timestamp } from '../../db/columns.ts';

export type RunState = 'running' | 'waiting' | 'succeeded' | 'failed' | 'cancelled';
/** Where a run's work came from; a run on a chat surface is answered and cancelled there. */
export type RunSurface = 'console' | 'code_host' | 'chat_a' | 'chat_b' | 'tracker_a' | 'tracker_b';

export type TaskState = 'queued' | 'running' | 'waiting' | 'done' | 'failed' | 'cancelled';

/** A jsonb column: written as JSON text, read parsed; null allowed. */
type JsonNull<T> = ColumnType<T | null, string | null | undefined, string | null>;
type JsonDefault<T> = ColumnType<T, string | undefined, string>;
type Defaulted<T> = ColumnType<T, T | undefined, T>;

export interface WaitingFor {
  role: string;
  kind: 'question' | 'confirmation';
  since: string;
}

export interface Delivery {
  branch: string | null;
  commit: string | null;
  pull_request: { url: string; number: number | null; state: string | null } | null;
}

export interface RunsTables {
  runs: {
    id: string;
    team_id: number;
    team_name: string;
    surface: Defaulted<RunSurface>;
    /** On a chat or tracker surface: the thread or issue the work came from. */
    external_ref: Defaulted<string | null>;
    state: RunState;
    text: string;
    failure_reason: string | null;
    created_by: string;
    created_at: Timestamp;
    updated_at: Timestamp;
    finished_at: NullableTimestamp;
    row_version: RowVersion;
    work_item_id: Defaulted<string>;
    lead: Defaulted<string>;
    waiting_for: JsonNull<WaitingFor>;
    open_question_seq: Defaulted<number | null>;
    delivery: JsonNull<Delivery>;
    agent_versions: JsonDefault<Record<string, number>>;
    cost_usd: Defaulted<number>;
    last_seq: Defaulted<number>;
    rework_used: Defaulted<number>;
    trace_id: Defaulted<string | null>;
    cancel_requested_at: NullableTimestamp;
    owner: Defaulted<string | null>;
    owner_until: NullableTimestamp;
    owner_generation: Defaulted<number>;
  };
  run_posts: {
    run_id: string;
    seq: number;
    kind: string;
    role: string | null;
    text: string;
    data: JsonDefault<Record<string, unknown>>;
    source: string | null;
    created_at: Timestamp;
  };
  run_tasks: {
    id: string;
    run_id: string;
    role: string;
    state: TaskState;
    post_seq: number;
    input: ColumnType<unknown, string, string>;
    agent_version: number | null;
    sandbox_id: string | null;
    conversation: string;
    events_seen: Defaulted<number>;
    turn_from: Defaulted<number | null>;
    iterations: Defaulted<number>;
    cost_usd: Defaulted<number>;
    outcome: JsonNull<unknown>;
    /** The turn end the host accepted last (its seq and outcome): the only outcome the engine acts on. */
    turn_end_seq: Defaulted<number | null>;
    turn_end: JsonNull<unknown>;
    created_at: Timestamp;
    started_at: NullableTimestamp;
    finished_at: NullableTimestamp;
  };
  /** The tool calls the host saw the model request in a conversation, and whether each was answered. */
  run_calls: {
    conversation: string;
    call_id: string;
    name: string;
    state: 'open' | 'settled';
    proposed: Defaulted<boolean>;
    subject: string | null;
  };
  /** Each model-proxy ledger line charged to a task, once. */
  run_spend: {
    ledger_id: string;
    run_id: string;
    task_id: string;
    sandbox_id: string;
    cost_usd: number;
    at: Timestamp;
  };
  team_memory: {
    id: Generated<string>;
    team_name: string;
    run_id: string;
    text: string;
    created_at: Timestamp;
  };
}
