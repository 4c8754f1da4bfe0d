/** Budget windows: LiteLLM's `budget_duration` spelling (`30s`, `30m`, `24h`, `30d`, `1mo`). */

type Unit = 's' | 'm' | 'h' | 'd' | 'mo';
export interface Duration {
  n: number;
  unit: Unit;
}

const MS: Record<Exclude<Unit, 'mo'>, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PG_UNIT: Record<Unit, string> = { s: 'seconds', m: 'minutes', h: 'hours', d: 'days', mo: 'months' };

export function parseDuration(duration: string): Duration | null {
  const m = /^(\d{1,4})(s|m|h|d|mo)$/.exec(duration);
  if (!m || Number(m[1]) === 0) return null;
  return { n: Number(m[1]), unit: m[2] as Unit };
}

/** The duration as a PostgreSQL interval (what mp_reserve adds to a window's start). */
export function durationToInterval(duration: string): string | null {
  const d = parseDuration(duration);
  return d ? `${d.n} ${PG_UNIT[d.unit]}` : null;
}

/**
 * `at` plus the duration, as PostgreSQL adds an interval to a timestamptz in UTC: days are
 * 24 hours, and months are calendar months clamped to the month's last day (Jan 31 + 1 month
 * is Feb 28 or 29).
 */
export function addDuration(at: number, d: Duration): number {
  if (d.unit !== 'mo') return at + d.n * MS[d.unit];
  const t = new Date(at);
  const months = t.getUTCMonth() + d.n;
  const year = t.getUTCFullYear() + Math.floor(months / 12);
  const month = months % 12;
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  return Date.UTC(year, month, Math.min(t.getUTCDate(), lastDay), t.getUTCHours(), t.getUTCMinutes(), t.getUTCSeconds(), t.getUTCMilliseconds());
}

const DAY_MS = 86_400_000;
/** The last day named, kept: admission and settlement ask for today's several times a request. */
let lastDay = { start: NaN, text: '' };

/** The UTC day `offset` days from `now`, as YYYY-MM-DD. */
export function utcDay(offset = 0, now = Date.now()): string {
  const at = now + offset * DAY_MS;
  const start = at - (((at % DAY_MS) + DAY_MS) % DAY_MS);
  if (start !== lastDay.start) lastDay = { start, text: new Date(start).toISOString().slice(0, 10) };
  return lastDay.text;
}
