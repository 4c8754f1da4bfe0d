import type { Component } from '../components.ts';
import { deploymentCaCertificate } from '../gateway/ca.ts';
import { egressEventsOf } from '../gateway/events.ts';
import { pushesOf } from '../gateway/pushes.ts';
import { sandboxSpendOf } from '../modelproxy/sandbox-spend.ts';
import { BUILTIN_HOSTS } from '../gateway/server.ts';
import { createJobRunner } from '../queue/runner.ts';
import { createRunEngine, PlacedElsewhere } from './engine/engine.ts';
import { roleSetup } from './engine/role-config.ts';
import { proposalJobHandlers } from './engine/proposals.ts';
import { runAdvance, runJobHandlers } from './engine/run-job.ts';
import { MICROVM_RUNTIME_ARGV, RUNTIME_ARGV, RUNTIME_MOUNTS, RUNTIME_NODE } from './engine/runtime-install.ts';
import { prepareWorkspace } from './engine/workspace.ts';
import { traceJobHandlers } from '../telemetry/traces.ts';
import { jobHandlers } from './jobs.ts';
import { startSandboxHost } from './sandboxes/host.ts';
import { reachableSandboxDir } from './sandboxes/sandbox-dir.ts';
import { createDestroyTeamSandboxes, destroyTeamSandboxesJob } from './sandboxes/jobs/destroy-team-sandboxes.ts';
import { createLocalProvider } from './sandboxes/providers/local.ts';
import type { ExecRequest } from './sandboxes/provider.ts';
import { kvmUsable } from './sandboxes/providers/microvm/kvm.ts';
import { microvmProviderFromConfig } from './sandboxes/providers/microvm/index.ts';

/** A run's hold on a role's sandbox: one per run and role, so resuming work finds the same sandbox. */
const claimOf = (runId: string, role: string) => `${runId}.${role}`;

/**
 * The worker: performs queued jobs (side effects that leave the process, after the
 * transaction that asked for them commits) and drives runs, on the sandbox host of this
 * machine. Several workers can share one PostgreSQL.
 */

