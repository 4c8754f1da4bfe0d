import type { Logger } from 'pino';
import type { Db } from '../../db/database.ts';
import { Counter } from '../../metrics.ts';
import { countRefusal } from './webhooks.store.ts';

/** Unsigned or forged refusals recorded per surface per minute; past it they are only counted. */
export const UNSIGNED_REFUSALS_PER_MINUTE = 60;

/**
 * The cap on recording refusals that carry no valid signature (missing, wrong, not checked: a
 * disabled integration, a body over the limit). Anyone can send those, so each one recorded
 * would let the internet grow `webhook_deliveries` at will: past `perMinute` a surface's
 * refusals in a minute are answered the same but not recorded nor logged one by one, only
 * counted (`crewhouse_webhook_refusals_unrecorded_total`, per process), and the first refusal of
 * a later minute logs one line saying how many the last capped minute left out. Counted in the
 * database (one statement per refusal, `countRefusal`), so the processes sharing it share one
 * cap: two console processes do not each record the full cap.
 */
export function createRefusalCap(opts: { db: Db; logger: Logger; perMinute?: number; now?: () => number }) {
  const perMinute = opts.perMinute ?? UNSIGNED_REFUSALS_PER_MINUTE;
  const now = opts.now ?? Date.now;
  const unrecorded = new Counter('crewhouse_webhook_refusals_unrecorded_total', 'Webhook deliveries refused without a valid signature past the per-minute cap: answered, not recorded, by surface');
  return {
    unrecorded,
    /** Whether this refusal of `surface` is recorded; false (counted) past the cap. */
    async mayRecord(surface: string): Promise<boolean> {
      const { count, previous } = await countRefusal(opts.db, surface, Math.floor(now() / 60_000));
      if (previous && previous.count > perMinute) {
        const dropped = previous.count - perMinute;
        opts.logger.warn({ surface, unrecorded: dropped, per_minute: perMinute, minute: new Date(previous.minute * 60_000).toISOString() }, `${dropped} ${surface} webhook deliveries refused without a valid signature were not recorded (more than ${perMinute} in that minute); they were answered all the same`);
      }
      if (count <= perMinute) return true;
      unrecorded.inc({ surface });
      return false;
    },
  };
}

export type RefusalCap = ReturnType<typeof createRefusalCap>;
