import { stateText, type RunSummary } from './types.ts';

/** A run's state as colour and words, so it reads without colour too. */
export function RunBadge({ run }: { run: Pick<RunSummary, 'state' | 'waiting_for'> }) {
  return <span className={`run-state run-state-${run.state}`}>{stateText(run)}</span>;
}
