import { Type } from 'typebox';
import { reasonForPeople } from '../../errors/problems.ts';
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
      // In words: a Problem's detail or an adapter's reason for people, never another exception's text.
      if (ctx.attempt >= ctx.maxAttempts) await deps.webhooks.failed(p.delivery, reasonForPeople(err, `its work failed ${ctx.attempt} times with an unexpected error (${err instanceof Error ? err.name : 'not an Error'}); the service log has the details`));
      throw err;
    }
  },
});
