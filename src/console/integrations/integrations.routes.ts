import { actorOf } from '../../http/auth.ts';
import { requireIfMatch, setEtag } from '../../http/etag.ts';
import type { App } from '../../http/kernel.ts';
import { ListQuery } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { IfMatchHeader } from '../../http/schemas.ts';
import { Integration, IntegrationList, IntegrationParams, IntegrationPut, IntegrationTestResult, RoleBotList } from './integrations.schemas.ts';
import type { IntegrationsService } from './integrations.service.ts';

/** The five integrations: settings, secret status, whether the gateways have them, and a live test. */
export function integrationsRoutes(app: App, deps: { integrations: IntegrationsService }) {
  const { integrations } = deps;
  const tags = ['integrations'];

  app.get('/integrations', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'listIntegrations',
      summary: 'List the five integrations with their status',
      tags,
      description: 'chat_a, chat_b, code_host, tracker_a and tracker_b, each as GET /integrations/{kind} shows it: settings, the secrets it needs (set or unset, never a value), what enabling still needs, the webhook URL, and `status.applied`.',
      querystring: ListQuery,
      response: { 200: IntegrationList },
    },
    handler: (req) => integrations.list({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  // Registered before /integrations/:kind so that the static segment wins for chat_a.
  app.get('/integrations/chat_a/role-bots', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'listChatRoleBots',
      summary: 'List which bot each chat_a role posts as',
      tags,
      description:
        'One entry per role of each active team whose home is chat_a, by team and role. A role posts as its own bot when the gateway holds that bot\'s API key (the secret `integrations/chat_a/bots/<team>/<role>` has a value): its posts show the agent\'s display name and avatar. Otherwise the single surface bot (`integrations/chat_a/bot_token`) posts for it, with `[<role>]` at the start of the text.',
      querystring: ListQuery,
      response: { 200: RoleBotList },
    },
    handler: (req) => integrations.roleBots({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.get('/integrations/:kind', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'getIntegration',
      summary: 'Get an integration',
      etag: true,
      tags,
      description: 'One integration with `status.applied`: `pending` after a PUT until every live sandbox host\'s gateway has loaded the new settings, then `current`. 404 for a kind that is not one of the five.',
      params: IntegrationParams,
      response: { 200: Integration },
    },
    handler: async (req, reply) => {
      const { integration, version } = await integrations.get(req.params.kind);
      setEtag(reply, version, integration);
      return integration;
    },
  });

  app.put('/integrations/:kind', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'replaceIntegration',
      summary: 'Replace an integration\'s settings and enabled flag',
      etag: true,
      tags,
      description:
        'Replaces `enabled` and every setting (If-Match: 428 without it, 412 when stale). 422 for a setting the kind does not take (a secret\'s name included: secrets are written with PUT /secrets/integrations/<kind>/<name>), a value of the wrong form, and, when enabling, each required setting or secret that is missing, named in `errors[]` (`settings.<name>`, `secrets.<name>`). The kind\'s secret references are created unset when absent. `status.applied` becomes `pending` until the gateways have loaded the change.',
      params: IntegrationParams,
      headers: IfMatchHeader,
      body: IntegrationPut,
      response: { 200: Integration },
    },
    handler: async (req, reply) => {
      const { integration, version } = await integrations.put(actorOf(req), req.params.kind, await requireIfMatch(req, () => integrations.get(req.params.kind)), req.body);
      setEtag(reply, version, integration);
      return integration;
    },
  });

  app.post('/integrations/:kind/test', {
    config: { auth: { role: 'operator' } },
    schema: {
      operationId: 'testIntegration',
      summary: 'Test an integration\'s connection',
      tags,
      description:
        'Calls the service for real with the stored settings and secrets (enabled or not) and answers `ok` or `error` with one line saying why; never a secret. code_host: signs in as the app, reads its installation and mints an installation token. chat_a: asks the chat server who the surface bot is (`ok` with its name). chat_b: asks Slack who the bot is and opens a Socket Mode URL with the app-level token (`ok` with the bot\'s name, and whether roles can post with their own names: the `chat:write.customize` scope). The other kinds answer `unknown`: their adapters are not built yet.',
      params: IntegrationParams,
      response: { 200: IntegrationTestResult },
    },
    handler: (req) => integrations.test(req.params.kind),
  });
}
