import { Type } from 'typebox';
import { jobType, type JobHandler } from '../../queue/queue.ts';
import type { TrackerService } from './tracker.service.ts';

/** A note on the issue a run came from (started, resumed, a question, delivered or failed), posted once. */
export const TrackerProgress = jobType(
  'tracker.progress',
  Type.Object({
    surface: Type.Union([Type.Literal('tracker_a'), Type.Literal('tracker_b')]),
    run_id: Type.String({ minLength: 1, maxLength: 64 }),
    event: Type.Union([Type.Literal('started'), Type.Literal('resumed'), Type.Literal('waiting'), Type.Literal('finished')]),
    seq: Type.Integer({ minimum: 0 }),
  }),
);

/** How many attempts a succeeded run's note waits for its pull request (the queue's backoff: about four minutes in all). */
const PULL_REQUEST_WAIT_ATTEMPTS = 8;

export function trackerJobHandlers(trackers: Partial<Record<'tracker_a' | 'tracker_b', TrackerService>>): Record<string, JobHandler> {
  return {
    [TrackerProgress.kind]: TrackerProgress.handler(async (p, ctx) => {
      const tracker = trackers[p.surface];
      if (!tracker) throw new Error(`a ${p.surface} note was queued on a process without the ${p.surface} adapter`);
      await tracker.progress(p.run_id, p.event, p.seq, { lastAttempt: ctx.attempt >= Math.min(ctx.maxAttempts, PULL_REQUEST_WAIT_ATTEMPTS) });
    }),
  };
}
