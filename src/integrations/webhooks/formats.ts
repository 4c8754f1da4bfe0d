import { hmacSha256Matches } from './signature.ts';
import type { WebhookSurface } from './surfaces.ts';

type Header = (name: string) => string | undefined;

/**
 * How a surface signs and names its webhook deliveries: the one thing that differs between
 * senders. The bookkeeping around it (record every delivery, verify before parsing, one effect
 * per delivery id, a job for the work) is the same for all (webhooks.service.ts).
 */
export interface InboundFormat {
  /** The header that carries the signature, and the one that carries the delivery's id (as the sender spells them). */
  signatureHeader: string;
  deliveryHeader: string;
  /** The event the sender names before anything is verified (for the record of a refused delivery). */
  claimedEvent(header: Header): string;
  /** Whether the signature header is the HMAC of the raw body with the secret (constant time). */
  verify(secret: string, raw: Buffer, signature: string): boolean;
  /** The event and action of a verified, parsed delivery, or why it is refused all the same (a stale timestamp). */
  read(payload: unknown, header: Header, now: number): { event: string; action: string | null } | { refused: string; field: string };
  /**
   * The sender's own id of what a verified delivery reports, for the events whose effect a copy
   * would repeat (a comment answered twice): the signature covers the body but not the delivery
   * id, so a captured delivery could be posted again under a fresh id. Null for the rest (an
   * issue becoming a task is claimed once by the tracker's and code host's own records).
   */
  subject(event: string, action: string | null, payload: unknown): string | null;
}

const obj = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
/** An id the sender gave an object (a number or a short printable string), as text; else null. */
const idOf = (v: unknown) => (typeof v === 'number' && Number.isSafeInteger(v) ? String(v) : typeof v === 'string' && /^[\x21-\x7e]{1,128}$/.test(v) ? v : null);
const word = (v: unknown, max = 64) => (typeof v === 'string' && /^[A-Za-z0-9_:.-]{1,64}$/.test(v) ? v.slice(0, max) : null);

/** Linear refuses, and so do we, a delivery signed more than a minute ago: a captured one cannot be replayed later. */
export const LINEAR_MAX_AGE_MS = 60_000;

export const INBOUND_FORMATS: Record<WebhookSurface, InboundFormat> = {
  // GitHub: `X-Hub-Signature-256: sha256=<hex>`, `X-GitHub-Delivery`, the event in `X-GitHub-Event`.
  code_host: {
    signatureHeader: 'X-Hub-Signature-256',
    deliveryHeader: 'X-GitHub-Delivery',
    claimedEvent: (h) => h('x-github-event') ?? '',
    verify: (secret, raw, signature) => signature.startsWith('sha256=') && hmacSha256Matches(secret, raw, signature.slice(7)),
    read(payload, h) {
      const event = h('x-github-event') ?? '';
      if (!/^[a-z_]{1,64}$/.test(event)) return { refused: 'X-GitHub-Event must name the event (a-z and _)', field: 'X-GitHub-Event' };
      return { event, action: word(obj(payload).action) };
    },
    // A comment is answered once (an issue is claimed once by code_host_work; a closed pull request's notice is keyed by its state).
    subject: (event, action, payload) => {
      const id = event === 'issue_comment' && action === 'created' ? idOf(obj(obj(payload).comment).id) : null;
      return id && `issue_comment:${id}`;
    },
  },
  // Linear: `Linear-Signature: <hex>`, `Linear-Delivery`, `Linear-Event`; the body's `webhookTimestamp` (ms) is signed.
  tracker_a: {
    signatureHeader: 'Linear-Signature',
    deliveryHeader: 'Linear-Delivery',
    claimedEvent: (h) => h('linear-event') ?? '',
    verify: (secret, raw, signature) => hmacSha256Matches(secret, raw, signature),
    read(payload, h, now) {
      const p = obj(payload);
      const at = p.webhookTimestamp;
      if (typeof at !== 'number' || !Number.isFinite(at)) return { refused: 'the body has no webhookTimestamp: a Linear delivery carries the time it was signed', field: 'webhookTimestamp' };
      if (Math.abs(now - at) > LINEAR_MAX_AGE_MS) return { refused: `webhookTimestamp is ${Math.round(Math.abs(now - at) / 1000)} s from now, more than a minute: a stale or replayed delivery is refused (check the server's clock if Linear's deliveries all fail so)`, field: 'webhookTimestamp' };
      const event = word(p.type) ?? word(h('linear-event'));
      if (!event) return { refused: 'the delivery names no event (the body\'s type, or Linear-Event)', field: 'type' };
      return { event, action: word(p.action) };
    },
    // Signed a minute ago at most, but within that minute a copy could come under a new Linear-Delivery: a comment, a session's start and a prompt are taken once.
    subject: (event, action, payload) => {
      const p = obj(payload);
      if (event === 'Comment' && action === 'create') return idOf(obj(p.data).id) && `Comment:${idOf(obj(p.data).id)}`;
      // A session's first words are a task, or a reply when its issue is already work: once either way.
      if (event === 'AgentSessionEvent' && action === 'created') return idOf(obj(p.agentSession).id) && `AgentSession:${idOf(obj(p.agentSession).id)}`;
      if (event === 'AgentSessionEvent' && action === 'prompted') return idOf(obj(p.agentActivity).id) && `AgentActivity:${idOf(obj(p.agentActivity).id)}`;
      return null;
    },
  },
  // Jira Cloud: `X-Hub-Signature: sha256=<hex>` (a webhook with a secret), `X-Atlassian-Webhook-Identifier` (the same on retries); the event in the body.
  tracker_b: {
    signatureHeader: 'X-Hub-Signature',
    deliveryHeader: 'X-Atlassian-Webhook-Identifier',
    claimedEvent: () => '',
    verify: (secret, raw, signature) => signature.startsWith('sha256=') && hmacSha256Matches(secret, raw, signature.slice(7)),
    read(payload) {
      const p = obj(payload);
      const event = word(p.webhookEvent);
      if (!event) return { refused: 'the body names no webhookEvent', field: 'webhookEvent' };
      return { event, action: word(p.issue_event_type_name) };
    },
    // A comment is answered once (an assigned issue is claimed once by tracker_work).
    subject: (event, _action, payload) => {
      const id = event === 'comment_created' ? idOf(obj(obj(payload).comment).id) : null;
      return id && `comment:${id}`;
    },
  },
};
