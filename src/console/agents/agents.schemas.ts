import { Type, type Static, type TSchema } from 'typebox';
import { Egress, EgressInput } from '../../egress/setting.ts';
import { matching } from '../../http/schemas.ts';

export const AGENT_NAME_PATTERN = '^[a-z0-9][a-z0-9._-]{0,62}$';
/** What AGENT_NAME_PATTERN allows, in words. */
export const AGENT_NAME_WORDS = 'lowercase letters, digits, ".", "_" and "-", starting with a letter or digit; at most 63 characters';
export const AVATAR_MAX_BYTES = 512 * 1024;
/** The serialized `context` of one version may not exceed this. */
export const CONTEXT_MAX_BYTES = 64 * 1024;

const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const RefName = Type.String({ minLength: 1, maxLength: 128 });
const Names = (maxItems: number, description: string) => Type.Array(RefName, { maxItems, uniqueItems: true, description });
const Policy = Type.Union([Type.Literal('never_confirm'), Type.Literal('confirm_risky')]);
export { Egress, EgressInput } from '../../egress/setting.ts';

export const AgentVersionInput = Type.Object(
  {
    system_prompt: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 100_000 }))),
    tools: Type.Optional(Nullable(Names(64, 'names from GET /tools'))),
    confirmation_policy: Type.Optional(Nullable(Policy)),
    produces_branch: Type.Optional(Nullable(Type.Boolean())),
    works_on_branch: Type.Optional(Nullable(Type.Boolean({ description: 'null is stored as unset; omit to keep the base value' }))),
    skills: Type.Optional(Nullable(Names(64, 'platform skill names'))),
    mcp_servers: Type.Optional(Nullable(Names(32, 'platform MCP server names'))),
    egress: Type.Optional(Nullable(EgressInput)),
    model: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 128, description: 'a model alias from GET /models; null is stored as unset' }))),
    environment: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 128, description: 'an environment name; null is stored as unset' }))),
    context: Type.Optional(Nullable(Type.Array(Type.Record(Type.String({ maxLength: 128 }), Type.Unknown()), { maxItems: 50 }))),
    note: Type.Optional(Type.String({ maxLength: 2000 })),
    from_version: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 2147483647, description: 'start from this stored version; only fields present change' }))),
  },
  {
    additionalProperties: false,
    description:
      'Without from_version: a whole version; system_prompt is required, the rest default (empty lists, never_confirm, false, allow-all egress). ' +
      'With from_version: that stored version changed by the fields present. null means "not given" except for works_on_branch, model and environment, where it is stored.',
  },
);
export type AgentVersionInput = Static<typeof AgentVersionInput>;

export const AgentVersion = Type.Object({
  version: Type.Integer(),
  note: Type.String(),
  created_by: Type.String(),
  created_at: Type.String(),
  system_prompt: Type.String(),
  tools: Type.Array(Type.String()),
  confirmation_policy: Policy,
  produces_branch: Type.Boolean(),
  works_on_branch: Nullable(Type.Boolean()),
  skills: Type.Array(Type.String()),
  mcp_servers: Type.Array(Type.String()),
  egress: Egress,
  context: Type.Array(Type.Record(Type.String(), Type.Unknown())),
  model: Nullable(Type.String()),
  environment: Nullable(Type.String()),
});
export type AgentVersion = Static<typeof AgentVersion>;

export const VersionMeta = Type.Object({ version: Type.Integer(), note: Type.String(), created_by: Type.String(), created_at: Type.String() });

export const AgentSummary = Type.Object({
  name: Type.String(),
  display_name: Nullable(Type.String()),
  kind: Nullable(Type.String()),
  description: Type.String(),
  avatar_url: Nullable(Type.String()),
  model: Nullable(Type.String()),
  environment: Nullable(Type.String()),
  tool_count: Type.Integer(),
  mcp: Type.Array(Type.String()),
  current_version: Type.Integer(),
  used_by: Type.Integer({ description: 'template versions and teams using the agent' }),
  updated_at: Type.String(),
});
export type AgentSummary = Static<typeof AgentSummary>;

export const Agent = Type.Object({ ...AgentSummary.properties, current: Nullable(AgentVersion) });
export type Agent = Static<typeof Agent>;

const DisplayName = Type.String({ minLength: 1, maxLength: 100 });
const Kind = Type.String({ minLength: 1, maxLength: 64 });
const Description = Type.String({ maxLength: 2000 });

export const AgentCreate = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 63, ...matching(AGENT_NAME_PATTERN, AGENT_NAME_WORDS) }),
    display_name: Type.Optional(Nullable(DisplayName)),
    kind: Type.Optional(Nullable(Kind)),
    description: Type.Optional(Nullable(Description)),
    version: AgentVersionInput,
  },
  { additionalProperties: false },
);
export type AgentCreate = Static<typeof AgentCreate>;

export const AgentPatch = Type.Object(
  {
    display_name: Type.Optional(Nullable(DisplayName)),
    kind: Type.Optional(Nullable(Kind)),
    description: Type.Optional(Nullable(Description)),
  },
  { additionalProperties: false, minProperties: 1, description: 'null clears display_name and kind and empties description' },
);
export type AgentPatch = Static<typeof AgentPatch>;

export const AgentParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 128 }) });
export const AgentVersionParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 128 }), version: Type.Integer({ minimum: 1, maximum: 2147483647 }) });
