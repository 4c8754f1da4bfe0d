import type { AuditTables } from '../audit/audit.tables.ts';
import type { AuthTables } from '../auth/auth.tables.ts';
import type { AgentsTables } from '../console/agents/agents.tables.ts';
import type { DocumentsTables } from '../console/documents/documents.tables.ts';
import type { ChatTables } from '../chat/chat.tables.ts';
import type { TeamsTables } from '../console/teams/teams.tables.ts';
import type { TemplatesTables } from '../console/templates/templates.tables.ts';
import type { UsersTables } from '../console/users/users.tables.ts';
import type { ModelProxyTables } from '../modelproxy/modelproxy.tables.ts';
import type { SecretsTables } from '../secrets/secrets.tables.ts';
import type { DestinationsTables } from '../console/destinations/destinations.tables.ts';
import type { EnvironmentsTables } from '../console/environments/environments.tables.ts';
import type { SkillsTables } from '../console/skills/skills.tables.ts';
import type { RunsTables } from '../console/runs/runs.tables.ts';
import type { McpServersTables } from '../console/mcp-servers/mcp-servers.tables.ts';
import type { SandboxHostsTables } from '../runtime/sandboxes/hosts.tables.ts';
import type { QueueTables } from '../queue/queue.tables.ts';
import type { SandboxesTables } from '../runtime/sandboxes/sandboxes.tables.ts';
import type { GatewayTables } from '../gateway/gateway.tables.ts';
import type { WebhooksTables } from '../integrations/webhooks/webhooks.tables.ts';
import type { ChatSurfacesTables } from '../integrations/chat/chat.tables.ts';
import type { CodeHostTables } from '../integrations/code_host/code_host.tables.ts';
import type { IntegrationsTables } from '../console/integrations/integrations.tables.ts';
import type { TrackerTables } from '../integrations/tracker/tracker.tables.ts';
import type { TelemetryTables } from '../telemetry/telemetry.tables.ts';

/**
 * The whole database, composed from the tables each module owns. A module adds its
 * `*.tables.ts` here; only that module's store queries them.
 */
export interface Database extends UsersTables, AuthTables, AuditTables, SecretsTables, DestinationsTables, EnvironmentsTables, SkillsTables, ModelProxyTables, ChatTables, AgentsTables, DocumentsTables, TemplatesTables, TeamsTables, McpServersTables, SandboxHostsTables, QueueTables, RunsTables, SandboxesTables, GatewayTables, WebhooksTables, CodeHostTables, IntegrationsTables, TrackerTables, ChatSurfacesTables, TelemetryTables {}
