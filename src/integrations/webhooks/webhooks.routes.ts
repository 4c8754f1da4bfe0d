import type { App } from '../../http/kernel.ts';
import type { Registry } from '../../metrics.ts';
import { ListQuery, Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { problems } from '../../errors/problems.ts';
import { DeliveriesParams, WebhookDelivery } from './webhooks.schemas.ts';
import type { WebhooksService } from './webhooks.service.ts';

const CONSUMED_RULE =
  'code_host events consumed: an issue opened with the label `crewhouse` (or `crewhouse:<team>`), or that gets such a label, on a repository linked to a team ' +
  '(a code_host link, or the team\'s repo_url on the code host) becomes a task for the lead of that team (`crewhouse` alone needs exactly one team on the repository); ' +
  'a comment mentioning `@crewhouse` or `/crewhouse` on the issue or the pull request of a run answers its open question, or else is a follow-up task in the same run; ' +
  'the pull request of a run closed or merged is recorded on the run. Other events are acknowledged and ignored. ' +
  'tracker_a (Linear agent app) and tracker_b (Jira Cloud): an issue assigned to the app or agent (a Linear agent session, a Jira assignment) or a comment mentioning it, ' +
  'in a team or project linked to a team, becomes a task for its lead; a prompt in the session or a comment on the issue answers the run\'s open question, or else (addressed to the agent) is a follow-up.';

/** `GET /integrations/{kind}/deliveries`, under the API prefix. */
export function deliveriesRoutes(app: App, deps: { webhooks: WebhooksService }) {
  app.get('/integrations/:kind/deliveries', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'listIntegrationDeliveries',
      summary: "List an integration's recent webhook deliveries",
      tags: ['integrations'],
      description: `Recent deliveries to \`/webhooks/<kind>\`, newest first: delivery id, event, time, whether the signature was valid, the outcome and the run it became. Every delivery taken in is listed, and refused ones too: those without a valid signature up to 60 a minute per surface (the rest are counted in the metric \`crewhouse_webhook_refusals_unrecorded_total\`), each kept 30 days. A signed copy of a comment taken in (GitHub, Jira, Linear) under another delivery id is answered \`duplicate\`, not taken in again, and listed with the outcome \`duplicate\` naming the first delivery (up to the same 60 a minute, kept 30 days). chat_a lists its slash commands (each done by the chat core as a delivery's work, and settled with what it did); chat_b receives no webhooks (an empty list). ${CONSUMED_RULE}`,
      params: DeliveriesParams,
      querystring: ListQuery,
      response: { 200: Page(WebhookDelivery) },
    },
    handler: (req) => deps.webhooks.deliveries(req.params.kind, { limit: limitOf(req.query), cursor: req.query.cursor }),
  });
}

/**
 * `POST /webhooks/<surface>`, outside the API prefix: senders authenticate by signature, not by
 * token. In this scope every body is taken as raw bytes (the signature covers exactly them),
 * up to the service's body limit.
 */
export function webhooksRoutes(app: App, deps: { webhooks: WebhooksService; bodyLimit: number; metrics: Registry }) {
  // Refusals without a valid signature past the per-minute cap are answered and counted here, not recorded.
  deps.metrics.add(deps.webhooks.unrecorded);
  app.register(async (scope: App) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: deps.bodyLimit }, (_req, body, done) => done(null, body));
    scope.addHook('onError', async (req, _reply, err) => {
      // An oversized delivery is refused before the handler runs; it is recorded all the same.
      if ((err as { statusCode?: number }).statusCode === 413) await deps.webhooks.refusedTooLarge((req.params as { surface?: string }).surface ?? '', req.headers, deps.bodyLimit);
    });
    // chat_a's slash command: a form with a command token, answered 200 with Mattermost's response body.
    scope.post('/webhooks/chat_a', {
      config: { auth: { public: true } },
      bodyLimit: deps.bodyLimit,
      schema: { hide: true } as any,
      handler: async (req, reply) => {
        const chatA = deps.webhooks.chatA;
        if (!chatA) throw problems.notFound('webhook surface', 'chat_a');
        const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        return reply.status(200).send(await chatA.commands.receive(req.headers, body));
      },
    });
    // chat_a's interactive message actions (a confirmation's buttons): JSON, answered 200 with Mattermost's action response.
    scope.post('/webhooks/chat_a/actions', {
      config: { auth: { public: true } },
      bodyLimit: 64 * 1024,
      schema: { hide: true } as any,
      handler: async (req, reply) => {
        const chatA = deps.webhooks.chatA;
        if (!chatA) throw problems.notFound('webhook surface', 'chat_a');
        const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        return reply.status(200).send(await chatA.action(body));
      },
    });
    scope.post('/webhooks/:surface', {
      config: { auth: { public: true } },
      bodyLimit: deps.bodyLimit,
      schema: { hide: true } as any,
      handler: async (req, reply) => {
        const { surface } = req.params as { surface: string };
        const body = req.body;
        if (!Buffer.isBuffer(body)) throw problems.badRequest('a webhook delivery has a body');
        const answer = await deps.webhooks.receive(surface, req.headers, body);
        return reply.status(202).send(answer);
      },
    });
  });
}
