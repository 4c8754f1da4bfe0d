import { Type, type Static } from 'typebox';
import { matching } from '../../http/schemas.ts';

export const TEMPLATE_NAME = '^[a-z0-9][a-z0-9-]{0,62}$';
export const ROLE_NAME = '^[a-z][a-z0-9_-]{0,31}$';
/** What TEMPLATE_NAME (and the names of teams and MCP servers) allow, in words. */
export const DASH_NAME_WORDS = 'lowercase letters, digits and "-", starting with a letter or digit; at most 63 characters';
/** What ROLE_NAME allows, in words. */
export const ROLE_NAME_WORDS = 'lowercase letters, digits, "_" and "-", starting with a letter; at most 32 characters';
export const MAX_ROLES = 20;

const Names = (description: string) => Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { maxItems: 50, description });
const Nullable = <T extends import('typebox').TSchema>(t: T) => Type.Union([t, Type.Null()]);

/** Memory settings a role or team may override; absent keys follow the layer below. */
export const MemoryInput = Type.Object(
  {
    inject: Type.Optional(Type.Boolean({ description: 'put a "team memory" block into a conversation\'s first task (default true)' })),
    max_entries: Type.Optional(Type.Integer({ minimum: 0, maximum: 10, description: '0 to 10 (default 10); 0 turns injection off' })),
    write_outcomes: Type.Optional(Type.Boolean({ description: 'write an outcome entry when a run completes (default true)' })),
  },
  { additionalProperties: false },
);
export type MemoryInput = Static<typeof MemoryInput>;

export const TemplateRoleInput = Type.Object(
  {
    agent: Type.String({ minLength: 1, maxLength: 128, description: 'the agent this role runs' }),
    model: Type.String({ minLength: 1, maxLength: 128, description: 'a model alias (GET /models)' }),
    vm: Type.String({ minLength: 1, maxLength: 128, description: 'an environment (sandbox profile) name; its values are copied into the version' }),
    replicas: Type.Optional(Type.Object({ max: Type.Integer({ minimum: 1, maximum: 50, description: 'how far the role scales out (default 1)' }) }, { additionalProperties: false })),
    concurrent_runs: Type.Optional(Type.Integer({ minimum: 1, maximum: 20, description: 'runs one replica takes (default 1)' })),
    max_iterations: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 10000, description: 'cap on agent-loop iterations per task; null: no cap' }))),
    confirmation_policy: Type.Optional(Nullable(Type.Union([Type.Literal('never_confirm'), Type.Literal('confirm_risky')], { description: 'null: the agent version\'s' }))),
    memory: Type.Optional(MemoryInput),
    max_budget: Type.Optional(Nullable(Type.Number({ exclusiveMinimum: 0, maximum: 1_000_000, description: 'USD cap of the role\'s model-proxy key per budget_duration' }))),
    budget_duration: Type.Optional(Nullable(Type.String({ ...matching('^[1-9][0-9]{0,3}[hd]$', 'a number of hours or days such as 12h, 1d or 30d'), description: 'e.g. 1d, 30d, 12h' }))),
    rpm_limit: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 1_000_000 }))),
    tpm_limit: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 1_000_000_000 }))),
    skills: Type.Optional(Names('platform skills added to the agent\'s')),
    mcp_servers: Type.Optional(Names('platform MCP servers added to the agent\'s')),
  },
  { additionalProperties: false },
);
export type TemplateRoleInput = Static<typeof TemplateRoleInput>;

export const SleepInput = Type.Object(
  {
    idle_after_seconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 604800 })),
    deep_sleep_after_seconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 2592000 })),
  },
  { additionalProperties: false, description: 'the two sleep durations; when given they must equal the top-level ones' },
);

const versionFields = {
  lead: Type.String({ minLength: 1, maxLength: 32, description: 'the role every work item starts with; one of roles' }),
  roles: Type.Record(Type.String({ ...matching(ROLE_NAME, ROLE_NAME_WORDS) }), TemplateRoleInput, { minProperties: 1, maxProperties: MAX_ROLES }),
  sleep: SleepInput,
  idle_after_seconds: Type.Integer({ minimum: 60, maximum: 604800, description: 'idle time before an agent is snapshotted' }),
  deep_sleep_after_seconds: Type.Integer({ minimum: 60, maximum: 2592000, description: 'idle time before deep sleep; at least idle_after_seconds' }),
  budget_usd_per_day: Type.Number({ exclusiveMinimum: 0, maximum: 1_000_000 }),
  isolation: Type.Optional(Type.Union([Type.Literal('shared'), Type.Literal('dedicated')], { description: 'default shared' })),
  requires_repo: Type.Optional(Type.Boolean({ description: 'team creation without repo_url is a 422 (default false)' })),
  rework_rounds: Type.Optional(Type.Integer({ minimum: 0, maximum: 10, description: 'review-and-fix cycles per work item (default 2)' })),
  pipeline: Type.Optional(Type.Record(Type.String({ ...matching(ROLE_NAME, ROLE_NAME_WORDS) }), Type.String({ ...matching(ROLE_NAME, ROLE_NAME_WORDS) }), { maxProperties: MAX_ROLES, description: 'hand-off chain: role to next role' })),
  note: Type.Optional(Type.String({ maxLength: 500 })),
};

