import type { Logger } from 'pino';
import { createChatServices } from './chat/app.ts';
import type { Config } from './config.ts';
import { createAgentsService } from './console/agents/agents.service.ts';
import { createCatalogService } from './console/catalog/catalog.service.ts';
import { createDestinationsService } from './console/destinations/destinations.service.ts';
import { createDocumentsService } from './console/documents/documents.service.ts';
import { createCheckpointsService } from './console/environments/checkpoints.service.ts';
import { createEnvironmentsService } from './console/environments/environments.service.ts';
import { createImagesService } from './console/environments/images.service.ts';
import { createMcpServersService } from './console/mcp-servers/mcp-servers.service.ts';
import { createReferences } from './references.ts';
import { createRunJournal } from './console/runs/runs.journal.ts';
import { createRunsService } from './console/runs/runs.service.ts';
import { createRunSteps, type RunsDeps } from './console/runs/runs.steps.ts';
import { createSessionService } from './console/session/session.service.ts';
import { createSkillsService } from './console/skills/skills.service.ts';
import { createImportService } from './console/import/import.service.ts';
import { createSpendService } from './console/spend/spend.service.ts';
import { createEgressOverridesService } from './console/teams/egress-overrides.service.ts';
import { createIntegrationsService } from './console/integrations/integrations.service.ts';
import { settingOf } from './console/integrations/kinds.ts';
import { createLinksService } from './console/teams/links.service.ts';
import { createTeamsService } from './console/teams/teams.service.ts';
import { createTeamsDirectory } from './console/teams/teams.directory.ts';
import { createTeamProvisioning } from './console/teams/teams.provisioning.ts';
import { createTemplatesService, type EnvironmentSnapshot } from './console/templates/templates.service.ts';
import { createUsersService } from './console/users/users.service.ts';
import type { Db } from './db/database.ts';
import type { Registry } from './metrics.ts';
import { createHooks, type RefQuery } from './hooks.ts';
import { loadModelCatalog, type ModelCatalog } from './models/catalog.ts';
import { createModelProxyClient } from './modelproxy/client.ts';
import { deploymentCaCertificate } from './gateway/ca.ts';
import { egressEventsOf, egressRefusalsOfTeam } from './gateway/events.ts';
import { pushesOf } from './gateway/pushes.ts';
import { BUILTIN_HOSTS } from './egress/builtins.ts';
import { sandboxSpendOf } from './modelproxy/sandbox-spend.ts';
import { createChatAService } from './integrations/chat_a/chat_a.service.ts';
import { createChatBService } from './integrations/chat_b/chat_b.service.ts';
import { createChatCore } from './integrations/chat/core.ts';
import { chatSurfaceOf } from './integrations/chat/surface.ts';
import type { ChatPerson } from './integrations/chat/ports.ts';
import { systemActor } from './audit/audit.ts';
import { MAX_REPLY_CHARS, MAX_TASK_CHARS } from './console/runs/runs.schemas.ts';
import { Problem } from './errors/problems.ts';
import type { CodeHostApp } from './integrations/code_host/app.ts';
import { createCodeHostDelivery } from './integrations/code_host/delivery.ts';
import { createCodeHostSurface } from './integrations/code_host/code_host.surface.ts';
import { createCodeHostInbound } from './integrations/code_host/inbound.ts';
import type { Surface, SurfaceKind } from './integrations/surface.ts';
import type { WebhookSurface } from './integrations/webhooks/surfaces.ts';
import { createWebhooksService } from './integrations/webhooks/webhooks.service.ts';
import { createRefusalCap } from './integrations/webhooks/refusal-cap.ts';
import type { TrackerKind } from './integrations/tracker/kind.ts';
import { createTrackerService } from './integrations/tracker/tracker.service.ts';
import { trackerAKind } from './integrations/tracker_a/tracker_a.ts';
import { trackerBKind } from './integrations/tracker_b/tracker_b.ts';
import { DEFAULT_JIRA_API_URL, DEFAULT_JIRA_AUTH_URL, DEFAULT_LINEAR_API_URL } from './console/integrations/kinds.ts';
import { advanceRunJob } from './runtime/engine/advance-run.job.ts';
import { createRunEngine, PlacedElsewhere, type RunEngine } from './runtime/engine/engine.ts';
import { roleSetup } from './runtime/engine/role-config.ts';
import { MICROVM_RUNTIME_ARGV, RUNTIME_ARGV, RUNTIME_MOUNTS, RUNTIME_NODE } from './runtime/engine/runtime-install.ts';
import { prepareWorkspace } from './runtime/engine/workspace.ts';
import { startSandboxHost, type SandboxHost } from './runtime/sandboxes/host.ts';
import { createDestroyTeamSandboxes, type DestroyTeamSandboxes } from './runtime/sandboxes/jobs/destroy-team.job.ts';
import type { ExecRequest } from './runtime/sandboxes/provider.ts';
import { kvmUsable } from './runtime/sandboxes/providers/microvm/kvm.ts';
import { microvmProviderFromConfig } from './runtime/sandboxes/providers/microvm/index.ts';
import { createLocalProvider } from './runtime/sandboxes/providers/local.ts';
import { reachableSandboxDir } from './runtime/sandboxes/sandbox-dir.ts';
import { storeProposalJob } from './runtime/engine/store-proposal.job.ts';
import { createRunTraces } from './telemetry/traces.ts';
import { canTakeWork } from './runtime/sandboxes/placement.ts';
import type { TeamDirectory } from './runtime/sandboxes/placement.ts';
import { createSandboxesService } from './runtime/sandboxes/sandboxes.service.ts';
import { loadCipher, type Cipher } from './secrets/cipher.ts';
import { createSecretsService } from './secrets/secrets.service.ts';

