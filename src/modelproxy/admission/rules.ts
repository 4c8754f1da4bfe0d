import { addDuration, utcDay, type Duration } from '../durations.ts';
import type { ReserveOutcome } from './admission.ts';

/**
 * The rules of admission, as pure functions of a key's and a team's limits and counters and
 * the time: the same rules mp_reserve and mp_settle apply in SQL (migration 0300), for the
 * ledger, which keeps the counters in memory. Money is in whole nano-dollars (see ledger.ts).
 */

export interface KeyLimits {
  models: string[];
  maxBudget: number | null;
  duration: Duration | null;
  rpmLimit: number | null;
  tpmLimit: number | null;
  revoked: boolean;
}

export interface KeyCounters {
  windowStart: number;
  windowSpend: number;
  spendTotal: number;
  reserved: number;
  rlMinute: number;
  rlRequests: number;
  rlTokens: number;
}

export interface TeamCounters {
  /** Whether the team has a budget row; without one, nothing is checked or counted per team. */
  exists: boolean;
  budget: number | null;
  day: string;
  daySpend: number;
  reserved: number;
}

/** A reservation being settled: what it held. */
export interface Held {
  amount: number;
  tokens: number;
  rlMinute: number;
}

export const minuteOf = (ms: number) => Math.floor(ms / 60_000) * 60_000;
export const secondsUntil = (at: number, now: number) => Math.max(1, Math.ceil((at - now) / 1000));
const nextUtcMidnight = (now: number) => Date.parse(`${utcDay(1, now)}T00:00:00.000Z`);

export type Admitted =
  | { outcome: Exclude<ReserveOutcome, 'ok'>; retryAfter: number | null }
  | { outcome: 'ok'; key: Omit<KeyCounters, 'spendTotal'>; team: Pick<TeamCounters, 'day' | 'daySpend' | 'reserved'> | null };

/**
 * mp_reserve's rules: authenticate, check the limits in the same order (model, requests and
 * tokens per minute, the key's budget in its window, the team's for the UTC day), and give the
 * counters after reserving `amount` (the worst case) and counting the request and its `tokens`.
 */
export function admit(k: (KeyLimits & KeyCounters) | null, t: TeamCounters | undefined, r: { model: string; amount: number; tokens: number }, now: number): Admitted {
  if (!k || k.revoked) return { outcome: 'invalid_key', retryAfter: null };
  if (k.models.length > 0 && !k.models.includes(r.model)) return { outcome: 'model_not_allowed', retryAfter: null };
  let windowStart = k.windowStart;
  let windowSpend = k.windowSpend;
  if (k.duration && now >= addDuration(windowStart, k.duration)) {
    windowStart = now;
    windowSpend = 0;
  }
  const minute = minuteOf(now);
  const sameMinute = k.rlMinute === minute;
  const requests = sameMinute ? k.rlRequests : 0;
  const tokens = sameMinute ? k.rlTokens : 0;
  if (k.rpmLimit !== null && requests >= k.rpmLimit) return { outcome: 'rpm', retryAfter: secondsUntil(minute + 60_000, now) };
  if (k.tpmLimit !== null && tokens >= k.tpmLimit) return { outcome: 'tpm', retryAfter: secondsUntil(minute + 60_000, now) };
  if (k.maxBudget !== null && windowSpend + k.reserved >= k.maxBudget) {
    return { outcome: 'key_budget', retryAfter: k.duration ? secondsUntil(addDuration(windowStart, k.duration), now) : null };
  }
  let team: Pick<TeamCounters, 'day' | 'daySpend' | 'reserved'> | null = null;
  if (t?.exists) {
    const today = utcDay(0, now);
    const daySpend = t.day === today ? t.daySpend : 0;
    if (t.budget !== null && daySpend + t.reserved >= t.budget) return { outcome: 'team_budget', retryAfter: secondsUntil(nextUtcMidnight(now), now) };
    team = { day: today, daySpend, reserved: t.reserved + r.amount };
  }
  return {
    outcome: 'ok',
    key: { windowStart, windowSpend, reserved: k.reserved + r.amount, rlMinute: minute, rlRequests: requests + 1, rlTokens: tokens + r.tokens },
    team,
  };
}

/**
 * mp_settle's rules for a key: release what the reservation held, charge the real `cost`
 * (starting a new budget window when the old one ran out), and count the tokens `used` beyond
 * those counted at admission in the same minute.
 */
export function settleKey(k: KeyLimits & KeyCounters, held: Held | undefined, cost: number, used: number, now: number): Omit<KeyCounters, 'rlRequests'> & { rlRequests: number } {
  const minute = minuteOf(now);
  const newWindow = k.duration !== null && now >= addDuration(k.windowStart, k.duration);
  const sameMinute = k.rlMinute === minute;
  return {
    reserved: Math.max(k.reserved - (held?.amount ?? 0), 0),
    windowStart: newWindow ? now : k.windowStart,
    windowSpend: newWindow ? cost : k.windowSpend + cost,
    spendTotal: k.spendTotal + cost,
    rlMinute: minute,
    rlRequests: sameMinute ? k.rlRequests : 0,
    rlTokens: sameMinute ? k.rlTokens + (held?.rlMinute === minute ? Math.max(used - held.tokens, 0) : used) : used,
  };
}

/** mp_settle's rules for a team: release what the reservation held and add the cost to the UTC day's spend. */
export function settleTeam(t: TeamCounters, held: Held | undefined, cost: number, now: number): Pick<TeamCounters, 'day' | 'daySpend' | 'reserved'> {
  const today = utcDay(0, now);
  return { reserved: Math.max(t.reserved - (held?.amount ?? 0), 0), daySpend: t.day === today ? t.daySpend + cost : cost, day: today };
}
