import { teamJobHandlers } from '../console/teams/jobs/index.ts';
import type { CodeHostDelivery } from '../integrations/webhooks/code-host.delivery.ts';
import { webhookJobHandlers } from '../integrations/webhooks/webhooks.jobs.ts';
import type { WebhooksService } from '../integrations/webhooks/webhooks.service.ts';
import type { Db } from '../db/database.ts';
import type { ModelProxyClient } from '../modelproxy/client.ts';
import type { JobHandler } from '../queue/queue.ts';

/** Every kind of job the worker performs, from the modules that own the effects. */
export function jobHandlers(deps: { db: Db; proxy: ModelProxyClient; webhooks?: WebhooksService; codeHostDelivery?: CodeHostDelivery }): Record<string, JobHandler> {
  const { webhooks, codeHostDelivery } = deps;
  return { ...teamJobHandlers(deps), ...(webhooks && codeHostDelivery ? webhookJobHandlers({ webhooks, delivery: codeHostDelivery }) : {}) };
}
