import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Actor } from '../audit/audit.ts';
import { safeEqual } from '../auth/credentials.ts';
import type { App } from '../http/kernel.ts';
import { refuseUnknownQuery } from '../http/schemas.ts';
import { AllSpend, BudgetBody, Day, Days, Key, KeyPage, KeyParams, Limit, LogLine, MintBody, MintedKey, Name, RevokedTeamKeys, SpendRow, TeamBudget, TeamParams, TeamSpend, UpdateBody } from './admin.schemas.ts';
import { proxyErrors } from './errors.ts';
import type { ModelProxyService } from './modelproxy.service.ts';

/**
 * The admin API the console calls, under /admin/v1, authenticated by the service credential
 * (see credential.ts). The acting person travels in `x-crewhouse-actor` for the audit log.
 */
export function adminRoutes(app: App, deps: { service: ModelProxyService; credential: string | null }) {
  const { service } = deps;
  const expected = deps.credential;

  app.register(
    async (admin: App) => {
      // A parameter the admin API does not take is refused (400 naming it), as on the console's API.
      refuseUnknownQuery(admin);
      admin.addHook('onRequest', async (req) => {
        if (!expected) throw proxyErrors.adminDisabled();
        const m = /^Bearer\s+(\S+)$/i.exec(String(req.headers.authorization ?? ''));
        if (!m || !safeEqual(m[1], expected)) throw proxyErrors.adminUnauthorized();
      });
      const actor = (req: FastifyRequest): Actor => {
        const named = req.headers['x-crewhouse-actor'];
        const name = typeof named === 'string' && /^[\w.@+-]{1,100}$/.test(named) ? named : 'console';
        return { userId: null, name, email: null, role: 'admin', via: 'system', requestId: req.id };
      };

      admin.post('/keys', { schema: { operationId: 'mintKey', body: MintBody, response: { 201: MintedKey } } }, async (req, reply) => {
        const key = await service.mintKey(actor(req), req.body as any);
        return reply.status(201).header('location', `/admin/v1/keys/${key.key_id}`).send(key);
      });
      admin.get(
        '/keys',
        { schema: { operationId: 'listKeys', querystring: Type.Object({ team: Type.Optional(Name), cursor: Type.Optional(KeyParams.properties.key_id), limit: Limit, include_revoked: Type.Boolean({ default: false }) }, { additionalProperties: false }), response: { 200: KeyPage } } },
        async (req) => {
          const q = req.query as { team?: string; cursor?: string; limit: number; include_revoked: boolean };
          return service.listKeys({ team: q.team, cursor: q.cursor, limit: q.limit, includeRevoked: q.include_revoked });
        },
      );
      admin.get('/keys/:key_id', { schema: { operationId: 'getKey', params: KeyParams, response: { 200: Key } } }, async (req) => service.getKey((req.params as { key_id: string }).key_id));
      admin.patch('/keys/:key_id', { schema: { operationId: 'updateKey', params: KeyParams, body: UpdateBody, response: { 200: Key } } }, async (req) =>
        service.updateKey(actor(req), (req.params as { key_id: string }).key_id, req.body as any),
      );
      admin.delete('/keys/:key_id', { schema: { operationId: 'revokeKey', params: KeyParams, response: { 200: Key } } }, async (req) =>
        service.revokeKey(actor(req), (req.params as { key_id: string }).key_id),
      );
      admin.post(
        '/teams/:team/revoke-keys',
        { schema: { operationId: 'revokeTeamKeys', params: TeamParams, response: { 200: RevokedTeamKeys } } },
        async (req) => service.revokeTeamKeys(actor(req), (req.params as { team: string }).team),
      );
      admin.put(
        '/teams/:team/budget',
        { schema: { operationId: 'setTeamBudget', params: TeamParams, body: BudgetBody, response: { 200: TeamBudget } } },
        async (req) => service.setTeamBudget(actor(req), (req.params as { team: string }).team, (req.body as { usd_per_day: number | null }).usd_per_day),
      );
      admin.get('/teams/:team/spend', { schema: { operationId: 'getTeamSpend', params: TeamParams, querystring: Type.Object({ days: Days }, { additionalProperties: false }), response: { 200: TeamSpend } } }, async (req) =>
        service.teamSpend((req.params as { team: string }).team, (req.query as { days: number }).days),
      );
      admin.get(
        '/teams/:team/requests',
        { schema: { operationId: 'listTeamRequests', params: TeamParams, querystring: Type.Object({ cursor: Type.Optional(Type.String({ pattern: '^\\d{1,18}$' })), limit: Limit }, { additionalProperties: false }), response: { 200: Type.Object({ items: Type.Array(LogLine), next_cursor: Type.Union([Type.String(), Type.Null()]) }) } } },
        async (req) => {
          const q = req.query as { cursor?: string; limit: number };
          return service.requests({ team: (req.params as { team: string }).team, cursor: q.cursor ? Number(q.cursor) : undefined, limit: q.limit });
        },
      );
      admin.get('/spend', { schema: { operationId: 'getSpend', querystring: Type.Object({ days: Days }, { additionalProperties: false }), response: { 200: AllSpend } } }, async (req) => service.spend((req.query as { days: number }).days));
      admin.get(
        '/spend/rows',
        {
          schema: {
            operationId: 'listSpendRows',
            querystring: Type.Object({ from: Day, to: Day, team: Type.Optional(Name), role: Type.Optional(Name), key_id: Type.Optional(KeyParams.properties.key_id), limit: Type.Integer({ minimum: 1, maximum: 10_000, default: 1000 }) }, { additionalProperties: false }),
            response: { 200: Type.Object({ items: Type.Array(SpendRow) }) },
          },
        },
        async (req) => {
          const q = req.query as { from: string; to: string; team?: string; role?: string; key_id?: string; limit: number };
          if (q.from > q.to) throw proxyErrors.unprocessable('from: must not be after to', 'from');
          return service.spendRows({ from: q.from, to: q.to, team: q.team, role: q.role, keyId: q.key_id, limit: q.limit });
        },
      );
    },
    { prefix: '/admin/v1' },
  );
}
