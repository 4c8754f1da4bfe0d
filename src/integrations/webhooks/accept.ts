import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';
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
export async function acceptDelivery(q: Q, d: { surface: string; delivery_id: string; event: string; action: string | null; payload: unknown }) {
  const row = await store.recordVerified(q, { ...d, outcome: 'accepted', detail: null });
  // The job's key is the delivery too: even a row lost to a restore could not queue it twice.
  if (row.first) await processDeliveryJob.enqueue(q, { delivery: row.id }, { key: `webhook:${d.surface}:${d.delivery_id}` });
  return row;
}