/** A whole version's content: the create body less name and description. */
export const TemplateVersionInput = Type.Object(versionFields, { additionalProperties: false });
export type TemplateVersionInput = Static<typeof TemplateVersionInput>;

/**
 * The body of a new version: a whole version, or with `from_version` a stored one with only the
 * fields present changed (an older one alone makes its content current again).
 */
export const TemplateNewVersion = Type.Object(
  {
    ...Type.Partial(TemplateVersionInput).properties,
    from_version: Type.Optional(
      Nullable(Type.Integer({ minimum: 1, maximum: 2147483647, description: 'start from this stored version: only the fields present change; without it lead, roles, sleep, idle_after_seconds, deep_sleep_after_seconds and budget_usd_per_day are required' })),
    ),
  },
  { additionalProperties: false },
);
export type TemplateNewVersion = Static<typeof TemplateNewVersion>;

export const TemplateCreate = Type.Object(
  {
    name: Type.String({ ...matching(TEMPLATE_NAME, DASH_NAME_WORDS), maxLength: 63 }),
    description: Type.Optional(Type.String({ maxLength: 2000 })),
    ...versionFields,
  },
  { additionalProperties: false },
);
export type TemplateCreate = Static<typeof TemplateCreate>;

export const TemplatePatch = Type.Object({ description: Type.Union([Type.String({ maxLength: 2000 }), Type.Null()]) }, { additionalProperties: false });

const MemorySettings = Type.Object({ inject: Type.Boolean(), max_entries: Type.Integer(), write_outcomes: Type.Boolean() });

export const TemplateRole = Type.Object({
  agent: Type.String(),
  model: Type.String(),
  vm: Type.String(),
  profile: Type.String(),
  provider: Type.String(),
  checkpoint_id: Nullable(Type.String()),
  vcpus: Nullable(Type.Integer()),
  memory_mib: Nullable(Type.Integer()),
  disk_gib: Nullable(Type.Integer()),
  replicas: Type.Object({ max: Type.Integer() }),
  concurrent_runs: Type.Integer(),
  max_iterations: Nullable(Type.Integer()),
  confirmation_policy: Nullable(Type.String()),
  memory: Type.Object({ inject: Type.Optional(Type.Boolean()), max_entries: Type.Optional(Type.Integer()), write_outcomes: Type.Optional(Type.Boolean()) }),
  max_budget: Nullable(Type.Number()),
  budget_duration: Nullable(Type.String()),
  rpm_limit: Nullable(Type.Integer()),
  tpm_limit: Nullable(Type.Integer()),
  skills: Type.Array(Type.String()),
  mcp_servers: Type.Array(Type.String()),
});
export type TemplateRole = Static<typeof TemplateRole>;

export const SleepSettings = Type.Object({ idle_after_seconds: Type.Integer(), deep_sleep_after_seconds: Type.Integer() });

export const TeamTemplateVersion = Type.Object({
  version: Type.Integer(),
  note: Type.String(),
  created_by: Type.String(),
  created_at: Type.String(),
  content_sha256: Nullable(Type.String()),
  lead: Nullable(Type.String()),
  roles: Type.Record(Type.String(), TemplateRole),
  sleep: Type.Optional(SleepSettings),
  idle_after_seconds: Type.Integer(),
  deep_sleep_after_seconds: Type.Integer(),
  budget_usd_per_day: Nullable(Type.Number()),
  isolation: Type.Union([Type.Literal('shared'), Type.Literal('dedicated')]),
  requires_repo: Type.Boolean(),
  rework_rounds: Nullable(Type.Integer()),
  pipeline: Type.Optional(Type.Record(Type.String(), Type.String())),
});
export type TeamTemplateVersion = Static<typeof TeamTemplateVersion>;
/** What a version stores: the version less its metadata. */
export type TemplateContent = Omit<TeamTemplateVersion, 'version' | 'note' | 'created_by' | 'created_at' | 'content_sha256'>;

export const TeamTemplateSummary = Type.Object({
  name: Type.String(),
  description: Type.String(),
  current_version: Type.Integer(),
  updated_at: Type.String(),
  used_by: Type.Integer({ description: 'active teams created from this template' }),
  lead: Type.Optional(Nullable(Type.String())),
  roles: Type.Array(Type.String()),
});

export const TeamTemplate = Type.Object({
  name: Type.String(),
  description: Type.String(),
  current_version: Type.Integer(),
  updated_at: Type.String(),
  used_by: Type.Integer(),
  current: Nullable(TeamTemplateVersion),
});

export const VersionMeta = Type.Object({ version: Type.Integer(), note: Type.String(), created_by: Type.String(), created_at: Type.String() });
export { MemorySettings };
