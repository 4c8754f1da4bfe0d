import { Type, type Static } from 'typebox';

/**
 * The shapes of the model proxy's admin API, once: the routes validate and serialize with them,
 * and the console's client (client.ts) takes its types from them, so the two cannot drift.
 */

/** Names: teams, roles and agents as the console spells them. */
export const Name = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$' });
export const Usd = Type.Number({ minimum: 0, maximum: 1_000_000 });
export const Models = Type.Array(Type.String({ minLength: 1, maxLength: 63 }), { maxItems: 100 });
export const Duration = Type.String({ maxLength: 8 });
export const PerMinute = Type.Integer({ minimum: 1, maximum: 100_000_000 });

export const Limits = {
  models: Type.Optional(Models),
  max_budget: Type.Optional(Type.Union([Usd, Type.Null()])),
  budget_duration: Type.Optional(Type.Union([Duration, Type.Null()])),
  rpm_limit: Type.Optional(Type.Union([PerMinute, Type.Null()])),
  tpm_limit: Type.Optional(Type.Union([PerMinute, Type.Null()])),
};
export const MintBody = Type.Object({ team: Name, role: Name, agent: Name, ...Limits }, { additionalProperties: false });
export const UpdateBody = Type.Object(Limits, { additionalProperties: false, minProperties: 1 });
export const BudgetBody = Type.Object({ usd_per_day: Type.Union([Usd, Type.Null()]) }, { additionalProperties: false });
export const KeyParams = Type.Object({ key_id: Type.String({ pattern: '^mpk_[0-9a-f]{16}$' }) });
export const TeamParams = Type.Object({ team: Name });
export const Days = Type.Integer({ minimum: 1, maximum: 366, default: 30 });
export const Day = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' });

export const Key = Type.Object({
  key_id: Type.String(),
  key_prefix: Type.String(),
  team: Type.String(),
  role: Type.String(),
  agent: Type.String(),
  models: Type.Array(Type.String()),
  max_budget: Type.Union([Type.Number(), Type.Null()]),
  budget_duration: Type.Union([Type.String(), Type.Null()]),
  spend_usd: Type.Number({ description: 'spent in the current budget window' }),
  spend_total_usd: Type.Number(),
  reserved_usd: Type.Number({ description: 'held by requests in flight' }),
  window_started_at: Type.String(),
  rpm_limit: Type.Union([Type.Integer(), Type.Null()]),
  tpm_limit: Type.Union([Type.Integer(), Type.Null()]),
  last_used_at: Type.Union([Type.String(), Type.Null()]),
  revoked_at: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String(),
  updated_at: Type.String(),
});
export const MintedKey = Type.Object({ ...Key.properties, key: Type.String({ description: 'the virtual key; shown only in this answer' }) });
export const DaySpend = Type.Object({ date: Type.String(), spend_usd: Type.Number(), tokens: Type.Integer(), requests: Type.Integer() });
export const Totals = Type.Object({ spend_usd: Type.Number(), tokens: Type.Integer(), requests: Type.Integer() });
export const TeamSpend = Type.Object({
  team: Type.String(),
  days: Type.Integer(),
  budget_usd_per_day: Type.Union([Type.Number(), Type.Null()]),
  spent_today_usd: Type.Number(),
  reserved_usd: Type.Number(),
  series: Type.Array(DaySpend),
  totals: Totals,
});
export const AllSpend = Type.Object({
  days: Type.Integer(),
  series: Type.Array(DaySpend),
  totals: Totals,
  teams: Type.Array(
    Type.Object({ team: Type.String(), budget_usd_per_day: Type.Union([Type.Number(), Type.Null()]), spent_today_usd: Type.Number(), series: Type.Array(DaySpend), totals: Totals }),
  ),
});
export const SpendRow = Type.Object({
  date: Type.String(),
  team: Type.String(),
  role: Type.String(),
  key_id: Type.String(),
  agent: Type.Union([Type.String(), Type.Null()]),
  spend_usd: Type.Number(),
  tokens_in: Type.Integer(),
  tokens_out: Type.Integer(),
  requests: Type.Integer(),
});
export const LogLine = Type.Object({
  id: Type.Integer(),
  at: Type.String(),
  team: Type.Union([Type.String(), Type.Null()]),
  role: Type.Union([Type.String(), Type.Null()]),
  key_id: Type.Union([Type.String(), Type.Null()]),
  model: Type.Union([Type.String(), Type.Null()]),
  stream: Type.Boolean(),
  tokens_in: Type.Integer(),
  tokens_out: Type.Integer(),
  cost_usd: Type.Number(),
  status: Type.Integer(),
  latency_ms: Type.Integer(),
  upstream_request_id: Type.Union([Type.String(), Type.Null()]),
  request_id: Type.Union([Type.String(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
});
export const Limit = Type.Integer({ minimum: 1, maximum: 1000, default: 100 });
export const KeyPage = Type.Object({ items: Type.Array(Key), next_cursor: Type.Union([Type.String(), Type.Null()]) });
export const RevokedTeamKeys = Type.Object({ team: Type.String(), revoked: Type.Integer(), key_ids: Type.Array(Type.String()) });
export const TeamBudget = Type.Object({ team: Type.String(), budget_usd_per_day: Type.Union([Type.Number(), Type.Null()]) });

export type MintKeyInput = Static<typeof MintBody>;
export type KeyLimitsInput = Static<typeof UpdateBody>;
export type ProxyKey = Static<typeof Key>;
export type MintedProxyKey = Static<typeof MintedKey>;
export type DaySpend = Static<typeof DaySpend>;
export type SpendTotals = Static<typeof Totals>;
export type TeamSpend = Static<typeof TeamSpend>;
export type AllSpend = Static<typeof AllSpend>;
export type KeyPage = Static<typeof KeyPage>;
export type RevokedTeamKeys = Static<typeof RevokedTeamKeys>;
export type TeamBudget = Static<typeof TeamBudget>;
