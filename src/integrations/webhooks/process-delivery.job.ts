import { Type } from 'typebox';
import { defineJob } from '../../queue/queue.ts';
import type { WebhooksService } from './webhooks.service.ts';

/** A verified delivery's work (a task, a reply, a pull request recorded): one job per delivery id. */
export const processDeliveryJob = defineJob({
  kind: 'webhooks.process-delivery',
  payload: Type.Object({ delivery: Type.String({ pattern: '^[0-9]{1,20}$' }) }),
  async perform(deps: { webhooks: Pick<WebhooksService, 'process' | 'failed'> }, p, ctx) {
    try {
      await deps.webhooks.process(p.delivery);
    } catch (err) {
      // The list of deliveries says when one's work gave up, not only the job table.
      if (ctx.attempt >= ctx.maxAttempts) await deps.webhooks.failed(p.delivery, err instanceof Error ? err.message : String(err));
      throw err;
    }
  },
});
