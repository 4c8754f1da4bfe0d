/**
 * The Console API's shapes as the server declares them: each is the `Static` type of a TypeBox
 * schema in `src/console/<resource>/<resource>.schemas.ts`. The imports are type-only, so nothing
 * of the server reaches the bundle; a shape the server changes fails `npm run typecheck` here.
 */
import type { Static } from 'typebox';
import type * as agents from '../../src/console/agents/agents.schemas.ts';
import type * as audit from '../../src/console/audit/audit.schemas.ts';
import type * as catalog from '../../src/console/catalog/catalog.schemas.ts';
import type * as documents from '../../src/console/documents/documents.schemas.ts';
import type * as environments from '../../src/console/environments/environments.schemas.ts';
import type * as hosts from '../../src/console/hosts/hosts.schemas.ts';
import type * as imports from '../../src/console/import/import.schemas.ts';
import type * as integrations from '../../src/console/integrations/integrations.schemas.ts';
import type * as mcpServers from '../../src/console/mcp-servers/mcp-servers.schemas.ts';
import type * as runs from '../../src/console/runs/runs.schemas.ts';
import type * as secrets from '../../src/console/secrets/secrets.schemas.ts';
import type * as session from '../../src/console/session/session.schemas.ts';
import type * as skills from '../../src/console/skills/skills.schemas.ts';
import type * as teams from '../../src/console/teams/teams.schemas.ts';
import type * as templates from '../../src/console/templates/templates.schemas.ts';
import type * as users from '../../src/console/users/users.schemas.ts';

export type Role = Static<typeof users.RoleSchema>;
export type User = Static<typeof users.User>;
export type UserWithSetup = Static<typeof users.UserWithSetup>;
export type SessionInfo = Static<typeof session.SessionInfo>;
export type SessionUser = SessionInfo['user'];
export type Token = Static<typeof session.TokenSchema>;
export type NewToken = Static<typeof session.NewToken>;
export type Onboarding = Static<typeof session.Onboarding>;

export type AgentSummary = Static<typeof agents.AgentSummary>;
export type Agent = Static<typeof agents.Agent>;
export type Egress = Static<typeof agents.Egress>;
export type VersionMeta = Static<typeof agents.VersionMeta>;
export type ModelEntry = Static<typeof catalog.ModelEntry>;
export type ToolEntry = Static<typeof catalog.ToolEntry>;
export type Environment = Static<typeof environments.Environment>;
export type TemplateSummary = Static<typeof templates.TeamTemplateSummary>;
export type Template = Static<typeof templates.TeamTemplate>;
export type TemplateVersion = Static<typeof templates.TeamTemplateVersion>;
export type TeamSummary = Static<typeof teams.TeamSummary>;
export type Team = Static<typeof teams.Team>;
export type RoleSetting = Static<typeof teams.RoleSettings>;
export type DocumentSummary = Static<typeof documents.DocumentSummary>;
export type Document = Static<typeof documents.DocumentSchema>;
export type McpServer = Static<typeof mcpServers.McpServer>;
export type SkillSummary = Static<typeof skills.SkillSummary>;
export type Skill = Static<typeof skills.Skill>;
export type SecretRef = Static<typeof secrets.SecretReference>;
export type Integration = Static<typeof integrations.Integration>;
export type IntegrationSettingField = Static<typeof integrations.IntegrationSettingField>;
export type IntegrationSecret = Static<typeof integrations.IntegrationSecret>;
export type AuditEntry = Static<typeof audit.AuditEntry>;
export type SandboxHosts = Static<typeof hosts.SandboxHosts>;
export type ImportPlan = Static<typeof imports.ImportPlan>;
export type PlanEntry = Static<typeof imports.PlanEntry>;

export type RunState = Static<typeof runs.RunStateSchema>;
export type PostKind = Static<typeof runs.PostKindSchema>;
export type RunSummary = Static<typeof runs.RunSummary>;
export type RunTask = Static<typeof runs.RunTask>;
export type Run = Static<typeof runs.Run>;
export type Post = Static<typeof runs.Post>;
export type TraceSpan = Static<typeof runs.TraceSpan>;
export type Trace = Static<typeof runs.Trace>;