/** What is loaded once per process and handed to every component: the secrets cipher and the model catalogue. */
export interface Shared {
  cipher: Cipher;
  models: ModelCatalog;
}

/** Loads the cipher (creating the key file on a first start) and the model catalogue; `crewhouse serve` does it once. */
export function loadShared(config: Config): Shared {
  return { cipher: loadCipher(config), models: loadModelCatalog(config.models) };
}

/**
 * The composition root of every component (console, model proxy, chat, and the worker and
 * gateway to come): builds each domain service once, hands each the narrow pieces it needs,
 * and is the only place where one module is told how to react to another.
 */
export function createServices(deps: { config: Config; db: Db; logger: Logger; codeHostClock?: () => number; /** The clock the cap on unsigned webhook refusals counts minutes on (tests). */ webhooksClock?: () => number } & Shared) {
  const { config, db, cipher, models } = deps;
  const hooks = createHooks();
  // Name checks and usage counts between resource modules go through `references`, over the hooks.
  const references = createReferences(hooks);
  const secrets = createSecretsService({ db, cipher, references, hooks });
  const destinations = createDestinationsService({ db, references, devDestinations: config.egressDevDestinations });
  const images = createImagesService({ dir: config.imagesDir, logger: deps.logger });
  const checkpoints = createCheckpointsService({ hooks });
  const environments = createEnvironmentsService({ db, references, images });
  const skills = createSkillsService({ db });
  const users = createUsersService({ db, publicBaseUrl: config.publicBaseUrl });
  const sessions = createSessionService({ db, users });
  const documents = createDocumentsService({ db, hooks });
  const agents = createAgentsService({ db, references, models, documents, publicBaseUrl: config.publicBaseUrl });
  const catalog = createCatalogService({ models });
  const environmentOf = (name: string, q?: RefQuery): Promise<EnvironmentSnapshot | null> => environments.snapshot(name, q);
  const templates = createTemplatesService({ db, references, models, environmentOf });
  const proxy = createModelProxyClient(config);
  const spend = createSpendService({ proxy });
  const runsDeps: RunsDeps = {
    db,
    // Late-bound: the teams service is built after runs (it reads their activity).
    team: (name) => teamsDirectory.forRun(name),
    agentVersion: async (agent) => (await agents.versionForRun(agent)).version,
    isBudgetSpent: (team) => teams.isBudgetSpent(team),
    hostProblem: async (team) => {
      const answer = await canTakeWork(db, { deadAfterSeconds: config.sandboxHostDeadAfter }, sandboxDirectory, team);
      return answer.ok ? null : (answer.reason ?? 'no live sandbox host (and its gateway) can take the team\'s work');
    },
    advance: async (trx, runId) => void (await advanceRunJob.enqueue(trx, { run_id: runId })),
    price: (model) => {
      const alias = models.get(model);
      return { input: alias?.input_usd_per_mtok ?? 0, output: alias?.output_usd_per_mtok ?? 0 };
    },
    jaegerUrl: config.jaegerUrl,
    hooks,
    traces: createRunTraces({ endpoint: config.otlpEndpoint }),
    propose: async (trx, p) => void (await storeProposalJob.enqueue(trx, p, { key: `proposal:${p.run_id}:${p.source}` })),
    // Late-bound: the chat core is built after runs.
    threadUrl: async (runId) => (await chatCore.originOf(runId))?.url ?? null,
    // Late-bound: the surfaces are built after runs.
    originUrl: async (runId) => (await originOfRun(runId))?.url ?? null,
  };
  // The routes' side of runs and the engine's journal share the steps both take (a run's end, a new task, the post signal).
  /** Where a run from a tracker or the code host came from (its issue and link), asked of the surfaces (late-bound: they are built after runs and the chat core). */
  async function originOfRun(runId: string) {
    // Not the chats': a chat's origin of a run is its thread (chat_thread_url), a tracker run of a chat-homed team has one too.
    for (const s of [surfaces.code_host, surfaces.tracker_a, surfaces.tracker_b]) {
      const origin = await s.originOf(runId);
      if (origin) return origin;
    }
    return null;
  }
  const runSteps = createRunSteps(runsDeps);
  const runs = createRunsService(runsDeps, runSteps);
  const runJournal = createRunJournal(runsDeps, runSteps);
  const sandboxes = createSandboxesService({ db });
  const teamProvisioning = createTeamProvisioning({ db, proxy, spend, cipher });
  // A role whose agent version cannot be read shows without the agent's settings, and says why in the log.
  const teamAgentVersion = (agent: string, version?: number | null) =>
    agents.versionForRun(agent, version ?? null).catch((err) => {
      deps.logger.warn({ err, agent }, 'reading the agent version of a team role failed');
      return null;
    });
  const teamsDirectory = createTeamsDirectory({ db, agentVersion: teamAgentVersion, openKey: teamProvisioning.openKey });
  const teams = createTeamsService({
    db,
    runs,
    sandboxes,
    users,
    models,
    references,
    templates,
    agentVersion: teamAgentVersion,
    hooks,
    provisioning: teamProvisioning,
  });
  // What sandbox placement and the sandbox host's idle sweep ask of the modules that own teams, templates and environments.
  const sandboxDirectory: TeamDirectory = {
    rolePlacement: (teamId, role, q) => teamsDirectory.rolePlacement(teamId, role, q),
    roleSize: (template, version, role, q) => templates.roleSize(template, version, role, q),
    snapshot: (environment, q) => environments.snapshot(environment, q),
    leadEnvironment: (name) => teamsDirectory.leadEnvironment(name),
    sleepTimes: (ids) => teamsDirectory.sleepTimes(ids),
  };
  const links = createLinksService({ db, hooks });
  const integrations = createIntegrationsService({
    db,
    codeHostClock: deps.codeHostClock,
    secrets,
    publicBaseUrl: config.publicBaseUrl,
    logger: deps.logger,
    liveHosts: () => sandboxes.liveHostAddresses(config.sandboxHostDeadAfter),
    teamRepo: async (team) => {
      const [t, linked] = await Promise.all([teams.get(team), links.list(team).catch(() => [])]);
      return { repoUrl: t.repo_url, codeHostLink: linked.find((l) => l.surface === 'code_host')?.external_id ?? null };
    },
    chatTeams: () => teamsDirectory.homedOn('chat_a'),
    agentLook: async (agent) => {
      const row = await agents.get(agent).catch(() => null);
      if (!row) return null;
      const shown = await agents.present(row);
      return { displayName: shown.display_name, avatarUrl: shown.avatar_url };
    },
    adapterTests: { chat_a: () => chatA.test(), chat_b: () => chatB.test(), tracker_a: () => trackerA.test(), tracker_b: () => trackerB.test() },
  });
  // The chat core (the same for every chat surface): runs and teams as it needs them, posting through each surface's adapter.
  const chatActor = (p: ChatPerson) => systemActor(`${p.surface}:@${p.user_name || p.user_id}`);
  const chatCore = createChatCore({
    db,
    logger: deps.logger,
    surface: async (kind) => (kind === 'chat_a' ? chatA.chatSurface() : chatB.chatSurface()),
    runs: {
      maxTaskChars: MAX_TASK_CHARS,
      maxReplyChars: MAX_REPLY_CHARS,
      start: async (input, within) => {
        const actor = chatActor(input.by);
        const run = await runs.createRun(actor, { team: input.team, text: input.text, surface: input.by.surface, external_ref: `${input.thread.room_id}/${input.thread.message_id}`, requested_by: actor.name }, within);
        return { run_id: run.run_id };
      },
      reply: async (runId, by, input, within) => void (await runs.reply(chatActor(by), runId, input, within, by.surface)),
      cancel: async (runId, by) => void (await runs.cancel(chatActor(by), runId, by.surface)),
      get: async (runId) => {
        try {
          return (await runs.get(runId)).run;
        } catch (err) {
          if (err instanceof Problem && err.status === 404) return null;
          throw err;
        }
      },
      posts: async (runId, after, limit) => (await runs.posts(runId, after, limit)).items,
      recent: async (team, limit) => (await runs.listOfTeam(team, { limit })).items.map((r) => ({ ...r, delivery: null })),
      // The surface's runs, and the runs from elsewhere of teams homed there (their threads are in the home room).
      live: async (surface, endedWithinSeconds, limit) => runs.liveOnSurface(surface, endedWithinSeconds, limit, (await teamsDirectory.homedOn(surface)).map((t) => t.name)),
      notice: (runId, text, key) => runJournal.notice(runId, text, key, { chat: true }),
      originOf: (runId) => originOfRun(runId),
    },
    teams: {
      async teamOfRoom(surface, roomId) {
        const homed = (await teamsDirectory.homedOn(surface)).find((t) => t.roomId === roomId);
        return homed?.name ?? (await links.linkedOn(surface)).find((l) => l.external_id === roomId)?.team ?? null;
      },
      async rooms(surface) {
        const homed = (await teamsDirectory.homedOn(surface)).map((t) => t.roomId).filter((r): r is string => r !== null);
        return [...new Set([...homed, ...(await links.linkedOn(surface)).map((l) => l.external_id)])];
      },
      homeRoomOf: (team, trx) => teamsDirectory.homeRoomOf(team, trx),
      skills: async (team) => (await teams.listSkills(team, { limit: 100 })).items,
      decideSkill: async (team, name, decision, by) => void (await teams.decideSkill(chatActor(by), team, name, decision)),
      mcpServers: (team) => mcpServers.ofTeam(team),
    },
  });
  // The chat_a adapter: its settings and secrets through the integrations and secrets services.
  // Refused webhook deliveries without a valid signature are recorded up to a cap per surface and minute (chat_a's slash command too).
  const refusalCap = createRefusalCap({ db, logger: deps.logger, now: deps.webhooksClock });
  const chatA = createChatAService({
    db,
    refusalCap,
    logger: deps.logger,
    core: () => chatCore,
    publicBaseUrl: config.publicBaseUrl,
    settings: async () => {
      const { integration } = await integrations.get('chat_a');
      return { enabled: integration.enabled, url: typeof integration.settings.url === 'string' ? integration.settings.url : null, slashCommand: integration.settings.slash_command === true };
    },
    reveal: (name) => secrets.reveal(name),
    roles: async () => {
      const out = [];
      for (const t of await teamsDirectory.homedOn('chat_a')) {
        for (const r of t.roles) {
          const row = await agents.get(r.agent).catch(() => null);
          const shown = row ? await agents.present(row) : null;
          const avatar = async () => {
            const a = await agents.getAvatar(r.agent).catch(() => null);
            return a ? { bytes: a.bytes, mediaType: a.media_type } : null;
          };
          out.push({ team: t.name, role: r.role, displayName: shown?.display_name ?? r.role, avatar });
        }
      }
      return out;
    },
  });
  // The chat_b adapter: its settings and secrets through the integrations and secrets services.
  const chatB = createChatBService({
    logger: deps.logger,
    settings: async () => {
      const { integration } = await integrations.get('chat_b');
      return { enabled: integration.enabled, apiUrl: String(settingOf('chat_b', integration.settings, 'api_url')) };
    },
    reveal: (name) => secrets.reveal(name),
    core: () => chatCore,
    roleLook: async (team, role) => {
      const agent = (await teamsDirectory.homedOn('chat_b')).find((t) => t.name === team)?.roles.find((r) => r.role === role)?.agent ?? null;
      const row = agent ? await agents.get(agent).catch(() => null) : null;
      const shown = row ? await agents.present(row) : null;
      const iconUrl = shown?.avatar_url ? new URL(shown.avatar_url, config.publicBaseUrl).toString() : null;
      return { role, displayName: shown?.display_name ?? role, iconUrl };
    },
  });
  const egressOverrides = createEgressOverridesService({ db, references });
  const mcpServers = createMcpServersService({ db, references, secrets, teams: teamsDirectory, hooks, logger: deps.logger });

  // Inbound webhooks and what runs send back to the code host.
  // A surface's deliveries are taken while its integration is enabled, with its webhook secret.
  const inbound = async (surface: WebhookSurface) => {
    const { integration } = await integrations.get(surface);
    return { enabled: integration.enabled, secret: integration.enabled ? await integrations.webhookSecret(surface) : null };
  };
  const codeHost = (): Promise<CodeHostApp | null> => integrations.codeHostApp();
  // The issue trackers: their settings and secrets through the integrations and secrets services.
  const trackerSettings = async (kind: 'tracker_a' | 'tracker_b') => {
    const { integration } = await integrations.get(kind);
    const setting = (name: string) => (typeof integration.settings[name] === 'string' ? (integration.settings[name] as string) : null);
    return { enabled: integration.enabled, setting };
  };
  // A succeeded run's note waits while the code host is still to open its pull request (its delivery job).
  const awaitsPullRequest = async (run: { team: string; delivery: { branch?: string | null; pull_request?: unknown } | null }) =>
    !!run.delivery?.branch && !run.delivery.pull_request && (await integrations.codeHostApp()) !== null && (await integrations.codeHostRepositoryOf(run.team)) !== null;
  const trackerOf = (kind: TrackerKind) =>
    createTrackerService({ db, runs, kind, publicBaseUrl: config.publicBaseUrl, awaitsPullRequest, teamsLinkedTo: (ids) => links.teamsLinkedTo(kind.surface, ids), logger: deps.logger });
  const trackerA = trackerOf(
    trackerAKind({
      settings: async () => {
        const s = await trackerSettings('tracker_a');
        return { enabled: s.enabled, apiUrl: s.setting('api_url') ?? DEFAULT_LINEAR_API_URL };
      },
      reveal: (name) => secrets.reveal(name),
    }),
  );
  const trackerB = trackerOf(
    trackerBKind({
      settings: async () => {
        const s = await trackerSettings('tracker_b');
        const [clientId, cloudId, accountId] = [s.setting('client_id'), s.setting('cloud_id'), s.setting('account_id')];
        return {
          enabled: s.enabled,
          config: clientId && cloudId && accountId ? { clientId, cloudId, accountId, apiUrl: s.setting('api_url') ?? DEFAULT_JIRA_API_URL, authUrl: s.setting('auth_url') ?? DEFAULT_JIRA_AUTH_URL } : null,
          siteUrl: s.setting('site_url'),
          doneTransition: s.setting('done_transition'),
        };
      },
      reveal: (name) => secrets.reveal(name),
    }),
  );
  const codeHostDelivery = createCodeHostDelivery({
    db,
    runs,
    journal: runJournal,
    codeHost,
    repositoryOfTeam: (team) => integrations.codeHostRepositoryOf(team),
    refusedEgress: async (team, since, until) => {
      const t = await teamsDirectory.forRun(team);
      if (!t) return [];
      return (await egressRefusalsOfTeam(db, t.id, since, until)).map((e) => `${e.role}: ${e.method} ${e.host}${e.path} (${e.rule}: ${e.reason})`);
    },
    publicBaseUrl: config.publicBaseUrl,
    logger: deps.logger,
  });
  const codeHostInbound = createCodeHostInbound({ db, runs, journal: runJournal, codeHost, teamsOfRepository: (repo, urls) => links.teamsOfRepository(repo, urls) });
  // The surfaces: what each adapter offers (src/integrations/surface.ts).
  // The chats reach theirs through the chat core; a chat_a command queued by an earlier version gets the command list.
  const surfaces = {
    code_host: createCodeHostSurface({ db, runs, inbound: codeHostInbound, delivery: codeHostDelivery }),
    tracker_a: trackerA,
    tracker_b: trackerB,
    chat_a: chatSurfaceOf({ db, core: () => chatCore }, 'chat_a', { otherPayload: (row, payload) => chatA.commands.process(row, payload) }),
    chat_b: chatSurfaceOf({ db, core: () => chatCore }, 'chat_b'),
  } satisfies Record<SurfaceKind, Surface>;
  // Each surface's adapter takes its verified deliveries (chat_a's slash commands among them).
  const webhooks = createWebhooksService({ db, inbound, consumers: surfaces, chatA, logger: deps.logger, refusalCap });

  // Which names exist: each kind's owner answers.
  hooks.on('unknown:secret', (names, q) => secrets.unknown(names, q));
  hooks.on('unknown:destination', (names, q) => destinations.unknown(names, q));
  hooks.on('unknown:environment', (names, q) => environments.unknown(names, q));
  hooks.on('unknown:skill', (names, q) => skills.unknown(names, q));
  hooks.on('unknown:agent', (names, q) => agents.unknown(names, q));
  hooks.on('unknown:tool', (names) => agents.unknownTools(names));
  hooks.on('unknown:mcp_server', (names, q) => mcpServers.unknown(names, q));
  hooks.on('unknown:template', (names, q) => templates.unknown(names, q));
  // Who uses a name: every module that names things of the kind counts (a delete answers 409 while any does).
  hooks.on('uses:secret', (names, q) => destinations.countInjecting('secret', names, q));
  hooks.on('uses:secret', (names, q) => mcpServers.usesOf('secret', names, q));
  hooks.on('uses:secret', (names) => integrations.usesOfSecrets(names));
  hooks.on('uses:destination', (names, q) => agents.usesOf('destination', names, q));
  hooks.on('uses:destination', (names, q) => mcpServers.usesOf('destination', names, q));
  hooks.on('uses:destination', (names, q) => teams.countOverridesNaming(names, q));
  hooks.on('uses:environment', (names, q) => agents.usesOf('environment', names, q));
  hooks.on('uses:environment', (names, q) => templates.countCurrentUses('environment', names, q));
  hooks.on('uses:mcp_server', (names, q) => destinations.countInjecting('mcp', names, q));
  hooks.on('uses:mcp_server', (names, q) => agents.usesOf('mcp_server', names, q));
  hooks.on('uses:mcp_server', (names, q) => templates.countCurrentUses('mcp_servers', names, q));
  hooks.on('uses:agent', (names, q) => templates.countCurrentUses('agent', names, q));
  hooks.on('uses:agent', (names, q) => teams.countTeamsUsingAgent(names, q));
  hooks.on('uses:template', (names, q) => teams.countActiveByTemplate(names, q));
  // Owners of other modules' rows (documents, team MCP servers), locked while those are written.
  hooks.on('lock:agent', (q, name) => agents.lockShared(q, name));
  hooks.on('lock:team', (q, name) => teams.lockLiveShared(q, name));
  hooks.on('checkpointUses', () => environments.checkpointUses());
  hooks.on('checkpointUses', () => teamsDirectory.checkpointUses());
  hooks.on('codeHost:covers', (repo) => integrations.coversRepository(repo));
  hooks.on('codeHost:coversUrl', (url) => integrations.coversRepositoryUrl(url));
  hooks.on('chat:room', async (surface, field, roomId) => (surface === 'chat_a' ? chatA.checkRoom(field, roomId) : null));
  hooks.on('chat:room', async (surface, field, roomId) => (surface === 'chat_b' ? chatB.checkRoom(field, roomId) : null));
  hooks.on('tracker:link', (surface, externalId) => (surface === 'tracker_a' ? trackerA : trackerB).checkLink(externalId));
  // Reactions, inside the transaction of the change.
  hooks.on('teamArchived', (trx, _actor, team) => runs.cancelOpenRuns(trx, team.id));
  hooks.on('teamArchived', (trx, _actor, team) => sandboxes.destroyAllOf(trx, team.id));
  hooks.on('teamArchived', (trx, _actor, team) => documents.deleteAllOf(trx, 'team', team.name));
  hooks.on('teamArchived', (trx, actor, team) => mcpServers.removeAllOf(trx, actor, team.name));
  hooks.on('secretRemoved', (trx, actor, secret) => destinations.stopInjecting(trx, actor, secret));
  hooks.on('runChanged', (trx, _actor, change) => codeHostDelivery.onRunChanged(trx, change));
  hooks.on('runChanged', (trx, _actor, change) => trackerA.onRunChanged(trx, change));
  hooks.on('runChanged', (trx, _actor, change) => trackerB.onRunChanged(trx, change));
  hooks.on('runChanged', (trx, _actor, change) => chatCore.runChanged(trx, change));
  hooks.on('runPosted', (trx, _actor, posted) => chatCore.runChanged(trx, posted));

  const chat = createChatServices({ db, cipher, maxFileUploadMib: config.chatMaxFileUploadMib, deleteUnclaimedUploadsDays: config.chatDeleteUnclaimedUploadsDays });
  const imports = createImportService({ db, repository: config.importRepository, source: { codeHostApp: () => integrations.codeHostApp(), revealSecret: (name) => secrets.reveal(name) }, agents, templates, destinations, skills, documents });
  return { imports, hooks, references, models, runs, runJournal, sandboxes, sandboxDirectory, users, sessions, secrets, destinations, images, checkpoints, environments, skills, documents, agents, catalog, templates, proxy, spend, teams, teamsDirectory, teamProvisioning, links, integrations, egressOverrides, mcpServers, chat, webhooks, codeHostDelivery, surfaces, chatA, chatB, chatCore, trackerA, trackerB };
}

