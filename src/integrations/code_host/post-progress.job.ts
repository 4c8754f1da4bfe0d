import { Type } from 'typebox';
import { defineJob } from '../../queue/queue.ts';
import type { Surface } from '../surface.ts';

/** A progress comment on the issue a run came from (started, reopened by a follow-up, a question waiting, finished). */
export const postProgressJob = defineJob({
  kind: 'code_host.post-progress',
  payload: Type.Object({
    run_id: Type.String({ minLength: 1, maxLength: 64 }),
    event: Type.Union([Type.Literal('started'), Type.Literal('resumed'), Type.Literal('waiting'), Type.Literal('finished')]),
    seq: Type.Integer({ minimum: 0 }),
  }),
  perform: (surface: Pick<Surface, 'progress'>, p) => surface.progress(p.run_id, p.event, p.seq),
});
