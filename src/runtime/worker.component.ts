import type { Component } from '../components.ts';
import { createModelProxyClient } from '../modelproxy/client.ts';
import { createJobRunner } from '../queue/runner.ts';
import { jobHandlers } from './jobs.ts';

/**
 * The worker: performs queued jobs (side effects that leave the process, after the
 * transaction that asked for them commits). Several workers can share one PostgreSQL.
 */
export const workerComponent: Component = {
  name: 'worker',
  async start(ctx) {
    const handlers = jobHandlers({ db: ctx.db, proxy: createModelProxyClient(ctx.config) });
    const runner = createJobRunner({ db: ctx.db, logger: ctx.logger, metrics: ctx.metrics, handlers, concurrency: ctx.config.jobConcurrency });
    await runner.start();
    return { stop: () => runner.stop() };
  },
};
