import type { Static } from 'typebox';
import { stringify as toYaml } from 'yaml';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import { useAuth } from '../http/auth.ts';
import { docsRoutes } from '../http/docs.ts';
import { healthRoutes } from '../http/health.ts';
import { createServer, type App } from '../http/kernel.ts';
import type { Registry } from '../metrics.ts';
import { API_PREFIX, OpenApiDocument, OpenApiYaml, useOpenApi } from '../http/openapi.ts';
import { clientProblem, frameworkProblem, useProblems } from '../http/problem-handler.ts';
import { refuseUnknownQuery } from '../http/schemas.ts';
import { webRoutes } from '../http/web.ts';
import { createServices, loadShared, type Services } from '../services.ts';
import { agentsRoutes } from './agents/agents.routes.ts';
import { catalogRoutes } from './catalog/catalog.routes.ts';
import { auditRoutes } from './audit/audit.routes.ts';
import { hostsRoutes } from './hosts/hosts.routes.ts';
import { createAuditLog } from '../audit/audit.ts';
import { destinationsRoutes } from './destinations/destinations.routes.ts';
import { environmentsRoutes } from './environments/environments.routes.ts';
import { spendRoutes } from './spend/spend.routes.ts';
import { teamsRoutes } from './teams/teams.routes.ts';
import { integrationsRoutes } from './integrations/integrations.routes.ts';
import { mcpServersRoutes } from './mcp-servers/mcp-servers.routes.ts';
import { runsRoutes } from './runs/runs.routes.ts';
import { createTraceReader } from './runs/trace.ts';
import { templatesRoutes } from './templates/templates.routes.ts';
import { secretsRoutes } from './secrets/secrets.routes.ts';
import { skillsRoutes } from './skills/skills.routes.ts';
import { importRoutes } from './import/import.routes.ts';
import { sessionRoutes } from './session/session.routes.ts';
import { usersRoutes } from './users/users.routes.ts';
import { authUser } from './users/users.service.ts';
import { consoleExamples } from './examples.ts';
import { consoleShapes } from './shapes.ts';
import { deliveriesRoutes, webhooksRoutes } from '../integrations/webhooks/webhooks.routes.ts';

export const VERSION = '0.1.0';

/** The console's server: its routes over the shared services (src/services.ts). Not listening yet. */
export async function buildConsoleApp(deps: { config: Config; db: Db; logger: Logger; metrics: Registry; services: Services }): Promise<App> {
  const { config, db, services } = deps;
  const app = createServer({ logger: deps.logger, metrics: deps.metrics, bodyLimit: config.bodyLimit, trustProxy: config.trustProxy, component: 'console', extra: { frameworkErrors: frameworkProblem, clientErrorHandler: clientProblem } });
  useProblems(app);
  // JSON only, unless a route says otherwise (the avatar takes images): anything else is a 415.
  app.removeContentTypeParser('text/plain');
  useAuth(app, db, { prefix: API_PREFIX, userOf: authUser });
  await useOpenApi(app, { publicBaseUrl: config.publicBaseUrl, version: VERSION, shapes: consoleShapes, examples: consoleExamples });

  await app.register(
    async (api: App) => {
      refuseUnknownQuery(api);
      sessionRoutes(api, { sessions: services.sessions, publicBaseUrl: config.publicBaseUrl });
      usersRoutes(api, { users: services.users });
      auditRoutes(api, { audit: createAuditLog(db) });
      hostsRoutes(api, { sandboxes: services.sandboxes, deadAfterSeconds: config.sandboxHostDeadAfter, vcpuOvercommit: config.sandboxVcpuOvercommit });
      agentsRoutes(api, { agents: services.agents, documents: services.documents });
      catalogRoutes(api, { catalog: services.catalog });
      secretsRoutes(api, { secrets: services.secrets });
      destinationsRoutes(api, { destinations: services.destinations });
      environmentsRoutes(api, { environments: services.environments, images: services.images, checkpoints: services.checkpoints });
      skillsRoutes(api, { skills: services.skills });
      importRoutes(api, { imports: services.imports });
      templatesRoutes(api, { templates: services.templates });
      teamsRoutes(api, { teams: services.teams, links: services.links, egress: services.egressOverrides, documents: services.documents });
      spendRoutes(api, { spend: services.spend, teams: services.teamProvisioning });
      mcpServersRoutes(api, { mcpServers: services.mcpServers });
      deliveriesRoutes(api, { webhooks: services.webhooks });
      integrationsRoutes(api, { integrations: services.integrations });
      runsRoutes(api, { runs: services.runs, traces: createTraceReader({ jaegerUrl: config.jaegerUrl, onError: (err) => deps.logger.warn({ err }, 'the trace store did not answer') }) });

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

  webhooksRoutes(app, { webhooks: services.webhooks, bodyLimit: config.bodyLimit, metrics: deps.metrics });
  await docsRoutes(app);
  healthRoutes(app, { db, metrics: deps.metrics });
  webRoutes(app, { webDir: config.webDir });
  return app;
}

/** The console's services with the cipher and catalogue loaded from config (tests and benches; `serve` uses createServices). */
export function createConsoleServices(deps: { config: Config; db: Db; logger: Logger; codeHostClock?: () => number; webhooksClock?: () => number }): Services {
  return createServices({ ...deps, ...loadShared(deps.config) });
}

export type ConsoleServices = Services;
