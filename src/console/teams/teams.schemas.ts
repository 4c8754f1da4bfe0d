import { Type, type Static, type TSchema } from 'typebox';
import { matching } from '../../http/schemas.ts';
import { DASH_NAME_WORDS, MemoryInput, TEMPLATE_NAME } from '../templates/templates.schemas.ts';

export const TEAM_NAME = '^[a-z0-9][a-z0-9-]{0,62}$';
const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const Policy = Type.Union([Type.Literal('never_confirm'), Type.Literal('confirm_risky')]);
export const BudgetState = Type.Union([Type.Literal('normal'), Type.Literal('warning'), Type.Literal('exceeded')], {
  description: 'from today\'s (UTC) spend: exceeded at or above the daily budget (new tasks answer 429), warning at or above 80% of it, normal otherwise',
});
export const TeamState = Type.Union([Type.Literal('running'), Type.Literal('waiting'), Type.Literal('sleeping'), Type.Literal('idle'), Type.Literal('archived')]);
export type TeamState = Static<typeof TeamState>;

export const Link = Type.Object({
  surface: Type.String(),
  external_id: Type.String(),
  label: Type.String(),
  verified: Type.Boolean(),
  verification: Type.Union([Type.Literal('verified'), Type.Literal('unverified'), Type.Literal('not_applicable')]),
});

const teamCommon = {
  name: Type.String(),
  template: Type.Object({ name: Type.String(), version: Nullable(Type.Integer()), hash: Type.String() }),
  lead: Type.String(),
  roles: Type.Array(Type.String()),
  home: Type.Object({
    surface: Type.Union([Type.Literal('chat_a'), Type.Literal('chat_b'), Type.Literal('console'), Type.Literal('none')]),
    room_id: Nullable(Type.String()),
    room_label: Nullable(Type.String()),
  }),
  repo_url: Nullable(Type.String()),
  links: Type.Array(Link),
  state: TeamState,
  status: Type.Union([Type.Literal('provisioning'), Type.Literal('active'), Type.Literal('archived')]),
  active_runs: Type.Integer(),
  spent_usd: Nullable(Type.Number({ description: 'spent today (UTC); null when the model proxy cannot say' })),
  budget_usd_per_day: Type.Number(),
  budget_state: BudgetState,
  last_run_at: Nullable(Type.String()),
  created_by: Type.String(),
  created_at: Type.String(),
};

export const TeamSummary = Type.Object(teamCommon);

const EffectiveMemory = Type.Object({ inject: Type.Boolean(), max_entries: Type.Integer(), write_outcomes: Type.Boolean() });
export const RoleMemory = Type.Object({ ...EffectiveMemory.properties, own: Type.Array(Type.String(), { description: 'the keys the role overrides; [] when it follows the team' }) });

export const RoleSettings = Type.Object({
  role: Type.String(),
  agent: Type.String(),
  model: Type.String(),
  profile: Type.String(),
  provider: Nullable(Type.String()),
  checkpoint_id: Nullable(Type.String()),
  replicas_max: Type.Integer(),
  concurrent_runs: Type.Integer(),
  max_iterations: Nullable(Type.Integer()),
  memory: RoleMemory,
  confirmation_policy: Policy,
  max_budget: Nullable(Type.Number()),
  budget_duration: Nullable(Type.String()),
  rpm_limit: Nullable(Type.Integer()),
  tpm_limit: Nullable(Type.Integer()),
  pipeline_next_role: Nullable(Type.String()),
  skills: Type.Array(Type.String()),
  mcp_servers: Type.Array(Type.String()),
});

export const Team = Type.Object({
  ...teamCommon,
  role_settings: Type.Array(RoleSettings),
  members: Type.Array(Type.Object({ user_id: Type.Integer(), name: Type.String(), email: Nullable(Type.String()), role: Type.String() })),
  settings: Type.Object({
    idle_after_seconds: Type.Integer(),
    deep_sleep_after_seconds: Type.Integer(),
    isolation: Type.Union([Type.Literal('shared'), Type.Literal('dedicated')]),
    rework_rounds: Type.Integer(),
    memory: Type.Optional(EffectiveMemory),
  }),
});

