import type { Component } from '../components.ts';
import { jobHandlers, jobLanes } from '../jobs.ts';
import { createJobRunner } from '../queue/runner.ts';
import { startWorkerParts } from '../services.ts';
import { startSpanExport } from '../telemetry/outbox.ts';

/**
 * The worker: performs queued jobs (side effects that leave the process, after the
 * transaction that asked for them commits) and drives runs, on the sandbox host of this
 * machine. Several workers can share one PostgreSQL. Its sandbox host and run engine are
 * wired in the composition root (src/services.ts); its jobs are listed in src/jobs.ts.
 */
export const workerComponent: Component = {
  name: 'worker',
  async start(ctx) {
    const parts = await startWorkerParts(ctx);
    const { host } = parts;
    const runner = createJobRunner({
      db: ctx.db,
      logger: ctx.logger,
      metrics: ctx.metrics,
      handlers: jobHandlers(parts),
      concurrency: parts.config.jobConcurrency,
      // Runs, and the chat servers' jobs, have slots of their own: a slow chat server never holds a run up.
      lanes: jobLanes(parts.config),
      leaseMs: parts.config.jobLeaseSeconds * 1000,
      target: { id: host.id, alive: () => host.liveHosts() },
      // The runner's hourly prune: refused webhook deliveries are kept 30 days; chat uploads no
      // message links, SERVICE_CHAT_DELETE_UNCLAIMED_UPLOADS_DAYS (and stored files no upload has, a day).
      housekeeping: [
        { what: 'refused webhook deliveries', run: () => ctx.services.webhooks.pruneRefused() },
        { what: 'unclaimed chat uploads', run: () => ctx.services.chat.uploads.deleteUnclaimed() },
      ],
    });
    await runner.start();
    // Run traces wait in the outbox for the collector (src/telemetry/outbox.ts).
    const spans = parts.config.otlpEndpoint ? startSpanExport({ db: ctx.db, endpoint: parts.config.otlpEndpoint, logger: ctx.logger }) : null;
    // chat_a's and chat_b's messages (mentions, threads, slash commands, buttons) become work while each is enabled.
    const chatInbound = ctx.services.chatA.startInbound();
    const chatBInbound = ctx.services.chatB.startInbound();
    return {
      stop: async () => {
        await chatInbound.stop();
        await chatBInbound.stop();
        await runner.stop();
        await spans?.stop();
        parts.engine.stop();
        await host.stop();
      },
    };
  },
};
