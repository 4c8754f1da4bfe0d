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
import { createSessionService } from './console/session/session.service.ts';
import { createSkillsService } from './console/skills/skills.service.ts';
import { createSpendService } from './console/spend/spend.service.ts';
import { createEgressOverridesService } from './console/teams/egress-overrides.service.ts';
import { createLinksService } from './console/teams/links.service.ts';
import { createTeamsService } from './console/teams/teams.service.ts';
import { lockLiveTeamShared } from './console/teams/teams.store.ts';
import { createTemplatesService, type EnvironmentSnapshot } from './console/templates/templates.service.ts';
import { createUsersService } from './console/users/users.service.ts';
import type { Db } from './db/database.ts';
import { loadModelCatalog, type ModelCatalog } from './models/catalog.ts';
import { createModelProxyClient } from './modelproxy/client.ts';
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
export function createServices(deps: { config: Config; db: Db; logger: Logger } & Shared) {
  const { config, db, cipher, models } = deps;
  // Name checks and usage counts between resource modules go through `references`.
  const references = createReferences();
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

  const chat = createChatServices({ db, cipher });
  return { references, models, users, sessions, secrets, destinations, images, checkpoints, environments, skills, documents, agents, catalog, templates, proxy, spend, teams, links, egressOverrides, mcpServers, chat };
}

export type Services = ReturnType<typeof createServices>;
