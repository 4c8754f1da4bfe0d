import crypto from 'node:crypto';
import { recordAudit, type Actor } from '../audit/audit.ts';
import { hashToken } from '../auth/credentials.ts';
import type { Transaction } from 'kysely';
import type { Db } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import { toUsd } from '../db/parsers.ts';
import type { ModelCatalog } from '../models/catalog.ts';
import { durationToInterval, utcDay } from './durations.ts';
import { proxyErrors } from './errors.ts';
import type { Admission } from './admission/admission.ts';
import * as store from './modelproxy.store.ts';

export interface KeyLimits {
  models?: string[];
  max_budget?: number | null;
  budget_duration?: string | null;
  rpm_limit?: number | null;
  tpm_limit?: number | null;
}

export interface MintInput extends KeyLimits {
  team: string;
  role: string;
  agent: string;
}

const round = toUsd;

function presentKey(k: NonNullable<Awaited<ReturnType<typeof store.getKey>>>) {
  return {
    key_id: k.key_id,
    key_prefix: k.key_prefix,
    team: k.team,
    role: k.role,
    agent: k.agent,
    models: k.models,
    max_budget: k.max_budget,
    budget_duration: k.budget_duration,
    spend_usd: round(Number(k.window_spend)),
    spend_total_usd: round(Number(k.spend_total)),
    reserved_usd: round(Number(k.reserved)),
    window_started_at: k.window_started_at,
    rpm_limit: k.rpm_limit,
    tpm_limit: k.tpm_limit,
    last_used_at: k.last_used_at,
    revoked_at: k.revoked_at,
    created_at: k.created_at,
    updated_at: k.updated_at,
  };
}
export type KeyView = ReturnType<typeof presentKey>;

/** Fills a per-day series (oldest first) with zero days where nothing was spent. */
function series(rows: store.DayRow[], days: number) {
  const byDate = new Map(rows.map((r) => [r.date, r]));
  const out = [];
  for (let i = days - 1; i >= 0; i--) {
    const date = utcDay(-i);
    const r = byDate.get(date);
    out.push({ date, spend_usd: round(Number(r?.spend_usd ?? 0)), tokens: Number(r?.tokens ?? 0), requests: Number(r?.requests ?? 0) });
  }
  return out;
}

function totals(s: Array<{ spend_usd: number; tokens: number; requests: number }>) {
  return {
    spend_usd: round(s.reduce((a, d) => a + d.spend_usd, 0)),
    tokens: s.reduce((a, d) => a + d.tokens, 0),
    requests: s.reduce((a, d) => a + d.requests, 0),
  };
}

/** The admin side of the model proxy: keys, team budgets, spend. Every write is audited in its transaction. */
/**
 * `admission` is told of every change to limits: admission that keeps them in memory must hear
 * of each (pass it always). Its `drain`, when it has one, writes the settlements it queued behind
 * answers already sent, before a team's spend is read.
 */
