import { syncRoleBotsJob } from './integrations/chat_a/sync-role-bots.job.ts';
import { handleMessageJob } from './integrations/chat/handle-message.job.ts';
import { mirrorThreadJob } from './integrations/chat/mirror-thread.job.ts';
import { deliverRunJob } from './integrations/code_host/deliver-run.job.ts';
import { postProgressJob } from './integrations/code_host/post-progress.job.ts';
import { processDeliveryJob } from './integrations/webhooks/process-delivery.job.ts';
import { postProgressJob as postTrackerProgressJob } from './integrations/tracker/post-progress.job.ts';
import { revokeKeyJob } from './console/teams/jobs/revoke-key.job.ts';
import { revokeTeamKeysJob } from './console/teams/jobs/revoke-team-keys.job.ts';
import { syncProxyJob } from './console/teams/jobs/sync-proxy.job.ts';
import { byKind, type JobHandler, type KindHandler } from './queue/queue.ts';
import { advanceRunJob } from './runtime/engine/advance-run.job.ts';
import { storeProposalJob } from './runtime/engine/store-proposal.job.ts';
import { destroyTeamJob } from './runtime/sandboxes/jobs/destroy-team.job.ts';
import type { WorkerParts } from './services.ts';
import { exportSpansJob } from './telemetry/export-spans.job.ts';

/** One row of the table: a job, and the pieces of the worker it is performed with. */
const row = <D>(job: { kind: string; handler(deps: D): KindHandler }, deps: (w: WorkerParts) => D) => ({ kind: job.kind, handler: (w: WorkerParts) => job.handler(deps(w)) });

/**
 * Every kind of job the worker performs, one row each. A job is one `*.job.ts` file in the
 * module that owns it: the file `<verb>-<object>.job.ts` exports `<verb><Object>Job`, of kind
 * `<module>.<verb>-<object>` (a kind renamed is renamed in queued rows by a migration).
 */
const JOBS = [
  row(revokeKeyJob, (w) => ({ proxy: w.services.proxy })),
  row(revokeTeamKeysJob, (w) => ({ proxy: w.services.proxy })),
  row(syncProxyJob, (w) => ({ db: w.db, proxy: w.services.proxy })),
  row(destroyTeamJob, (w) => w.sandboxes),
  row(advanceRunJob, (w) => ({ engine: w.engine, db: w.db })),
  row(storeProposalJob, (w) => ({
    runs: w.services.runJournal,
    team: (name: string) => w.services.teamsDirectory.forRun(name),
    proposeSkill: (actor, team, input) => w.services.teams.proposeSkill(actor, team, input),
    proposeMcpServer: (actor, team, input) => w.services.mcpServers.propose(actor, team, input),
  })),
  row(exportSpansJob, (w) => ({ endpoint: w.config.otlpEndpoint, logger: w.logger })),
  row(processDeliveryJob, (w) => ({ webhooks: w.services.webhooks })),
  row(postProgressJob, (w) => w.services.surfaces.code_host),
  row(deliverRunJob, (w) => w.services.codeHostDelivery),
  row(syncRoleBotsJob, (w) => w.services.chatA),
  row(postTrackerProgressJob, (w) => ({ tracker_a: w.services.trackerA, tracker_b: w.services.trackerB })),
  row(handleMessageJob, (w) => w.services.chatCore),
  row(mirrorThreadJob, (w) => w.services.chatCore),
];

/** The kind of every job, in the table's order. */
export const JOB_KINDS: readonly string[] = JOBS.map((j) => j.kind);

/** The runner's handler of every kind of job, performed with the worker's pieces. */
export function jobHandlers(w: WorkerParts): Record<string, JobHandler> {
  return byKind(JOBS.map((j) => j.handler(w)));
}

/**
 * Kinds with job slots of their own (the runner's lanes), so that a slow outside service holds up
 * only its own kind of work: a run holds its slot for as long as its agents work (its own lane,
 * SERVICE_RUN_CONCURRENCY), and a chat server that answers slowly or asks to wait holds the chat
 * jobs' slots, not the trackers', the code host's or the keys' (each lane SERVICE_JOB_CONCURRENCY).
 */
export function jobLanes(c: { runConcurrency: number; jobConcurrency: number }): Array<{ kinds: string[]; concurrency: number }> {
  return [
    { kinds: [advanceRunJob.kind], concurrency: c.runConcurrency },
    { kinds: [handleMessageJob.kind, mirrorThreadJob.kind, syncRoleBotsJob.kind], concurrency: c.jobConcurrency },
  ];
}
