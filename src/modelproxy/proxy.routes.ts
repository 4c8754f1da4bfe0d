import type { FastifyError, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Db } from '../db/database.ts';
import type { App } from '../http/kernel.ts';
import type { ModelAlias } from '../models/catalog.ts';
import { proxyErrors, sendProxyError, toProxyError } from './errors.ts';
import { createForwarder, keyHashOf, type ForwarderDeps } from './forwarding.ts';
import type { ChatRequest } from './upstream.ts';

const ChatBody = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 200 }),
    messages: Type.Array(Type.Unknown(), { minItems: 1, maxItems: 100_000 }),
    // OpenAI's API takes null for these as left out, and SDKs send it (Python's None): so does the proxy.
    stream: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    max_tokens: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
    max_completion_tokens: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
    // Each choice may be as long as the last: the reservation is n times the worst case. 128 is OpenAI's own bound.
    n: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 128 }), Type.Null()])),
    stream_options: Type.Optional(Type.Union([Type.Object({ include_usage: Type.Optional(Type.Boolean()) }), Type.Null()])),
  },
  // A proxy of an outside API: the fields it does not read pass through to the upstream.
  { additionalProperties: true },
);

const ModelParams = Type.Object({ model: Type.String({ maxLength: 200 }) });

/** The bearer key of a request (OpenAI style), or `x-api-key` (Anthropic style). */
function keyOf(req: FastifyRequest): string | null {
  const auth = req.headers.authorization;
  if (typeof auth === 'string' && auth.length < 1000) {
    const m = /^Bearer\s+(\S+)$/i.exec(auth);
    if (m) return m[1];
  }
  const x = req.headers['x-api-key'];
  return typeof x === 'string' && x.length > 0 && x.length < 1000 ? x : null;
}

/**
 * POST /v1/chat/completions and GET /v1/models: the OpenAI-compatible front, authenticated by
 * virtual keys. The key comes first: a request without a valid key answers 401 whatever else
 * is wrong with it, so nothing (which aliases exist, what a body must look like) is shown to
 * a caller without one. A valid request pays no extra lookup for this: admission authenticates
 * it; only a refused one is checked.
 */
export function proxyRoutes(app: App, deps: ForwarderDeps & { db: Db }) {
  const { db, catalog, admission } = deps;
  const forwarder = createForwarder(deps);
  app.addHook('onClose', async () => admission.close());

  const authenticated = async (req: FastifyRequest) => {
    const key = keyOf(req);
    return key !== null && (await admission.authenticate(keyHashOf(key)));
  };

  app.register(async (scope: App) => {
    scope.setErrorHandler(async (err: FastifyError, req, reply) => {
      let e = toProxyError(err, req);
      if (e.status !== 401) {
        // Should the check itself fail, the original error is answered: it says nothing a key would hide.
        const known = await authenticated(req).catch((cause) => {
          req.log.warn({ err: cause }, 'authenticating a refused request failed; answering its own error');
          return true;
        });
        if (!known) e = proxyErrors.invalidKey();
      }
      return sendProxyError(reply, e);
    });
    // Its body goes upstream, not into the database: a NUL in a message is sent on (useProxyErrors checks the rest).
    scope.post('/v1/chat/completions', { schema: { body: ChatBody }, config: { forwardsNul: true, keepsRawJson: true } }, async (req, reply) => {
      return forwarder.complete(req, reply, req.body as ChatRequest, keyOf(req));
    });

    async function allowedModels(req: FastifyRequest): Promise<string[] | null> {
      const key = keyOf(req);
      if (!key) return null;
      const row = await db.selectFrom('mp_keys').select(['models', 'revoked_at']).where('key_hash', '=', keyHashOf(key)).executeTakeFirst();
      if (!row || row.revoked_at) return null;
      return row.models.length ? row.models : catalog.aliases.map((a) => a.alias);
    }
    const presentModel = (a: ModelAlias) => ({ id: a.alias, object: 'model', created: 0, owned_by: 'crewhouse', context_window: a.context_window, max_output_tokens: a.max_output_tokens });

    scope.get('/v1/models', async (req, reply) => {
      const allowed = await allowedModels(req);
      if (!allowed) return sendProxyError(reply, proxyErrors.invalidKey());
      return { object: 'list', data: catalog.aliases.filter((a) => allowed.includes(a.alias)).map(presentModel) };
    });

    scope.get('/v1/models/:model', { schema: { params: ModelParams } }, async (req, reply) => {
      const allowed = await allowedModels(req);
      if (!allowed) return sendProxyError(reply, proxyErrors.invalidKey());
      const { model } = req.params as { model: string };
      const a = catalog.get(model);
      if (!a || !allowed.includes(a.alias)) return sendProxyError(reply, proxyErrors.modelNotFound(model));
      return presentModel(a);
    });
  });
}
