import { Type, type Static } from 'typebox';
import { matching } from '../../http/schemas.ts';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

export const DeliveriesParams = Type.Object(
  { kind: Type.String({ ...matching('^[a-z_]{1,32}$', 'an integration kind: lowercase letters and "_"'), description: 'chat_a, chat_b, code_host, tracker_a or tracker_b' }) },
  { additionalProperties: false },
);

export const WebhookDelivery = Type.Object(
  {
    id: Type.String({ description: 'the sender\'s delivery id (X-GitHub-Delivery, Linear-Delivery, X-Atlassian-Webhook-Identifier); a refused delivery whose id was malformed gets a made-up one' }),
    event: Type.String({ description: 'the event and its action, e.g. `issues.labeled`, `AgentSessionEvent.created`, `jira:issue_updated.issue_assigned`' }),
    received_at: Type.String({ format: 'date-time', description: 'when it first arrived' }),
    signature_valid: Type.Boolean(),
    times_received: Type.Integer({ minimum: 1, description: 'a verified delivery id is processed once however often it arrives; this counts the arrivals' }),
    outcome: Type.Union([Type.Literal('accepted'), Type.Literal('processed'), Type.Literal('ignored'), Type.Literal('refused'), Type.Literal('failed'), Type.Literal('duplicate')], {
      description: '`accepted`: its work is queued (a task or follow-up from a tracker that waits for the daily budget of its team stays `accepted` until its job at 00:00 UTC, `detail` saying when); `processed`: done; `ignored`: acknowledged, nothing to do (`detail` says why); `refused`: answered 4xx, or its work was refused; `failed`: its work gave up after retries; `duplicate`: signed, but reports what another delivery id already reported (the same comment): answered 200 `duplicate`, its work not done again (`detail` names the first delivery)',
    }),
    detail: Nullable(Type.String()),
    run_id: Nullable(Type.String({ description: 'the run it became or acted on' })),
  },
  { additionalProperties: false },
);
export type WebhookDelivery = Static<typeof WebhookDelivery>;

export const WebhookAnswer = Type.Object({
  delivery_id: Type.String(),
  outcome: Type.Union([Type.Literal('accepted'), Type.Literal('duplicate'), Type.Literal('ignored')]),
});
