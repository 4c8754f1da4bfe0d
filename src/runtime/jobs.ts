import { teamJobHandlers } from '../console/teams/jobs/index.ts';
import type { Db } from '../db/database.ts';
import type { ModelProxyClient } from '../modelproxy/client.ts';
import type { JobHandler } from '../queue/queue.ts';

/** Every kind of job the worker performs, from the modules that own the effects. */
export function jobHandlers(deps: { db: Db; proxy: ModelProxyClient }): Record<string, JobHandler> {
  return { ...teamJobHandlers(deps) };
}
