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
import { createReferences } from './console/references.ts';
import { createRunJournal } from './console/runs/runs.journal.ts';
import { createRunsService } from './console/runs/runs.service.ts';
import { createRunSteps, type RunsDeps } from './console/runs/runs.steps.ts';
import { createSessionService } from './console/session/session.service.ts';
import { createSkillsService } from './console/skills/skills.service.ts';
import { createImportService } from './console/import/import.service.ts';
import { createSpendService } from './console/spend/spend.service.ts';
import { createEgressOverridesService } from './console/teams/egress-overrides.service.ts';
import { createIntegrationsService } from './console/integrations/integrations.service.ts';
import { createLinksService } from './console/teams/links.service.ts';
import { createTeamsService } from './console/teams/teams.service.ts';
import { createTemplatesService, type EnvironmentSnapshot } from './console/templates/templates.service.ts';
import { createUsersService } from './console/users/users.service.ts';
import type { Db } from './db/database.ts';
import { createHooks, type RefQuery } from './hooks.ts';
import { loadModelCatalog, type ModelCatalog } from './models/catalog.ts';
import { createModelProxyClient } from './modelproxy/client.ts';
import { egressRefusalsOfTeam } from './gateway/events.ts';
import { createChatAService } from './integrations/chat_a/chat_a.service.ts';
import { createChatCore } from './integrations/chat/core.ts';
import type { ChatPerson } from './integrations/chat/ports.ts';
import { systemActor } from './audit/audit.ts';
import { MAX_REPLY_CHARS, MAX_TASK_CHARS } from './console/runs/runs.schemas.ts';
import { Problem } from './http/problems.ts';
import { createCodeHostDelivery } from './integrations/webhooks/code-host.delivery.ts';
import type { CodeHostClient, WebhookSurface } from './integrations/webhooks/code-host.client.ts';
import { createWebhooksService } from './integrations/webhooks/webhooks.service.ts';
import { runProposal } from './runtime/engine/proposals.ts';
import { runAdvance } from './runtime/engine/run-job.ts';
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
export function createServices(deps: { config: Config; db: Db; logger: Logger; codeHostClock?: () => number } & Shared) {
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
    team: (name) => teams.forRun(name),
    agentVersion: async (agent) => (await agents.versionForRun(agent)).version,
    isBudgetSpent: (team) => teams.isBudgetSpent(team),
    hostProblem: async (team) => {
      const answer = await canTakeWork(db, { deadAfterSeconds: config.sandboxHostDeadAfter }, sandboxDirectory, team);
      return answer.ok ? null : (answer.reason ?? 'no live sandbox host (and its gateway) can take the team\'s work');
    },
    advance: async (trx, runId) => void (await runAdvance.enqueue(trx, { run_id: runId })),
    price: (model) => {
      const alias = models.get(model);
      return { input: alias?.input_usd_per_mtok ?? 0, output: alias?.output_usd_per_mtok ?? 0 };
    },
    jaegerUrl: config.jaegerUrl,
    hooks,
    traces: createRunTraces({ endpoint: config.otlpEndpoint }),
    propose: async (trx, p) => void (await runProposal.enqueue(trx, p, { key: `proposal:${p.run_id}:${p.source}` })),
    // Late-bound: the chat core is built after runs.
    threadUrl: async (runId) => (await chatCore.threadUrls([runId])).get(runId) ?? null,
  };
  // The routes' side of runs and the engine's journal share the steps both take (a run's end, a new task, the post signal).
  const runSteps = createRunSteps(runsDeps);
  const runs = createRunsService(runsDeps, runSteps);
  const runJournal = createRunJournal(runsDeps, runSteps);
  const sandboxes = createSandboxesService({ db });
  const teams = createTeamsService({
    db,
    runs,
    sandboxes,
    users,
    models,
    references,
    templates,
    // A role whose agent version cannot be read shows without the agent's settings, and says why in the log.
    agentVersion: (agent, version) =>
      agents.versionForRun(agent, version ?? null).catch((err) => {
        deps.logger.warn({ err, agent }, 'reading the agent version of a team role failed');
        return null;
      }),
    hooks,
    proxy,
    spend,
    cipher,
  });
  // What sandbox placement and the sandbox host's idle sweep ask of the modules that own teams, templates and environments.
  const sandboxDirectory: TeamDirectory = {
    rolePlacement: (teamId, role, q) => teams.rolePlacement(teamId, role, q),
    roleSize: (template, version, role, q) => templates.roleSize(template, version, role, q),
    snapshot: (environment, q) => environments.snapshot(environment, q),
    leadEnvironment: (name) => teams.leadEnvironment(name),
    sleepTimes: (ids) => teams.sleepTimes(ids),
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
    chatTeams: () => teams.homedOn('chat_a'),
    agentLook: async (agent) => {
      const row = await agents.get(agent).catch(() => null);
      if (!row) return null;
      const shown = await agents.present(row);
      return { displayName: shown.display_name, avatarUrl: shown.avatar_url };
    },
    chatATest: () => chatA.test(),
  });
  // The chat core (the same for every chat surface): runs and teams as it needs them, posting through each surface's adapter.
  const chatActor = (p: ChatPerson) => systemActor(`${p.surface}:@${p.user_name || p.user_id}`);
  const chatCore = createChatCore({
    db,
    logger: deps.logger,
    surface: async (kind) => (kind === 'chat_a' ? chatA.chatSurface() : { missing: `${kind} has no adapter in this version` }),
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
      notice: (runId, text, key) => runJournal.notice(runId, text, key, { chat: true }),
    },
    teams: {
      async teamOfRoom(surface, roomId) {
        const homed = (await teams.homedOn(surface)).find((t) => t.roomId === roomId);
        return homed?.name ?? (await links.linkedOn(surface)).find((l) => l.external_id === roomId)?.team ?? null;
      },
      async rooms(surface) {
        const homed = (await teams.homedOn(surface)).map((t) => t.roomId).filter((r): r is string => r !== null);
        return [...new Set([...homed, ...(await links.linkedOn(surface)).map((l) => l.external_id)])];
      },
      skills: async (team) => (await teams.listSkills(team, { limit: 100 })).items,
      decideSkill: async (team, name, decision, by) => void (await teams.decideSkill(chatActor(by), team, name, decision)),
      mcpServers: (team) => mcpServers.ofTeam(team),
    },
  });
  // The chat_a adapter: its settings and secrets through the integrations and secrets services.
  const chatA = createChatAService({
    db,
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
      for (const t of await teams.homedOn('chat_a')) {
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
  const egressOverrides = createEgressOverridesService({ db, references });
  const mcpServers = createMcpServersService({ db, references, secrets, teams, hooks, logger: deps.logger });

  // Inbound webhooks and what runs send back to the code host.
  // A surface's deliveries are taken while its integration is enabled, with its webhook secret.
  const inbound = async (surface: WebhookSurface) => {
    const { integration } = await integrations.get(surface);
    return { enabled: integration.enabled, secret: integration.enabled ? await integrations.webhookSecret(surface) : null };
  };
  const codeHost = (): Promise<CodeHostClient | null> => integrations.codeHostApp();
  const webhooks = createWebhooksService({ db, runs, journal: runJournal, inbound, codeHost, chatA, teamsOfRepository: (repo, urls) => links.teamsOfRepository(repo, urls), logger: deps.logger });
  const codeHostDelivery = createCodeHostDelivery({
    db,
    runs,
    journal: runJournal,
    codeHost,
    repositoryOfTeam: (team) => integrations.codeHostRepositoryOf(team),
    refusedEgress: async (team, since, until) => {
      const t = await teams.forRun(team);
      if (!t) return [];
      return (await egressRefusalsOfTeam(db, t.id, since, until)).map((e) => `${e.role}: ${e.method} ${e.host}${e.path} (${e.rule}: ${e.reason})`);
    },
    publicBaseUrl: config.publicBaseUrl,
    logger: deps.logger,
  });

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
  hooks.on('checkpointUses', () => teams.checkpointUses());
  hooks.on('codeHost:covers', (repo) => integrations.coversRepository(repo));
  hooks.on('codeHost:coversUrl', (url) => integrations.coversRepositoryUrl(url));
  hooks.on('chatA:room', (field, roomId) => chatA.checkRoom(field, roomId));
  // Reactions, inside the transaction of the change.
  hooks.on('teamArchived', (trx, _actor, team) => runs.cancelOpenRuns(trx, team.id));
  hooks.on('teamArchived', (trx, _actor, team) => sandboxes.destroyAllOf(trx, team.id));
  hooks.on('teamArchived', (trx, _actor, team) => documents.deleteAllOf(trx, 'team', team.name));
  hooks.on('teamArchived', (trx, actor, team) => mcpServers.removeAllOf(trx, actor, team.name));
  hooks.on('secretRemoved', (trx, actor, secret) => destinations.stopInjecting(trx, actor, secret));
  hooks.on('runChanged', (trx, _actor, change) => codeHostDelivery.onRunChanged(trx, change));
  hooks.on('runChanged', (trx, _actor, change) => chatCore.runChanged(trx, change));
  hooks.on('runPosted', (trx, _actor, posted) => chatCore.runChanged(trx, posted));

  const chat = createChatServices({ db, cipher });
  const imports = createImportService({ db, repository: config.importRepository, source: { codeHostApp: () => integrations.codeHostApp(), revealSecret: (name) => secrets.reveal(name) }, agents, templates, destinations, skills, documents });
  return { imports, hooks, references, models, runs, runJournal, sandboxes, sandboxDirectory, users, sessions, secrets, destinations, images, checkpoints, environments, skills, documents, agents, catalog, templates, proxy, spend, teams, links, integrations, egressOverrides, mcpServers, chat, webhooks, codeHostDelivery, chatA, chatCore };
}

export type Services = ReturnType<typeof createServices>;
