import { Type } from 'typebox';
import { defineJob } from '../../queue/queue.ts';
import type { TrackerService } from './tracker.service.ts';

/** How many attempts a succeeded run's note waits for its pull request (the queue's backoff: a few minutes in all). */
const PULL_REQUEST_WAIT_ATTEMPTS = 8;

/** A note on the tracker issue a run came from (started, resumed, a question, delivered or failed), posted once. */
export const postProgressJob = defineJob({
  kind: 'tracker.post-progress',
  payload: Type.Object({
    surface: Type.Union([Type.Literal('tracker_a'), Type.Literal('tracker_b')]),
    run_id: Type.String({ minLength: 1, maxLength: 64 }),
    event: Type.Union([Type.Literal('started'), Type.Literal('resumed'), Type.Literal('waiting'), Type.Literal('finished')]),
    seq: Type.Integer({ minimum: 0 }),
  }),
  perform: (trackers: Record<'tracker_a' | 'tracker_b', Pick<TrackerService, 'progress'>>, p, ctx) =>
    trackers[p.surface].progress(p.run_id, p.event, p.seq, { lastAttempt: ctx.attempt >= Math.min(ctx.maxAttempts, PULL_REQUEST_WAIT_ATTEMPTS) }),
});