export type Services = ReturnType<typeof createServices>;

/** What the worker's jobs are performed with (src/jobs.ts): the services, this machine's sandbox host, and the run engine driving runs on it. */
export interface WorkerParts {
  config: Config;
  db: Db;
  logger: Logger;
  services: Services;
  host: SandboxHost;
  engine: RunEngine;
  sandboxes: DestroyTeamSandboxes;
}

/** A run's hold on a role's sandbox: one per run and role, so resuming work finds the same sandbox. */
const claimOf = (runId: string, role: string) => `${runId}.${role}`;

/**
 * What every component gets: the parsed config, the database, a logger, the metrics registry,
 * the cipher and model catalogue loaded once per process, and the domain services built once
 * here. Defined beside the services, so the worker's parts are built from it without this file
 * importing the components (src/components.ts names it for them).
 */
export interface ComponentContext {
  config: Config;
  db: Db;
  logger: Logger;
  metrics: Registry;
  cipher: Cipher;
  models: ModelCatalog;
  services: Services;
}

/**
 * The worker's side of the composition root: starts this machine's sandbox host and builds the
 * run engine on it, each told what it needs of the services. The worker component (and the test
 * harness's `drainJobs`) perform every job with what this answers; `host.stop()` ends it.
 */
export async function startWorkerParts(ctx: ComponentContext): Promise<WorkerParts> {
  const { db, logger, services } = ctx;
  // Sandboxes go where the unprivileged sandbox user can reach them (not under a closed /root).
  const place = await reachableSandboxDir(ctx.config);
  if (place.moved) logger.info(place.moved);
  const config = { ...ctx.config, sandboxDir: place.dir };
  const caPem = await deploymentCaCertificate(db, ctx.cipher);
  const local = config.sandboxDir ? createLocalProvider({ root: config.sandboxDir, gatewayPort: config.gatewayPort, poolSize: config.sandboxPool, logger, readOnly: RUNTIME_MOUNTS, node: RUNTIME_NODE }) : null;
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
      for (const runId of runIds) await advanceRunJob.enqueue(db, { run_id: runId });
    },
  });
  const sandboxes = createDestroyTeamSandboxes({ db, deadAfterSeconds: config.sandboxHostDeadAfter, host });

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
        ownPidNamespace: placement.provider === 'local',
      };
    },
  });
  return { config, db, logger, services, host, engine, sandboxes };
}
