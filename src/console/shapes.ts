import { shapesOf } from '../http/openapi.ts';
import * as agents from './agents/agents.schemas.ts';
import * as audit from './audit/audit.schemas.ts';
import * as catalog from './catalog/catalog.schemas.ts';
import * as destinations from './destinations/destinations.schemas.ts';
import * as documents from './documents/documents.schemas.ts';
import * as environments from './environments/environments.schemas.ts';
import * as hosts from './hosts/hosts.schemas.ts';
import * as imports from './import/import.schemas.ts';
import * as integrations from './integrations/integrations.schemas.ts';
import * as mcpServers from './mcp-servers/mcp-servers.schemas.ts';
import * as runs from './runs/runs.schemas.ts';
import * as secrets from './secrets/secrets.schemas.ts';
import * as session from './session/session.schemas.ts';
import * as skills from './skills/skills.schemas.ts';
import * as teams from './teams/teams.schemas.ts';
import * as templates from './templates/templates.schemas.ts';
import * as users from './users/users.schemas.ts';
import * as webhooks from '../integrations/webhooks/webhooks.schemas.ts';

/**
 * The console's named shapes: each exported schema of a resource module is one component of
 * the contract, named by its export, instead of a copy in every operation that uses it.
 */
export const consoleShapes = shapesOf(agents, audit, catalog, destinations, documents, environments, hosts, imports, integrations, mcpServers, runs, secrets, session, skills, teams, templates, users, webhooks);
