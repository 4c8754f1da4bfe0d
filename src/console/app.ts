import type { Static } from 'typebox';
import { stringify as toYaml } from 'yaml';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import { useAuth } from '../http/auth.ts';
import { healthRoutes } from '../http/health.ts';
import { createServer, type App } from '../http/kernel.ts';
import type { Registry } from '../http/metrics.ts';
import { API_PREFIX, OpenApiDocument, OpenApiYaml, useOpenApi } from '../http/openapi.ts';
import { frameworkProblem, useProblems } from '../http/problem-handler.ts';
import { webRoutes } from '../http/web.ts';
import { loadModelCatalog } from '../models/catalog.ts';
import { createModelProxyClient } from '../modelproxy/client.ts';
import { loadCipher } from '../secrets/cipher.ts';
import { createSecretsService } from '../secrets/secrets.service.ts';
import { agentsRoutes } from './agents/agents.routes.ts';
import { createAgentsService } from './agents/agents.service.ts';
import { catalogRoutes } from './catalog/catalog.routes.ts';
import { createCatalogService } from './catalog/catalog.service.ts';
import { destinationsRoutes } from './destinations/destinations.routes.ts';
import { createCheckpointsService } from './environments/checkpoints.service.ts';
import { environmentsRoutes } from './environments/environments.routes.ts';
import { createEnvironmentsService } from './environments/environments.service.ts';
import { createImagesService } from './environments/images.service.ts';
import { createDestinationsService } from './destinations/destinations.service.ts';
import { createDocumentsService } from './documents/documents.service.ts';
import { createReferences } from './references.ts';
import { spendRoutes } from './spend/spend.routes.ts';
import { createSpendService } from './spend/spend.service.ts';
import { createEgressOverridesService } from './teams/egress-overrides.service.ts';
import { createLinksService } from './teams/links.service.ts';
import { teamsRoutes } from './teams/teams.routes.ts';
import { mcpServersRoutes } from './mcp-servers/mcp-servers.routes.ts';
import { createMcpServersService } from './mcp-servers/mcp-servers.service.ts';
import { createTeamsService } from './teams/teams.service.ts';
import { lockLiveTeamShared } from './teams/teams.store.ts';
import { templatesRoutes } from './templates/templates.routes.ts';
import { createTemplatesService, type EnvironmentSnapshot } from './templates/templates.service.ts';
import { secretsRoutes } from './secrets/secrets.routes.ts';
import { skillsRoutes } from './skills/skills.routes.ts';
import { createSkillsService } from './skills/skills.service.ts';
import { sessionRoutes } from './session/session.routes.ts';
import { createSessionService } from './session/session.service.ts';
import { usersRoutes } from './users/users.routes.ts';
import { consoleShapes } from './shapes.ts';
import { createUsersService } from './users/users.service.ts';

export const VERSION = '0.1.0';

