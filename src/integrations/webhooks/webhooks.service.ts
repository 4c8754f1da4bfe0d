import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { ChatAService } from '../chat_a/chat_a.service.ts';
import type { Db } from '../../db/database.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';
import { Problem, problems } from '../../errors/problems.ts';
import type { Surface } from '../surface.ts';
import { isWebhookSurface, type WebhookSurface } from './surfaces.ts';
import { INBOUND_FORMATS } from './formats.ts';
import { acceptOnce, unstorablePayload } from './accept.ts';
import type { RefusalCap } from './refusal-cap.ts';
import * as store from './webhooks.store.ts';

export interface WebhooksDeps {
  db: Db;
  /** Whether a surface's integration is enabled, and its webhook secret (null when unset). */
  inbound(surface: WebhookSurface): Promise<{ enabled: boolean; secret: string | null }>;
  /** What a verified delivery of each consumed surface means (its adapter's side); a surface without one is recorded and answered `ignored`. */
  consumers: Partial<Record<string, Pick<Surface, 'takeIn'>>>;
  /** The chat_a adapter: its slash command arrives here. */
  chatA?: ChatAService;
  logger: Logger;
  /** The per-minute cap on recording refusals without a valid signature (shared with chat_a's slash command). */
  refusalCap: RefusalCap;
}

/** How long a refusal's row is kept; a delivery taken in is kept (the deliveries list shows it). */
export const KEEP_REFUSED_MS = 30 * 86_400_000;

/** What a delivery's sender needs to know; the route answers it as JSON. */
export interface DeliveryAnswer {
  delivery_id: string;
  /** `accepted` the first time (its work is queued), `duplicate` for a delivery id seen before or a copy of a delivery taken in under another id (the same comment), `ignored` for a surface not consumed yet. */
  outcome: 'accepted' | 'duplicate' | 'ignored';
}

/** A request's header by its lower-case name (the first, when it is repeated). */
const headerOf = (headers: Record<string, string | string[] | undefined>) => (name: string) => {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
};

const DELIVERY_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const EVENT = /^[A-Za-z0-9_:.-]{1,64}$/;

function presentDelivery(r: Awaited<ReturnType<typeof store.listDeliveries>>[number]) {
  return {
    id: r.delivery_id,
    event: r.action ? `${r.event}.${r.action}` : r.event,
    received_at: new Date(r.received_at).toISOString(),
    signature_valid: r.signature_valid,
    times_received: Number(r.times_received),
    outcome: r.outcome as 'accepted' | 'processed' | 'ignored' | 'refused' | 'failed' | 'duplicate',
    detail: r.detail,
    run_id: r.run_id,
  };
}

