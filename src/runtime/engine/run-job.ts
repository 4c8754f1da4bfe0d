import { Type } from 'typebox';
import type { Db } from '../../db/database.ts';
import { jobType, type JobHandler } from '../../queue/queue.ts';
import type { RunEngine } from './engine.ts';

/** The engine's work on one run: queued whenever a run has something new to do. It may run twice; the run's lease keeps one driver. */
export const runAdvance = jobType('run.advance', Type.Object({ run_id: Type.String({ minLength: 1, maxLength: 64 }) }), { maxAttempts: 50 });

export function runJobHandlers(engine: RunEngine, db: Db): Record<string, JobHandler> {
  return {
    [runAdvance.kind]: runAdvance.handler(async (p, ctx) => {
      const forward = await engine.advance(p.run_id, ctx.signal);
      if (!forward) return;
      // Keyed by this job: performed again (a lost lease, a crash before it was marked done), it
      // forwards once; a later job of the run that lands on the wrong host forwards anew.
      const job = await runAdvance.enqueue(db, { run_id: p.run_id }, { key: `run.advance:${p.run_id}:from:${ctx.id}:to:${forward.forwardTo}`, target: forward.forwardTo });
      ctx.logger.info({ run: p.run_id, host: forward.forwardTo, forwarded_job: job.id }, 'run forwarded to the worker of the host its sandbox is placed on');
    }),
  };
}
