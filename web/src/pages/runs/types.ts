/** The runs routes' shapes, as src/console/runs/runs.schemas.ts declares them. */
import type { PostKind, RunState, RunSummary } from '../../types.ts';

export type { Post, PostKind, Run, RunState, RunSummary, RunTask, Trace, TraceSpan } from '../../types.ts';

export const RUN_STATES: RunState[] = ['running', 'waiting', 'succeeded', 'failed', 'cancelled'];
export const ENDED: ReadonlySet<RunState> = new Set(['succeeded', 'failed', 'cancelled']);

export const POST_KINDS: readonly PostKind[] = ['notice', 'working', 'question', 'answer', 'completed', 'failed', 'canceled', 'task', 'reply', 'artifact', 'command_result'];

export const usd = (n: number) => (n < 0.01 && n > 0 ? `$${n.toFixed(4)}` : `$${n.toFixed(2)}`);

/** A run's state in words a person reads at a glance (the badge also has a colour). */
export function stateText(run: Pick<RunSummary, 'state' | 'waiting_for'>): string {
  if (run.state === 'waiting') return run.waiting_for?.kind === 'confirmation' ? 'waiting: needs approval' : 'waiting: question';
  return run.state;
}