export function createModelProxyService(deps: { db: Db; catalog: ModelCatalog; admission: Pick<Admission, 'limitsChanged'> & Partial<Pick<Admission, 'drain'>> }) {
  const { db, catalog } = deps;
  /** After a commit that changed limits: admission that keeps them in memory rereads them before the answer goes out. */
  const limitsChanged = (target: { keyId?: string; team?: string }) => deps.admission.limitsChanged(target);
  /**
   * Reads a team's state and its daily rollup as of one moment: a settlement writes both in one
   * transaction, so two reads on two pooled connections could show its request counted and its
   * cost not yet (a settlement of another proxy committing between them).
   */
  const oneSnapshot = <T>(read: (q: Transaction<Database>) => Promise<T>) => db.transaction().setIsolationLevel('repeatable read').execute(read);

  function checkLimits(l: KeyLimits): { interval?: string | null } {
    const errors: string[] = [];
    let param: string | null = null;
    for (const m of l.models ?? []) {
      if (!catalog.get(m)) {
        errors.push(`models: "${m}" is not a model alias`);
        param ??= 'models';
      }
    }
    let interval: string | null | undefined;
    if (l.budget_duration !== undefined) {
      interval = l.budget_duration === null ? null : durationToInterval(l.budget_duration);
      if (l.budget_duration !== null && !interval) {
        errors.push('budget_duration: must be a number and a unit: s, m, h, d or mo (e.g. "30d")');
        param ??= 'budget_duration';
      }
    }
    if (errors.length) throw proxyErrors.unprocessable(errors.join('; '), param);
    return { interval };
  }

  return {
    /** Mints a key; the key itself is in the answer once and only its hash is kept. */
    async mintKey(actor: Actor, input: MintInput) {
      const { interval } = checkLimits(input);
      const key = `sk-ch-${crypto.randomBytes(24).toString('base64url')}`;
      const keyId = `mpk_${crypto.randomBytes(8).toString('hex')}`;
      const row = await db.transaction().execute(async (trx) => {
        await store.ensureTeam(trx, input.team);
        const created = await store.insertKey(trx, {
          key_id: keyId,
          key_hash: hashToken(key),
          key_prefix: key.slice(0, 10),
          team: input.team,
          role: input.role,
          agent: input.agent,
          models: [...new Set(input.models ?? [])],
          max_budget: input.max_budget ?? null,
          budget_duration: input.budget_duration ?? null,
          budget_interval: interval ?? null,
          rpm_limit: input.rpm_limit ?? null,
          tpm_limit: input.tpm_limit ?? null,
        });
        await recordAudit(trx, actor, 'modelproxy.key.create', { type: 'model_key', id: keyId }, { team: input.team, role: input.role, agent: input.agent });
        return created;
      });
      await limitsChanged({ team: input.team });
      return { ...presentKey(row), key };
    },

    async getKey(keyId: string) {
      const row = await store.getKey(db, keyId);
      if (!row) throw proxyErrors.notFound(`no key "${keyId}"`);
      return presentKey(row);
    },

    async listKeys(opts: { team?: string; cursor?: string; limit: number; includeRevoked: boolean }) {
      const rows = await store.listKeys(db, { team: opts.team, afterKeyId: opts.cursor, limit: opts.limit, includeRevoked: opts.includeRevoked });
      const more = rows.length > opts.limit;
      const items = rows.slice(0, opts.limit).map(presentKey);
      return { items, next_cursor: more ? items[items.length - 1].key_id : null };
    },

    /** Changes a key's models and limits; sent fields are set, others stay. A changed duration starts a new window. */
    async updateKey(actor: Actor, keyId: string, limits: KeyLimits) {
      const { interval } = checkLimits(limits);
      const set: Parameters<typeof store.updateKeyLimits>[2] = {};
      if (limits.models !== undefined) set.models = [...new Set(limits.models)];
      if (limits.max_budget !== undefined) set.max_budget = limits.max_budget;
      if (limits.budget_duration !== undefined) {
        set.budget_duration = limits.budget_duration;
        set.budget_interval = interval ?? null;
      }
      if (limits.rpm_limit !== undefined) set.rpm_limit = limits.rpm_limit;
      if (limits.tpm_limit !== undefined) set.tpm_limit = limits.tpm_limit;
      const row = await db.transaction().execute(async (trx) => {
        const updated = await store.updateKeyLimits(trx, keyId, set);
        if (!updated) throw proxyErrors.notFound(`no key "${keyId}"`);
        await recordAudit(trx, actor, 'modelproxy.key.update', { type: 'model_key', id: keyId }, { fields: Object.keys(set).filter((f) => f !== 'budget_interval') });
        return updated;
      });
      await limitsChanged({ keyId });
      return presentKey(row);
    },

    async revokeKey(actor: Actor, keyId: string) {
      const row = await db.transaction().execute(async (trx) => {
        const revoked = await store.revokeKey(trx, keyId);
        if (!revoked) throw proxyErrors.notFound(`no key "${keyId}"`);
        await recordAudit(trx, actor, 'modelproxy.key.revoke', { type: 'model_key', id: keyId }, { team: revoked.team, role: revoked.role });
        return revoked;
      });
      await limitsChanged({ keyId });
      return presentKey(row);
    },

    async revokeTeamKeys(actor: Actor, team: string) {
      const result = await db.transaction().execute(async (trx) => {
        const ids = await store.revokeTeamKeys(trx, team);
        await recordAudit(trx, actor, 'modelproxy.team.revoke_keys', { type: 'team', id: team }, { keys: ids.length });
        return { team, revoked: ids.length, key_ids: ids };
      });
      await limitsChanged({ team });
      return result;
    },

    async setTeamBudget(actor: Actor, team: string, usdPerDay: number | null) {
      const result = await db.transaction().execute(async (trx) => {
        const row = await store.setTeamBudget(trx, team, usdPerDay);
        await recordAudit(trx, actor, 'modelproxy.team.budget', { type: 'team', id: team }, { budget_usd_per_day: usdPerDay });
        return { team: row.team, budget_usd_per_day: row.budget_usd_per_day };
      });
      await limitsChanged({ team });
      return result;
    },

    /** A team's budget, what it spent today (settled) and holds reserved, and its per-UTC-day series. */
    async teamSpend(team: string, days: number) {
      // What calls already answered cost is settled behind the answer: written first, so a run
      // refused for its budget is followed by a spend that shows it (the tasks route decides on it).
      await deps.admission.drain?.();
      const [state, rows] = await oneSnapshot(async (q) => [await store.teamState(q, team), await store.spendByTeamDay(q, { from: utcDay(-(days - 1)), team })] as const);
      const s = series(rows, days);
      return {
        team,
        days,
        budget_usd_per_day: state?.budget_usd_per_day ?? null,
        spent_today_usd: round(Number(state?.spent_today ?? 0)),
        reserved_usd: round(Number(state?.reserved ?? 0)),
        series: s,
        totals: totals(s),
      };
    },

    /** Every team with a budget row or spend in the window, each with its series; plus all teams summed per day. */
    async spend(days: number) {
      const [states, rows] = await oneSnapshot(async (q) => [await store.teamStates(q), await store.spendByTeamDay(q, { from: utcDay(-(days - 1)) })] as const);
      const byTeam = new Map<string, store.DayRow[]>();
      for (const r of rows) byTeam.set(r.team, [...(byTeam.get(r.team) ?? []), r]);
      const stateOf = new Map(states.map((s) => [s.team, s]));
      const names = [...new Set([...states.map((s) => s.team), ...byTeam.keys()])].sort();
      const teams = names.map((team) => {
        const s = series(byTeam.get(team) ?? [], days);
        const st = stateOf.get(team);
        return { team, budget_usd_per_day: st?.budget_usd_per_day ?? null, spent_today_usd: round(Number(st?.spent_today ?? 0)), series: s, totals: totals(s) };
      });
      const all = series(
        [...rows.reduce((m, r) => {
          const cur = m.get(r.date) ?? { team: '', date: r.date, spend_usd: 0, tokens: 0, requests: 0 };
          m.set(r.date, { ...cur, spend_usd: cur.spend_usd + Number(r.spend_usd), tokens: cur.tokens + Number(r.tokens), requests: cur.requests + Number(r.requests) });
          return m;
        }, new Map<string, store.DayRow>()).values()],
        days,
      );
      return { days, series: all, totals: totals(all), teams };
    },

    /** Rollup rows by team, role, key and UTC day. */
    async spendRows(opts: { from: string; to: string; team?: string; role?: string; keyId?: string; limit: number }) {
      const rows = await store.spendRows(db, opts);
      return {
        items: rows.map((r) => ({
          date: r.date,
          team: r.team,
          role: r.role,
          key_id: r.key_id,
          agent: r.agent ?? null,
          spend_usd: round(Number(r.spend_usd)),
          tokens_in: Number(r.tokens_in),
          tokens_out: Number(r.tokens_out),
          requests: Number(r.requests),
        })),
      };
    },

    async requests(opts: { team: string; cursor?: number; limit: number }) {
      const rows = await store.requestLog(db, { team: opts.team, beforeId: opts.cursor, limit: opts.limit });
      const more = rows.length > opts.limit;
      const items = rows.slice(0, opts.limit).map((r) => ({ ...r, cost_usd: round(Number(r.cost_usd)) }));
      return { items, next_cursor: more ? String(items[items.length - 1].id) : null };
    },
  };
}

export type ModelProxyService = ReturnType<typeof createModelProxyService>;
