import { Type } from 'typebox';
import { jobType, type JobHandler } from '../../queue/queue.ts';
import type { RunEngine } from './engine.ts';

/** The engine's work on one run: queued whenever a run has something new to do. It may run twice; the run's lease keeps one driver. */
export const runAdvance = jobType('run.advance', Type.Object({ run_id: Type.String({ minLength: 1, maxLength: 64 }) }), { maxAttempts: 50 });

export function runJobHandlers(engine: RunEngine): Record<string, JobHandler> {
  return { [runAdvance.kind]: runAdvance.handler((p, ctx) => engine.advance(p.run_id, ctx.signal)) };
}
