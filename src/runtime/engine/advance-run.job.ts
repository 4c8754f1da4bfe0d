import { Type } from 'typebox';
import type { Db } from '../../db/database.ts';
import { defineJob } from '../../queue/queue.ts';
import type { RunEngine } from './engine.ts';

/** The engine's work on one run: queued whenever a run has something new to do. It may run twice; the run's lease keeps one driver. */
export const advanceRunJob = defineJob({
  kind: 'engine.advance-run',
  payload: Type.Object({ run_id: Type.String({ minLength: 1, maxLength: 64 }) }),
  maxAttempts: 50,
  async perform(deps: { engine: Pick<RunEngine, 'advance'>; db: Db }, p, ctx) {
    const forward = await deps.engine.advance(p.run_id, ctx.signal);
    if (!forward) return;
    // Keyed by this job: performed again (a lost lease, a crash before it was marked done), it
    // forwards once; a later job of the run that lands on the wrong host forwards anew.
    const job = await advanceRunJob.enqueue(deps.db, { run_id: p.run_id }, { key: `${advanceRunJob.kind}:${p.run_id}:from:${ctx.id}:to:${forward.forwardTo}`, target: forward.forwardTo });
    ctx.logger.info({ run: p.run_id, host: forward.forwardTo, forwarded_job: job.id }, 'run forwarded to the worker of the host its sandbox is placed on');
  },
});
