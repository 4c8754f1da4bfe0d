import type { AllSpend, ModelProxyClient, TeamSpend } from '../../modelproxy/client.ts';

/** Spend at or above this share of the daily budget is a `warning`. */
export const BUDGET_WARNING_SHARE = 0.8;
export const SPEND_CACHE_MS = 60_000;

export type BudgetState = 'normal' | 'warning' | 'exceeded';

export function budgetStateOf(spentToday: number | null, budgetPerDay: number): BudgetState {
  if (spentToday === null || budgetPerDay <= 0) return 'normal';
  if (spentToday >= budgetPerDay) return 'exceeded';
  if (spentToday >= budgetPerDay * BUDGET_WARNING_SHARE) return 'warning';
  return 'normal';
}

/**
 * Spend as the model proxy counts it, cached for a minute per question (the spec's 60 s), so a
 * busy console asks the proxy at most once a minute for each view. Failures are not cached.
 */
export function createSpendService(deps: { proxy: Pick<ModelProxyClient, 'spend' | 'teamSpend'>; ttlMs?: number; now?: () => number }) {
  const ttl = deps.ttlMs ?? SPEND_CACHE_MS;
  const now = deps.now ?? Date.now;
  const cache = new Map<string, { at: number; value: Promise<unknown> }>();

  function cached<T>(key: string, load: () => Promise<T>): Promise<T> {
    const hit = cache.get(key);
    if (hit && now() - hit.at < ttl) return hit.value as Promise<T>;
    const value = load();
    cache.set(key, { at: now(), value });
    value.catch(() => cache.delete(key));
    if (cache.size > 1000) for (const [k, v] of cache) if (now() - v.at >= ttl) cache.delete(k);
    return value;
  }

  return {
    all: (days: number) => cached<AllSpend>(`all:${days}`, () => deps.proxy.spend({ days })),
    team: (team: string, days: number) => cached<TeamSpend>(`team:${team}:${days}`, () => deps.proxy.teamSpend(team, days)),
    /** A team's spend as the proxy counts it now, for a decision (a new task) rather than a view: a run that just spent the budget is seen at once. The answer refreshes the cache. */
    teamNow(team: string, days: number) {
      cache.delete(`team:${team}:${days}`);
      return cached<TeamSpend>(`team:${team}:${days}`, () => deps.proxy.teamSpend(team, days));
    },
    /** What each team spent today, or null for every team when the proxy cannot say. */
    async spentTodayByTeam(): Promise<Map<string, number> | null> {
      try {
        const all = await cached<AllSpend>('all:1', () => deps.proxy.spend({ days: 1 }));
        return new Map(all.teams.map((t) => [t.team, t.spent_today_usd]));
      } catch {
        return null;
      }
    },
    /** Forget cached answers about a team (its budget changed, or it was archived). */
    forget(team?: string) {
      for (const key of cache.keys()) if (!team || key.startsWith('all:') || key.startsWith(`team:${team}:`)) cache.delete(key);
    },
  };
}

export type SpendService = ReturnType<typeof createSpendService>;
