import type { ContractExamples } from '../http/openapi.ts';
import { agentsExamples } from './agents/agents.examples.ts';
import { auditExamples } from './audit/audit.examples.ts';
import { catalogExamples } from './catalog/catalog.examples.ts';
import { destinationsExamples } from './destinations/destinations.examples.ts';
import { documentsExamples } from './documents/documents.examples.ts';
import { environmentsExamples } from './environments/environments.examples.ts';
import { hostsExamples } from './hosts/hosts.examples.ts';
import { importExamples } from './import/import.examples.ts';
import { integrationsExamples } from './integrations/integrations.examples.ts';
import { mcpServersExamples } from './mcp-servers/mcp-servers.examples.ts';
import { runsExamples } from './runs/runs.examples.ts';
import { secretsExamples } from './secrets/secrets.examples.ts';
import { sessionExamples } from './session/session.examples.ts';
import { skillsExamples } from './skills/skills.examples.ts';
import { spendExamples } from './spend/spend.examples.ts';
import { teamsExamples } from './teams/teams.examples.ts';
import { templatesExamples } from './templates/templates.examples.ts';
import { usersExamples } from './users/users.examples.ts';
import { webhooksExamples } from '../integrations/webhooks/webhooks.examples.ts';

/** The contract's own operations (served by app.ts). */
const contractExamples: Partial<ContractExamples> = {
  operations: {
    "getOpenApiJson": {
      "answer": {
        "openapi": "3.1.0",
        "info": {
          "title": "Crewhouse Console API",
          "version": "0.1.0"
        },
        "paths": {
          "/me": {
            "get": {
              "operationId": "getMe",
              "summary": "Who am I"
            }
          }
        }
      }
    },
    "getOpenApiYaml": {
      "answer": "openapi: 3.1.0\ninfo:\n  title: Crewhouse Console API\n  version: 0.1.0\npaths:\n  /me:\n    get:\n      operationId: getMe\n      summary: Who am I\n"
    }
  },
};

/**
 * Examples for the contract (see `ContractExamples`), kept beside each resource's schemas
 * (`<resource>/<resource>.examples.ts`): one value of each named shape, the bodies and answers
 * that are not named shapes by operation, and path parameters. They were taken from real answers
 * of this API (names made readable) and are checked against their schemas by examples.test.ts,
 * so a shape that changes without its example fails there.
 */
export const consoleExamples: ContractExamples = joined([contractExamples, agentsExamples, auditExamples, catalogExamples, destinationsExamples, documentsExamples, environmentsExamples, hostsExamples, importExamples, integrationsExamples, mcpServersExamples, runsExamples, secretsExamples, sessionExamples, skillsExamples, spendExamples, teamsExamples, templatesExamples, usersExamples, webhooksExamples]);

/** The parts as one set of examples; an example given twice is a mistake (one would silently win). */
function joined(parts: Array<Partial<ContractExamples>>): ContractExamples {
  const all: ContractExamples = { shapes: {}, operations: {}, params: {} };
  for (const part of parts) {
    for (const kind of ['shapes', 'operations', 'params'] as const) {
      for (const [key, value] of Object.entries(part[kind] ?? {})) {
        if (key in all[kind]) throw new Error(`two examples of ${kind} ${key}: keep one, beside the schemas it belongs to`);
        all[kind][key] = value;
      }
    }
  }
  return all;
}
