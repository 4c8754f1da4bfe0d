import { Value } from 'typebox/value';
import type { Db } from '../../db/database.ts';
import { settleDelivery } from '../webhooks/webhooks.store.ts';
import type { Surface } from '../surface.ts';
import { NO_TEAM, type ChatCore } from './core.ts';
import { Message } from './handle-message.job.ts';
import type { ChatMessageIn, ChatSurfaceKind } from './ports.ts';

/**
 * A chat surface (chat_a, chat_b) as every surface is reached (src/integrations/surface.ts),
 * through the chat core: `takeIn` does a recorded delivery's message (chat_a's slash command)
 * and settles the delivery with what it did; `progress` queues the run's thread catching up;
 * `originOf` is the run's thread and its permalink. The core's lower port to each adapter
 * (`ChatSurface`, ports.ts) stays as it is.
 */

/** How a delivery is settled after its message's work: what the message did, as the list of deliveries says it. */
export function settlementOf(effect: string | null, runId: string | null): { outcome: 'processed' | 'ignored' | 'refused'; detail: string; run_id: string | null } {
  if (effect === null) return { outcome: 'ignored', detail: 'the message had no effect', run_id: null };
  if (effect.startsWith('refused: ')) return { outcome: 'refused', detail: effect.slice('refused: '.length), run_id: runId };
  if (effect === 'no_team') return { outcome: 'refused', detail: NO_TEAM, run_id: null };
  if (effect === 'ignored') return { outcome: 'ignored', detail: 'not addressed to the bot, and not in a run\'s thread', run_id: null };
  const command = /^command:(.+)$/.exec(effect)?.[1];
  const detail =
    effect === 'run' ? `became run ${runId}`
    : effect === 'answer' ? `answered the open question of run ${runId}`
    : effect === 'follow_up' ? `a follow-up of run ${runId}`
    : effect === 'cancel' ? `cancelled run ${runId}`
    : command ? `the command \`${command}\` was answered`
    : effect;
  return { outcome: 'processed', detail, run_id: runId };
}

export interface ChatSurfaceOptions {
  /** A delivery whose payload is not a chat message (one queued by an earlier version): its own work, settling it. */
  otherPayload?: (deliveryRow: string, payload: unknown) => Promise<void>;
}

export function chatSurfaceOf(deps: { db: Db; core: () => ChatCore }, kind: ChatSurfaceKind, opts: ChatSurfaceOptions = {}): Surface {
  const { db } = deps;
  return {
    kind,

    async takeIn(deliveryRow, { payload }) {
      if (!Value.Check(Message, payload) || payload.surface !== kind) {
        if (opts.otherPayload) return opts.otherPayload(deliveryRow, payload);
        return settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: `the delivery carries no ${kind} message` });
      }
      const m = payload as ChatMessageIn;
      const core = deps.core();
      // Seen once whatever the retries (the route may have recorded it already); its work done once.
      await core.record(m);
      await core.handle(m);
      const { effect, run_id } = await core.effectOf(m);
      await settleDelivery(db, deliveryRow, settlementOf(effect, run_id));
    },

    progress: (runId, progress, seq) => deps.core().progress(runId, progress, seq),

    originOf: async (runId) => {
      const origin = await deps.core().originOf(runId);
      return origin && origin.surface === kind ? origin : null;
    },
  };
}