/** The composition root of the console: builds every service once and hands each route module what it needs. */
export function createConsoleServices(deps: { config: Config; db: Db; logger: Logger }) {
  const { config, db } = deps;
  // Name checks and usage counts between resource modules go through `references`.
  const references = createReferences();
  const models = loadModelCatalog(config.models);
  const cipher = loadCipher(config);
  const secrets = createSecretsService({ db, cipher, references });
  references.provide('secret', (names, q) => secrets.unknown(names, q));
  const destinations = createDestinationsService({ db, references, secrets, devDestinations: config.egressDevDestinations });
  references.provide('destination', (names, q) => destinations.unknown(names, q));
  references.countUsesOf('secret', (name, q) => destinations.countInjecting(name, q));
  references.countUsesOf('mcp_server', (name, q) => destinations.countInjectingMcp(name, q));
  const images = createImagesService({ dir: config.imagesDir, logger: deps.logger });
  const checkpoints = createCheckpointsService();
  const environments = createEnvironmentsService({ db, references, images, checkpoints });
  references.provide('environment', (names, q) => environments.unknown(names, q));
  const skills = createSkillsService({ db });
  references.provide('skill', (names, q) => skills.unknown(names, q));
  const users = createUsersService({ db, publicBaseUrl: config.publicBaseUrl });
  const sessions = createSessionService({ db });
  const documents = createDocumentsService({ db });
  const agents = createAgentsService({ db, references, models, documents, publicBaseUrl: config.publicBaseUrl });
  const catalog = createCatalogService({ models });

  const environmentOf = (name: string): Promise<EnvironmentSnapshot | null> => environments.snapshot(name);
  const templates = createTemplatesService({ db, references, models, environmentOf });
  const proxy = createModelProxyClient(config);
  const spend = createSpendService({ proxy });
  const teams = createTeamsService({
    db,
    models,
    references,
    templates,
    agentVersion: (agent) => agents.versionForRun(agent).catch(() => null),
    documents,
    proxy,
    spend,
    cipher,
  });
  const links = createLinksService({ db, codeHostInstalled: null });
  const egressOverrides = createEgressOverridesService({ db, references });
  const mcpServers = createMcpServersService({ db, references, secrets, teams, lockLiveTeam: lockLiveTeamShared });
  checkpoints.addSource(() => teams.checkpointUses());
  teams.onArchive(async (trx, actor, name) => {
    await mcpServers.removeAllOf(trx, actor, name);
  });
  documents.registerOwner('team', lockLiveTeamShared);
  references.provide('template', (names, q) => templates.unknown(names, q));
  references.countUsesOf('agent', (name, q) => templates.countCurrentUses('agent', name, q));
  references.countUsesOf('agent', (name, q) => teams.countTeamsUsingAgent(name, q));
  references.countUsesOf('environment', (name, q) => templates.countCurrentUses('environment', name, q));
  references.countUsesOf('mcp_server', (name, q) => templates.countCurrentUses('mcp_servers', name, q));
  references.countUsesOf('template', (name, q) => teams.countActiveByTemplate(name, q));
  references.countUsesOf('destination', (name, q) => teams.countOverridesNaming(name, q));
  return { references, models, users, sessions, secrets, destinations, images, checkpoints, environments, skills, documents, agents, catalog, templates, proxy, spend, teams, links, egressOverrides, mcpServers };
}

export type ConsoleServices = ReturnType<typeof createConsoleServices>;

export async function buildConsoleApp(deps: { config: Config; db: Db; logger: Logger; metrics: Registry; services?: ConsoleServices }): Promise<App> {
  const { config, db } = deps;
  const services = deps.services ?? createConsoleServices(deps);
  const app = createServer({ logger: deps.logger, metrics: deps.metrics, bodyLimit: config.bodyLimit, trustProxy: config.trustProxy, component: 'console', extra: { frameworkErrors: frameworkProblem } });
  useProblems(app);
  // JSON only, unless a route says otherwise (the avatar takes images): anything else is a 415.
  app.removeContentTypeParser('text/plain');
  useAuth(app, db, { prefix: API_PREFIX });
  await useOpenApi(app, { publicBaseUrl: config.publicBaseUrl, version: VERSION, shapes: consoleShapes });

  await app.register(
    async (api: App) => {
      sessionRoutes(api, { sessions: services.sessions, publicBaseUrl: config.publicBaseUrl });
      usersRoutes(api, { users: services.users });
      agentsRoutes(api, { agents: services.agents, documents: services.documents });
      catalogRoutes(api, { catalog: services.catalog });
      secretsRoutes(api, { secrets: services.secrets });
      destinationsRoutes(api, { destinations: services.destinations });
      environmentsRoutes(api, { environments: services.environments, images: services.images, checkpoints: services.checkpoints });
      skillsRoutes(api, { skills: services.skills });
      templatesRoutes(api, { templates: services.templates });
      teamsRoutes(api, { teams: services.teams, links: services.links, egress: services.egressOverrides, documents: services.documents });
      spendRoutes(api, { spend: services.spend, teams: services.teams });
      mcpServersRoutes(api, { mcpServers: services.mcpServers });

      api.get('/openapi.json', {
        config: { auth: { role: 'viewer' } },
        schema: { operationId: 'getOpenApiJson', summary: 'Get this contract as JSON', tags: ['meta'], description: 'This contract, as JSON; routes only, no data.', response: { 200: OpenApiDocument } },
        handler: async () => app.swagger() as Static<typeof OpenApiDocument>,
      });
      api.get('/openapi.yaml', {
        config: { auth: { role: 'viewer' } },
        schema: { operationId: 'getOpenApiYaml', summary: 'Get this contract as YAML', tags: ['meta'], description: 'This contract, as YAML.', response: { 200: OpenApiYaml } },
        handler: async (_req, reply) => reply.type('application/yaml').send(toYaml(app.swagger())),
      });
    },
    { prefix: API_PREFIX },
  );

  healthRoutes(app, { db, metrics: deps.metrics });
  webRoutes(app, { webDir: config.webDir });
  return app;
}
