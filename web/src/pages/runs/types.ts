/** The runs routes' shapes, as src/console/runs/runs.schemas.ts declares them. */

export type RunState = 'running' | 'waiting' | 'succeeded' | 'failed' | 'cancelled';
export const RUN_STATES: RunState[] = ['running', 'waiting', 'succeeded', 'failed', 'cancelled'];
export const ENDED: ReadonlySet<RunState> = new Set(['succeeded', 'failed', 'cancelled']);

export const POST_KINDS = ['notice', 'working', 'question', 'answer', 'completed', 'failed', 'canceled', 'task', 'reply', 'artifact', 'command_result'] as const;
export type PostKind = (typeof POST_KINDS)[number];

export interface RunSummary {
  id: string;
  team: string;
  work_item_id: string;
  state: RunState;
  surface: string;
  text: string;
  lead: string;
  cost_usd: number;
  waiting_for: { role: string; kind: 'question' | 'confirmation'; since: string } | null;
  open_question: { seq: number; role: string; text: string } | null;
  failure_reason: string | null;
  created_by: string;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

export interface RunTask {
  id: string;
  role: string;
  state: 'queued' | 'running' | 'waiting' | 'done' | 'failed' | 'cancelled';
  agent_version: number | null;
  iterations: number;
  cost_usd: number;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface Run extends RunSummary {
  tasks: RunTask[];
  delivery: { branch: string | null; commit: string | null; pull_request: { url: string; number: number | null; state: string | null } | null } | null;
  agent_versions: Record<string, number>;
  chat_thread_url: string | null;
  jaeger_url: string | null;
}

export interface Post {
  seq: number;
  kind: PostKind;
  role: string | null;
  text: string;
  data: Record<string, unknown>;
  created_at: string;
}

export interface TraceSpan {
  trace_id: string;
  span_id: string;
  parent_span_id: string | null;
  name: string;
  start_time: string;
  duration_ms: number;
  attributes: Record<string, unknown>;
}
export interface Trace {
  run_id: string;
  trace_id: string | null;
  spans: TraceSpan[];
}

export const usd = (n: number) => (n < 0.01 && n > 0 ? `$${n.toFixed(4)}` : `$${n.toFixed(2)}`);

/** A run's state in words a person reads at a glance (the badge also has a colour). */
export function stateText(run: Pick<RunSummary, 'state' | 'waiting_for'>): string {
  if (run.state === 'waiting') return run.waiting_for?.kind === 'confirmation' ? 'waiting: needs approval' : 'waiting: question';
  return run.state;
}
