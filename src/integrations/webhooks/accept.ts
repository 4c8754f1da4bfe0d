import type { Kysely, Transaction } from 'kysely';
import { lockKey } from '../../db/conditional.ts';
import type { Database } from '../../db/schema.ts';
import { inspectJson, MAX_JSON_DEPTH } from '../../db/json-values.ts';
import { problems, type Problem } from '../../errors/problems.ts';
import { processDeliveryJob } from './process-delivery.job.ts';
import * as store from './webhooks.store.ts';

type Q = Kysely<Database> | Transaction<Database>;

/**
 * Records a verified delivery of a consumed surface (`accepted`, its payload kept) and, the
 * first time its id is seen, queues its work (`webhooks.process-delivery`, keyed by the
 * delivery). The job hands it to the surface's `takeIn`, which settles it (`processed`,
 * `ignored`, `refused`), or marks it `failed` when its work gives up. Every surface that takes
 * deliveries in goes through here: the signed webhooks, chat_a's slash command.
 */
export async function acceptDelivery(q: Q, d: { surface: string; delivery_id: string; event: string; action: string | null; payload: unknown; subject?: string | null }) {
  const row = await store.recordVerified(q, { ...d, outcome: 'accepted', detail: null });
  // The job's key is the delivery too: even a row lost to a restore could not queue it twice.
  if (row.first) await processDeliveryJob.enqueue(q, { delivery: row.id }, { key: `webhook:${d.surface}:${d.delivery_id}` });
  return row;
}

/**
 * Takes in a verified webhook delivery that reports `subject` (the sender's own id of a comment,
 * formats.ts) unless another delivery id already reported it: a signature covers the body, not
 * the delivery id, so a captured delivery posted again under a fresh id is a replay. Then answers
 * `replayOf` (the first delivery's id) and takes nothing in. Under a transaction lock on the
 * subject, so two copies at once make one delivery; the first's row holds the subject, so it
 * holds across restarts. The same delivery id again is the sender's retry: counted as ever.
 */
export async function acceptOnce(trx: Transaction<Database>, d: { surface: string; delivery_id: string; event: string; action: string | null; payload: unknown; subject: string | null }): Promise<{ first: boolean; replayOf: string | null }> {
  if (d.subject !== null) {
    await lockKey(trx, `webhook-subject:${d.surface}:${d.subject}`);
    const first = await store.deliveryOfSubject(trx, d.surface, d.subject);
    if (first !== undefined && first !== d.delivery_id) return { first: false, replayOf: first };
  }
  const row = await acceptDelivery(trx, d);
  return { first: row.first, replayOf: null };
}

/**
 * Why a delivery's payload cannot be kept (it is stored as jsonb for its job), as a 400 naming
 * where: a NUL character or half of a surrogate pair, which PostgreSQL refuses, or nesting past
 * MAX_JSON_DEPTH (which would overflow the stack on the way there). Its receiver refuses and
 * records the delivery with it, instead of a 500 the sender would retry or a database error
 * that leaves no record. Null when the payload can be kept.
 */
export function unstorablePayload(payload: unknown): Problem | null {
  const found = inspectJson(payload, { wellFormed: true });
  if (!found) return null;
  const [what, at] = 'tooDeep' in found ? [`nests deeper than ${MAX_JSON_DEPTH} levels`, found.tooDeep] : 'nul' in found ? ['holds a NUL character, which cannot be stored', found.nul] : 'illFormed' in found ? ['holds half of a surrogate pair (not valid Unicode), which cannot be stored', found.illFormed] : ['holds a number JSON cannot hold', found.notFinite];
  // The path is the sender's keys: escaped (a key may hold the NUL itself) and cut short, as every refusal is kept.
  const field = at ? JSON.stringify(at.length > 200 ? `${at.slice(0, 200)}…` : at).slice(1, -1) : '(body)';
  return problems.badRequest(`the body ${at ? `at ${field} ` : ''}${what}`, [{ field, message: what }]);
}
