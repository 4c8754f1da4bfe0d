import type { Logger } from 'pino';
import { Counter } from '../../metrics.ts';

/** Unsigned or forged refusals recorded per surface per minute; past it they are only counted. */
export const UNSIGNED_REFUSALS_PER_MINUTE = 60;

/**
 * The cap on recording refusals that carry no valid signature (missing, wrong, not checked: a
 * disabled integration, a body over the limit). Anyone can send those, so each one recorded
 * would let the internet grow `webhook_deliveries` at will: past `perMinute` a surface's
 * refusals in a minute are answered the same but not recorded nor logged one by one, only
 * counted (`crewhouse_webhook_refusals_unrecorded_total`), and the first refusal of a later
 * minute logs one line saying how many the last capped minute left out. In memory, per
 * process, like the gateway's `mayRecord`: a bound, not an exact count across processes.
 */
export function createRefusalCap(opts: { logger: Logger; perMinute?: number; now?: () => number }) {
  const perMinute = opts.perMinute ?? UNSIGNED_REFUSALS_PER_MINUTE;
  const now = opts.now ?? Date.now;
  const unrecorded = new Counter('crewhouse_webhook_refusals_unrecorded_total', 'Webhook deliveries refused without a valid signature past the per-minute cap: answered, not recorded, by surface');
  // One entry per surface (a fixed few), so the map cannot grow with what senders claim.
  const minutes = new Map<string, { minute: number; count: number; dropped: number }>();
  return {
    unrecorded,
    /** Whether this refusal of `surface` is recorded; false (counted) past the cap. */
    mayRecord(surface: string): boolean {
      const minute = Math.floor(now() / 60_000);
      const m = minutes.get(surface);
      if (!m || m.minute !== minute) {
        if (m?.dropped) opts.logger.warn({ surface, unrecorded: m.dropped, per_minute: perMinute, minute: new Date(m.minute * 60_000).toISOString() }, `${m.dropped} ${surface} webhook deliveries refused without a valid signature were not recorded (more than ${perMinute} in that minute); they were answered all the same`);
        minutes.set(surface, { minute, count: 1, dropped: 0 });
        return true;
      }
      if (++m.count <= perMinute) return true;
      m.dropped++;
      unrecorded.inc({ surface });
      return false;
    },
  };
}

export type RefusalCap = ReturnType<typeof createRefusalCap>;
