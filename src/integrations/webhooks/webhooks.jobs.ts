import { Type } from 'typebox';
import { jobType, type JobHandler } from '../../queue/queue.ts';
import { chatAJobHandlers } from '../chat_a/chat_a.jobs.ts';
import { trackerJobHandlers } from '../tracker/tracker.jobs.ts';
import type { CodeHostDelivery } from './code-host.delivery.ts';
import type { WebhooksService } from './webhooks.service.ts';

/** A verified delivery's work (a task, a reply, a pull request recorded): one job per delivery id. */
export const ProcessDelivery = jobType('webhook.process', Type.Object({ delivery: Type.String({ pattern: '^[0-9]{1,20}$' }) }));

/** A progress comment on the issue a run came from (started, reopened by a follow-up, a question waiting, finished). */
export const PostProgress = jobType(
  'code_host.progress',
  Type.Object({
    run_id: Type.String({ minLength: 1, maxLength: 64 }),
    event: Type.Union([Type.Literal('started'), Type.Literal('resumed'), Type.Literal('waiting'), Type.Literal('finished')]),
    seq: Type.Integer({ minimum: 0 }),
  }),
);

/** A succeeded run's delivery: its pull request opened, then the issue told. */
export const DeliverRun = jobType('code_host.deliver', Type.Object({ run_id: Type.String({ minLength: 1, maxLength: 64 }), seq: Type.Integer({ minimum: 0 }) }));

export function webhookJobHandlers(deps: { webhooks: WebhooksService; delivery: CodeHostDelivery }): Record<string, JobHandler> {
  return {
    [ProcessDelivery.kind]: ProcessDelivery.handler(async (p, ctx) => {
      try {
        await deps.webhooks.process(p.delivery);
      } catch (err) {
        // The list of deliveries says when one's work gave up, not only the job table.
        if (ctx.attempt >= ctx.maxAttempts) await deps.webhooks.failed(p.delivery, err instanceof Error ? err.message : String(err));
        throw err;
      }
    }),
    [PostProgress.kind]: PostProgress.handler((p) => deps.delivery.progress(p.run_id, p.event, p.seq)),
    [DeliverRun.kind]: DeliverRun.handler((p) => deps.delivery.deliver(p.run_id, p.seq)),
    // The chat_a adapter's jobs are registered with these (the worker's list of job kinds).
    ...(deps.webhooks.chatA ? chatAJobHandlers(deps.webhooks.chatA) : {}),
    ...trackerJobHandlers(deps.webhooks.trackers),
  };
}
