import { sql, type Transaction } from 'kysely';
import type { Db } from '../db/database.ts';
import type { Database } from '../db/schema.ts';

type Q = Db | Transaction<Database>;

const keyColumns = [
  'key_id',
  'key_prefix',
  'team',
  'role',
  'agent',
  'models',
  'max_budget',
  'budget_duration',
  'window_started_at',
  'window_spend',
  'spend_total',
  'reserved',
  'rpm_limit',
  'tpm_limit',
  'last_used_at',
  'revoked_at',
  'created_at',
  'updated_at',
  'row_version',
] as const;

export type KeyRow = Awaited<ReturnType<typeof getKey>> & {};

export async function insertKey(
  q: Q,
  k: { key_id: string; key_hash: string; key_prefix: string; team: string; role: string; agent: string; models: string[]; max_budget: number | null; budget_duration: string | null; budget_interval: string | null; rpm_limit: number | null; tpm_limit: number | null },
) {
  return q
    .insertInto('mp_keys')
    .values({ ...k, window_started_at: sql<string>`now()` as unknown as string })
    .returning(keyColumns)
    .executeTakeFirstOrThrow();
}

export async function getKey(q: Q, keyId: string) {
  return q.selectFrom('mp_keys').select(keyColumns).where('key_id', '=', keyId).executeTakeFirst();
}

export async function listKeys(q: Q, opts: { team?: string; afterKeyId?: string; limit: number; includeRevoked: boolean }) {
  let query = q.selectFrom('mp_keys').select(keyColumns).orderBy('key_id').limit(opts.limit + 1);
  if (opts.team) query = query.where('team', '=', opts.team);
  if (opts.afterKeyId) query = query.where('key_id', '>', opts.afterKeyId);
  if (!opts.includeRevoked) query = query.where('revoked_at', 'is', null);
  return query.execute();
}

export async function updateKeyLimits(
  q: Q,
  keyId: string,
  set: Partial<{ models: string[]; max_budget: number | null; budget_duration: string | null; budget_interval: string | null; rpm_limit: number | null; tpm_limit: number | null }>,
) {
  return q
    .updateTable('mp_keys')
    .set({ ...set, updated_at: sql<string>`now()` as unknown as string, row_version: sql`nextval('row_version_seq')` } as any)
    .where('key_id', '=', keyId)
    .returning(keyColumns)
    .executeTakeFirst();
}

export async function revokeKey(q: Q, keyId: string) {
  return q
    .updateTable('mp_keys')
    .set({ revoked_at: sql<string>`coalesce(revoked_at, now())` as unknown as string, updated_at: sql<string>`now()` as unknown as string, row_version: sql`nextval('row_version_seq')` } as any)
    .where('key_id', '=', keyId)
    .returning(keyColumns)
    .executeTakeFirst();
}

export async function revokeTeamKeys(q: Q, team: string): Promise<string[]> {
  const rows = await q
    .updateTable('mp_keys')
    .set({ revoked_at: sql<string>`now()` as unknown as string, updated_at: sql<string>`now()` as unknown as string, row_version: sql`nextval('row_version_seq')` } as any)
    .where('team', '=', team)
    .where('revoked_at', 'is', null)
    .returning('key_id')
    .execute();
  return rows.map((r) => r.key_id);
}

/** Makes sure the team has a budget row (no budget until one is set). */
export async function ensureTeam(q: Q, team: string) {
  await q.insertInto('mp_teams').values({ team, budget_usd_per_day: null }).onConflict((oc) => oc.column('team').doNothing()).execute();
}

export async function setTeamBudget(q: Q, team: string, usdPerDay: number | null) {
  return q
    .insertInto('mp_teams')
    .values({ team, budget_usd_per_day: usdPerDay })
    .onConflict((oc) =>
      oc.column('team').doUpdateSet({ budget_usd_per_day: usdPerDay, updated_at: sql<string>`now()` as unknown as string, row_version: sql`nextval('row_version_seq')` } as any),
    )
    .returning(['team', 'budget_usd_per_day'])
    .executeTakeFirstOrThrow();
}

/** A team's budget and what it spent (settled) and holds reserved in the current UTC day. */
export async function teamState(q: Q, team: string) {
  return q
    .selectFrom('mp_teams')
    .select([
      'team',
      'budget_usd_per_day',
      sql<number>`case when day = (now() at time zone 'utc')::date then day_spend else 0 end`.as('spent_today'),
      'reserved',
    ])
    .where('team', '=', team)
    .executeTakeFirst();
}

export async function teamStates(q: Q) {
  return q
    .selectFrom('mp_teams')
    .select(['team', 'budget_usd_per_day', sql<number>`case when day = (now() at time zone 'utc')::date then day_spend else 0 end`.as('spent_today'), 'reserved'])
    .orderBy('team')
    .execute();
}

export interface DayRow {
  team: string;
  date: string;
  spend_usd: number;
  tokens: number;
  requests: number;
}

/** Per team and UTC day from the rollup (index on team, day or day, team; never the request log). */
export async function spendByTeamDay(q: Q, opts: { from: string; team?: string }): Promise<DayRow[]> {
  let query = q
    .selectFrom('mp_spend_daily')
    .select([
      'team',
      sql<string>`day::text`.as('date'),
      sql<number>`sum(spend_usd)`.as('spend_usd'),
      sql<number>`sum(tokens_in + tokens_out)`.as('tokens'),
      sql<number>`sum(requests)`.as('requests'),
    ])
    .where('day', '>=', opts.from)
    .groupBy(['team', 'day'])
    .orderBy('team')
    .orderBy('day');
  if (opts.team) query = query.where('team', '=', opts.team);
  return query.execute();
}

/** Rollup rows filtered by team, role, key and a day range, with the key's agent. */
export async function spendRows(q: Q, opts: { from: string; to: string; team?: string; role?: string; keyId?: string; limit: number }) {
  let query = q
    .selectFrom('mp_spend_daily as d')
    .leftJoin('mp_keys as k', 'k.key_id', 'd.key_id')
    .select([
      sql<string>`d.day::text`.as('date'),
      'd.team',
      'd.role',
      'd.key_id',
      'k.agent',
      'd.spend_usd',
      'd.tokens_in',
      'd.tokens_out',
      'd.requests',
    ])
    .where('d.day', '>=', opts.from)
    .where('d.day', '<=', opts.to)
    .orderBy('d.day')
    .orderBy('d.team')
    .orderBy('d.role')
    .orderBy('d.key_id')
    .limit(opts.limit);
  if (opts.team) query = query.where('d.team', '=', opts.team);
  if (opts.role) query = query.where('d.role', '=', opts.role);
  if (opts.keyId) query = query.where('d.key_id', '=', opts.keyId);
  return query.execute();
}

/** The request log, newest first, by team (index on team, id). */
export async function requestLog(q: Q, opts: { team: string; beforeId?: number; limit: number }) {
  let query = q
    .selectFrom('mp_request_log')
    .select(['id', 'at', 'team', 'role', 'key_id', 'model', 'stream', 'tokens_in', 'tokens_out', 'cost_usd', 'status', 'latency_ms', 'upstream_request_id', 'request_id', 'error'])
    .where('team', '=', opts.team)
    .orderBy('id', 'desc')
    .limit(opts.limit + 1);
  if (opts.beforeId) query = query.where('id', '<', opts.beforeId);
  return query.execute();
}