export function createWebhooksService(deps: WebhooksDeps) {
  const { db, logger } = deps;
  const cap = deps.refusalCap;

  return {
    /** The chat_a adapter, for the route of its slash command. */
    chatA: deps.chatA,

    /** Counts the refusals past the cap; the console adds it to its metrics. */
    unrecorded: cap.unrecorded,

    /**
     * `POST /webhooks/<surface>`: the signature is checked on the raw body before anything is
     * parsed; every delivery is recorded, save refusals without a valid signature past the
     * per-minute cap (refusal-cap.ts: anyone can send those); a verified delivery id is processed
     * once (its job is keyed by it), however often it arrives. Answers at once: the work is a job.
     */
    async receive(surface: string, headers: Record<string, string | string[] | undefined>, raw: Buffer): Promise<DeliveryAnswer> {
      if (!isWebhookSurface(surface)) throw problems.notFound('webhook surface', surface);
      const header = headerOf(headers);
      const format = INBOUND_FORMATS[surface];
      const deliveryId = header(format.deliveryHeader.toLowerCase()) ?? '';
      const eventName = format.claimedEvent(header);
      const signature = header(format.signatureHeader.toLowerCase()) ?? '';
      const refuse = async (problem: Problem, signatureValid: boolean) => {
        // A signed refusal comes from a holder of the secret and is always recorded; an unsigned one only up to the cap.
        if (!signatureValid && !(await cap.mayRecord(surface))) return problem;
        await store.recordRefused(db, {
          surface,
          // What a refused sender claims is kept only as far as it is printable and short.
          delivery_id: DELIVERY_ID.test(deliveryId) ? deliveryId : `(invalid: ${crypto.randomUUID()})`,
          event: EVENT.test(eventName) ? eventName : '(invalid)',
          action: null,
          signature_valid: signatureValid,
          outcome: 'refused',
          detail: problem.detail,
        });
        logger.warn({ surface, delivery: deliveryId.slice(0, 128), status: problem.status, reason: problem.detail }, 'webhook delivery refused');
        return problem;
      };
      const state = await deps.inbound(surface);
      if (!state.enabled) throw await refuse(problems.conflict(`the ${surface} integration is not enabled: its deliveries are refused`), false);
      if (!state.secret) throw await refuse(problems.conflict(`the ${surface} integration has no webhook secret (integrations/${surface}/webhook_secret)`), false);
      if (!signature) throw await refuse(problems.unauthorized(`${format.signatureHeader} is missing: the delivery is not signed`), false);
      if (!format.verify(state.secret, raw, signature)) throw await refuse(problems.unauthorized(`${format.signatureHeader} does not match the body signed with the webhook secret`), false);
      if (!DELIVERY_ID.test(deliveryId)) throw await refuse(problems.badRequest(`${format.deliveryHeader} must be 1 to 128 of A-Z a-z 0-9 . _ : -`, [{ field: format.deliveryHeader, message: 'missing or malformed' }]), true);
      let payload: unknown;
      try {
        payload = JSON.parse(raw.toString('utf8'));
      } catch {
        throw await refuse(problems.badRequest('the body is not JSON'), true);
      }
      // The payload is kept as jsonb for its job: what PostgreSQL cannot store is refused here, and recorded.
      const unstorable = unstorablePayload(payload);
      if (unstorable) throw await refuse(unstorable, true);
      // What the body says it is (and, for Linear, whether it is fresh), in the surface's own terms.
      const read = format.read(payload, header, Date.now());
      if ('refused' in read) {
        const problem = read.field === 'webhookTimestamp' ? problems.unauthorized(read.refused) : problems.badRequest(read.refused, [{ field: read.field, message: 'missing or malformed' }]);
        throw await refuse(problem, true);
      }
      const { event, action } = read;
      const consumed = surface in deps.consumers;
      const subject = format.subject(event, action, payload);
      const result = await db.transaction().execute((trx) =>
        consumed
          ? acceptOnce(trx, { surface, delivery_id: deliveryId, event, action, payload, subject })
          : store.recordVerified(trx, { surface, delivery_id: deliveryId, event, action, outcome: 'ignored', detail: `no ${surface} adapter runs in this process: the delivery is recorded, not processed`, payload: null }).then((r) => ({ first: r.first, replayOf: null })),
      );
      if (result.replayOf !== null) {
        // A copy of a signed delivery under a new id: answered as a duplicate (the sender need not retry), its work not done again.
        // Anyone who captured one can send it again and again, so it is recorded like a refusal without a signature: up to the cap.
        if (await cap.mayRecord(surface)) {
          await store.recordRefused(db, { surface, delivery_id: deliveryId, event, action, signature_valid: true, outcome: 'duplicate', detail: `reports what delivery ${result.replayOf} reported (${subject}), under another delivery id: a copy, not taken in again` });
        }
        logger.warn({ surface, delivery: deliveryId, first: result.replayOf, subject }, 'webhook delivery is a copy of one taken in under another delivery id: not processed again');
        return { delivery_id: deliveryId, outcome: 'duplicate' };
      }
      return { delivery_id: deliveryId, outcome: !result.first ? 'duplicate' : consumed ? 'accepted' : 'ignored' };
    },

    /** Records a delivery refused for its size before it was read (the route's body limit). */
    async refusedTooLarge(surface: string, headers: Record<string, string | string[] | undefined>, limit: number) {
      if (!isWebhookSurface(surface)) return;
      const header = headerOf(headers);
      const format = INBOUND_FORMATS[surface];
      const id = header(format.deliveryHeader.toLowerCase()) ?? '';
      const event = format.claimedEvent(header);
      if (!(await cap.mayRecord(surface))) return;
      await store.recordRefused(db, {
        surface,
        delivery_id: DELIVERY_ID.test(id) ? id : `(invalid: ${crypto.randomUUID()})`,
        event: EVENT.test(event) ? event : '(invalid)',
        action: null,
        signature_valid: false,
        outcome: 'refused',
        detail: `the body is larger than ${limit} bytes (SERVICE_BODY_LIMIT); the signature was not checked`,
      });
    },

    /**
     * Deletes refusals (rows not taken in) received before `KEEP_REFUSED_MS` ago: the worker's
     * hourly housekeeping. Deliveries taken in stay. Answers how many went.
     */
    pruneRefused(now = Date.now()): Promise<number> {
      return store.pruneRefused(db, new Date(now - KEEP_REFUSED_MS));
    },

    /** `GET /integrations/{kind}/deliveries`: newest first. */
    async deliveries(kind: string, query: { limit: number; cursor?: string }) {
      if (!isWebhookSurface(kind) && kind !== 'chat_a') {
        if (kind === 'chat_b') return { items: [], next_cursor: null };
        throw problems.notFound('integration', kind);
      }
      const cursor = decodeCursor(query.cursor, ['time', 'digits']);
      const rows = await store.listDeliveries(db, kind, cursor, query.limit);
      return toPage(rows, query.limit, (r) => [new Date(r.received_at).toISOString(), String(r.id)], presentDelivery);
    },

    /** The job: what a verified delivery means, done once, by the adapter of its surface. */
    async process(deliveryRow: string): Promise<void> {
      const d = await store.getDelivery(db, deliveryRow);
      if (!d || d.outcome !== 'accepted') return;
      const consumer = deps.consumers[d.surface];
      if (!consumer) throw new Error(`a ${d.surface} delivery was queued on a process without the ${d.surface} adapter`);
      return consumer.takeIn(deliveryRow, d);
    },

    /** Marks a delivery whose job gave up (its last error), so the list says so. */
    async failed(deliveryRow: string, reason: string) {
      await store.settleDelivery(db, deliveryRow, { outcome: 'failed', detail: reason.slice(0, 500) });
    },
  };
}

export type WebhooksService = ReturnType<typeof createWebhooksService>;
