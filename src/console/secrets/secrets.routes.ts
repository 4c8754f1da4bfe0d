import { actorOf } from '../../http/auth.ts';
import { optionalIfMatch, requireIfMatch, setEtag } from '../../http/etag.ts';
import type { App } from '../../http/kernel.ts';
import { Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { problems } from '../../errors/problems.ts';
import { IfMatchHeader, IfMatchToReplace, NoContent } from '../../http/schemas.ts';
import type { SecretsService } from '../../secrets/secrets.service.ts';
import { integrationSecretRefusal } from '../integrations/kinds.ts';
import { SecretListQuery, SecretParams, SecretPut, SecretReference } from './secrets.schemas.ts';

/** Secret references: metadata reads, write-once values; no route ever answers a value. */
export function secretsRoutes(app: App, deps: { secrets: SecretsService }) {
  const { secrets } = deps;
  const tags = ['secrets'];

  const mustGetSecret = async (name: string) => {
    const secret = await secrets.get(name);
    if (!secret) throw problems.notFound('secret', name);
    return secret;
  };

  app.get('/secrets', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'listSecrets', summary: 'List secret references', tags, description: 'Secret references by name; metadata only, never a value.', querystring: SecretListQuery, response: { 200: Page(SecretReference) } },
    handler: (req) => secrets.list({ limit: limitOf(req.query), cursor: req.query.cursor, prefix: req.query.prefix }),
  });

  app.get('/secrets/*', {
    config: { auth: { role: 'viewer' }, openapiWildcard: 'name' },
    schema: { operationId: 'getSecret', summary: 'Get a secret reference', etag: true, tags, description: 'One secret reference; never the value. Names may contain `/` (send it as is or as %2F).', params: SecretParams, response: { 200: SecretReference } },
    handler: async (req, reply) => {
      const secret = await mustGetSecret(req.params['*']);
      setEtag(reply, secret.row_version, secret);
      return secret;
    },
  });

  app.put('/secrets/*', {
    config: { auth: { role: 'admin' }, openapiWildcard: 'name' },
    schema: {
      operationId: 'putSecret',
      summary: 'Create or replace a secret',
      etag: true,
      tags,
      description:
        'Writes a value: 201 when the reference is new (with its Location); replacing an existing reference needs If-Match and answers 200. The value is encrypted at rest and never returned. ' +
        'A name under `integrations/` is `integrations/<kind>/<secret>` and must be a secret that integration takes (the `secrets` of `GET /integrations/{kind}`; on chat_a also `bots/<team>/<role>`, a role\'s own bot): any other kind or secret is 404, naming the kinds or secrets there are. References stored before this rule stay readable and removable.',
      params: SecretParams,
      headers: IfMatchToReplace,
      body: SecretPut,
      response: { 200: SecretReference, 201: SecretReference },
      problems: { 404: 'a name under integrations/ that is not a secret an integration takes (an unknown kind, or a secret that kind does not take)' },
    },
    handler: async (req, reply) => {
      const refusal = integrationSecretRefusal(req.params['*']);
      if (refusal) throw problems.notFoundSaid(refusal);
      const { secret, created } = await secrets.put(actorOf(req), req.params['*'], req.body.value, { expected: optionalIfMatch(req) });
      setEtag(reply, secret.row_version, secret);
      return reply.status(created ? 201 : 200).send(secret);
    },
  });

  app.delete('/secrets/*', {
    config: { auth: { role: 'admin' }, openapiWildcard: 'name' },
    schema: {
      operationId: 'deleteSecret',
      summary: 'Delete a secret',
      tags,
      description:
        'Removes the value. A destination (platform) secret\'s reference is removed with it and destinations injecting it stop doing so; an integration secret\'s reference stays, marked unset (one under `integrations/` that no integration takes, stored before that rule, is removed whole).',
      params: SecretParams,
      headers: IfMatchHeader,
      response: { 204: NoContent },
    },
    handler: async (req, reply) => {
      const name = req.params['*'];
      // A name no integration takes (stored before the rule) has no integration to keep its reference for.
      await secrets.remove(actorOf(req), name, { expected: await requireIfMatch(req, () => mustGetSecret(name)), keepReference: integrationSecretRefusal(name) === null ? undefined : false });
      return reply.status(204).send(null);
    },
  });
}