export const HomeInput = Type.Object(
  {
    surface: Type.Union([Type.Literal('chat_a'), Type.Literal('chat_b'), Type.Literal('none')]),
    room_id: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 200, description: 'the chat channel\'s id; required for chat_a and chat_b, refused (422) with none' }))),
    room_label: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 200, description: 'a chat home\'s label is the channel\'s name, read from the chat surface (this value is not used); refused (422) with none' }))),
  },
  { additionalProperties: false, description: 'where the team lives; absent or null: the Console' },
);

export const TeamCreate = Type.Object(
  {
    name: Type.String({ ...matching(TEAM_NAME, DASH_NAME_WORDS), maxLength: 63 }),
    template: Type.Object(
      { name: Type.String({ ...matching(TEMPLATE_NAME, DASH_NAME_WORDS), maxLength: 63 }), version: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 2147483647, description: 'null: the current version' }))) },
      { additionalProperties: false },
    ),
    repo_url: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 2000, ...matching('^(https?://|git@|ssh://)\\S+$', 'an http(s)://, ssh:// or git@ address, without spaces') }))),
    home: Type.Optional(Nullable(HomeInput)),
    budget_usd_per_day: Type.Optional(Nullable(Type.Number({ exclusiveMinimum: 0, maximum: 1_000_000, description: 'null: the template\'s' }))),
  },
  { additionalProperties: false },
);
export type TeamCreate = Static<typeof TeamCreate>;

export const RolePatch = Type.Object(
  {
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    max_iterations: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 10000 }))),
    replicas_max: Type.Optional(Type.Integer({ minimum: 1, maximum: 50 })),
    concurrent_runs: Type.Optional(Type.Integer({ minimum: 1, maximum: 20 })),
    confirmation_policy: Type.Optional(Nullable(Policy)),
    memory: Type.Optional(Nullable(MemoryInput)),
    max_budget: Type.Optional(Type.Unknown({ description: 'not changeable here: 422' })),
    budget_duration: Type.Optional(Type.Unknown({ description: 'not changeable here: 422' })),
    rpm_limit: Type.Optional(Type.Unknown({ description: 'not changeable here: 422' })),
    tpm_limit: Type.Optional(Type.Unknown({ description: 'not changeable here: 422' })),
  },
  { additionalProperties: false },
);
export type RolePatch = Static<typeof RolePatch>;

export const TeamPatch = Type.Object(
  {
    budget_usd_per_day: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1_000_000 })),
    rework_rounds: Type.Optional(Type.Integer({ minimum: 0, maximum: 10 })),
    idle_after_seconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 604800 })),
    deep_sleep_after_seconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 2592000 })),
    memory: Type.Optional(MemoryInput),
    role_settings: Type.Optional(Type.Record(Type.String({ maxLength: 32 }), RolePatch, { maxProperties: 20 })),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description:
      'Sent fields change, others stay. `memory` keys sent are set; `role_settings.<role>.memory` likewise, and null clears the role\'s own layer. A role\'s model-proxy key limits (max_budget, budget_duration, rpm_limit, tpm_limit) cannot be changed here (422).',
  },
);
export type TeamPatch = Static<typeof TeamPatch>;

export const TeamUpgrade = Type.Object(
  { version: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 2147483647, description: 'the template version to move to; null or absent: the current one' }))) },
  { additionalProperties: false },
);

export const TeamListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 1024 })),
    state: Type.Optional(TeamState),
    q: Type.Optional(Type.String({ maxLength: 100, description: 'substring of the name' })),
  },
  { additionalProperties: false },
);

export const TeamParams = Type.Object({ name: Type.String({ ...matching(TEAM_NAME, DASH_NAME_WORDS), maxLength: 63 }) });
export const RoleParams = Type.Object({ name: Type.String({ ...matching(TEAM_NAME, DASH_NAME_WORDS), maxLength: 63 }), role: Type.String({ minLength: 1, maxLength: 32 }) });
