import { Type } from 'typebox';
import { defineJob } from '../../queue/queue.ts';
import type { ChatAService } from './chat_a.service.ts';

/** Sets the role bots' display names and pictures from their agents; queued at each chat_a settings change that leaves it enabled. */
export const syncRoleBotsJob = defineJob({
  kind: 'chat_a.sync-role-bots',
  payload: Type.Object({ generation: Type.Integer({ minimum: 0 }) }),
  async perform(chatA: Pick<ChatAService, 'syncRoleBots'>) {
    await chatA.syncRoleBots();
  },
});