export const workerComponent: Component = {
  name: 'worker',
  async start(ctx) {
    const { db, logger, services } = ctx;
    // Sandboxes go where the unprivileged sandbox user can reach them (not under a closed /root).
    const place = await reachableSandboxDir(ctx.config);
    if (place.moved) logger.info(place.moved);
    const config = { ...ctx.config, sandboxDir: place.dir };
    const caPem = await deploymentCaCertificate(db, ctx.cipher);
    const local = config.sandboxDir ? createLocalProvider({ root: config.sandboxDir, gatewayPort: config.gatewayPort, logger, readOnly: RUNTIME_MOUNTS, node: RUNTIME_NODE }) : null;
    const microvm = microvmProviderFromConfig(config, { logger, metrics: ctx.metrics });
    // Without KVM a microvm runs under TCG, unless the operator chose the local provider for it.
    const microvmUsable = config.sandboxMicrovmFallback === 'local' ? await kvmUsable() : true;
    const host = await startSandboxHost({
      config,
      db,
      logger,
      metrics: ctx.metrics,
      caPem,
      local,
      microvm,
      microvmUsable,
      teams: services.sandboxDirectory,
      // Runs that waited for room on a host go on: their engine is queued again.
      wake: async (runIds) => {
        for (const runId of runIds) await runAdvance.enqueue(db, { run_id: runId });
      },
    });
    const destroy = createDestroyTeamSandboxes({ db, deadAfterSeconds: config.sandboxHostDeadAfter, host });

    const engine = createRunEngine({
      runs: services.runJournal,
      logger,
      owner: host.id,
      runtimeArgv: [...RUNTIME_ARGV],
      openPullRequest: (runId, req) => services.codeHostDelivery.openFor(runId, req),
      egressRefusals: (sandboxId, afterId, since) => egressEventsOf(db, sandboxId, afterId, 100, since),
      gitPushes: (sandboxId, afterId, since) => pushesOf(db, sandboxId, afterId, 100, since),
      modelSpend: (sandboxId, afterId, since) => sandboxSpendOf(db, sandboxId, afterId, since),
      async configFor(work) {
        return (await setup(work)).config;
      },
      releaseSandbox: (runId, role) => host.release(claimOf(runId, role)),
      async sandboxFor(work) {
        const { plan } = await setup(work);
        const claimId = claimOf(work.run.id, work.task.role);
        const placement = await host.place({ teamId: work.team.id, role: work.task.role, claimId, runId: work.run.id });
        // Only the owning host execs in a sandbox: the run goes to that host's worker.
        if (placement.hostId !== host.id) throw new PlacedElsewhere(placement.hostId, `sandbox ${placement.sandboxId} of role "${work.task.role}" is placed on host ${placement.hostId}`);
        const status = await host.ensureRunning(placement.sandboxId);
        // Node's fetch honours HTTP(S)_PROXY only when asked: the agent runtime's model calls go through the gateway.
        const exec = (req: ExecRequest) => host.exec(placement.sandboxId, { ...req, env: { NODE_USE_ENV_PROXY: '1', ...req.env } });
        await prepareWorkspace({ exec, copyIn: (files) => host.copyIn(placement.sandboxId, files) }, plan);
        return {
          id: placement.sandboxId,
          exec,
          coldBooted: placement.replaced || (Boolean(status.coldBooted) && work.task.state === 'running'),
          // The engine reads it around a turn, to say when a runtime died of the sandbox's memory limit.
          oomKills: () => host.oomKills(placement.sandboxId),
          ...(placement.provider === 'microvm' ? { runtimeArgv: [...MICROVM_RUNTIME_ARGV] } : {}),
        };
      },
    });

    async function setup(work: Parameters<Parameters<typeof createRunEngine>[0]['configFor']>[0]) {
      return roleSetup(
        {
          agentVersion: (agent, version) => services.agents.versionForRun(agent, version),
          documents: (role) => services.documents.forRole(role).then((docs) => docs.map((d) => ({ name: d.name, path: d.path, description: d.description, media_type: d.media_type, size_bytes: d.size_bytes, scope: d.scope, content: d.content }))),
          skill: (name) => services.skills.get(name).catch(() => null),
          contextWindow: (model) => ctx.models.get(model)?.context_window ?? 128_000,
          modelBaseUrl: `http://${BUILTIN_HOSTS.llm}/v1`,
          mcpServers: async (team, role) => (await services.mcpServers.usableBy(team, role)).map((s) => s.name),
          mcpBaseUrl: `http://${BUILTIN_HOSTS.mcp}`,
        },
        work,
      );
    }

    const handlers = {
      ...jobHandlers({ db, proxy: services.proxy, webhooks: services.webhooks, codeHostDelivery: services.codeHostDelivery }),
      [destroyTeamSandboxesJob.kind]: destroyTeamSandboxesJob.handler((p) => destroy.destroyTeamSandboxes(p.team_id).then(() => undefined)),
      ...runJobHandlers(engine, db),
      ...traceJobHandlers({ endpoint: config.otlpEndpoint, logger }),
      ...proposalJobHandlers({
        runs: services.runJournal,
        team: (name) => services.teams.forRun(name),
        proposeSkill: (actor, team, input) => services.teams.proposeSkill(actor, team, input),
        proposeMcpServer: (actor, team, input) => services.mcpServers.propose(actor, team, input),
      }),
    };
    const runner = createJobRunner({
      db,
      logger,
      metrics: ctx.metrics,
      handlers,
      concurrency: config.jobConcurrency,
      leaseMs: config.jobLeaseSeconds * 1000,
      target: { id: host.id, alive: () => host.liveHosts() },
    });
    await runner.start();
    // chat_a's messages (mentions, threads) become work while chat_a is enabled.
    const chatInbound = services.chatA.startInbound();
    return {
      stop: async () => {
        await chatInbound.stop();
        await runner.stop();
        await host.stop();
      },
    };
  },
};
