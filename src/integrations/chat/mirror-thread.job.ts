import { Type } from 'typebox';
import { defineJob } from '../../queue/queue.ts';
import type { ChatCore } from './core.ts';

/** A run's chat thread catches up with the run's posts (queued with each change of the run). The job is the owner of the posts it makes: its retries may look for what it made before. */
export const mirrorThreadJob = defineJob({
  kind: 'chat.mirror-thread',
  payload: Type.Object({ run_id: Type.String({ minLength: 1, maxLength: 100 }) }),
  async perform(core: Pick<ChatCore, 'mirror'>, { run_id }, ctx) {
    await core.mirror(run_id, `job:${ctx.id}`);
  },
});
