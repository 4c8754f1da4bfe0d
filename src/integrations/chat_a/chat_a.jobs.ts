import { Type } from 'typebox';
import { jobType, type JobHandler } from '../../queue/queue.ts';
import { chatJobHandlers } from '../chat/chat.jobs.ts';
import type { ChatAService } from './chat_a.service.ts';

/** Sets the role bots' display names and pictures from their agents; queued at each chat_a settings change that leaves it enabled. */
export const SyncRoleBots = jobType('chat_a.role_bots', Type.Object({ generation: Type.Integer({ minimum: 0 }) }));

export function chatAJobHandlers(chatA: ChatAService & { core: Parameters<typeof chatJobHandlers>[0] }): Record<string, JobHandler> {
  return {
    [SyncRoleBots.kind]: SyncRoleBots.handler(async () => void (await chatA.syncRoleBots())),
    // The chat core's jobs (its messages and run threads) run where chat_a's do.
    ...chatJobHandlers(chatA.core),
  };
}
