import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { actorOf, SESSION_COOKIE } from '../../http/auth.ts';
import type { App } from '../../http/kernel.ts';
import { ListQuery, Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { problems } from '../../errors/problems.ts';
import { NoContent } from '../../http/schemas.ts';
import type { Role } from '../../auth/roles.ts';
import { onboardingFor } from './onboarding.ts';
import { LoginBody, Me, NewToken, Onboarding, OnboardingToken, SessionInfo, SetupBody, TokenCreate, TokenSchema } from './session.schemas.ts';
import { ONBOARDING_TOKEN_TTL_MS, presentToken, SESSION_TTL_MS, type SessionService } from './session.service.ts';

/** /me, /session (browser log in and out, setup, own tokens, onboarding token) and /onboarding. */
export function sessionRoutes(app: App, deps: { sessions: SessionService; publicBaseUrl: string }) {
  const { sessions, publicBaseUrl } = deps;
  const secure = publicBaseUrl.startsWith('https:');
  const tags = ['session'];
  const sessionOnly = { role: 'viewer', sessionOnly: true } as const;

  const setCookie = (reply: FastifyReply, value: string, maxAgeSeconds: number) =>
    reply.header('set-cookie', `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure ? '; Secure' : ''}`);
  const opened = (s: { user: { id: number; name: string; email: string | null; role: Role }; csrf: string; expiresAt: string }) => ({
    user: { id: s.user.id, name: s.user.name, email: s.user.email, role: s.user.role },
    via: 'session' as const,
    csrf_token: s.csrf,
    expires_at: s.expiresAt,
  });
  const refuseToken = (authz: string | undefined) => {
    if (authz !== undefined) throw problems.forbidden('this route is only for a browser session and cannot be called with a token');
  };

  app.get('/me', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getMe', summary: 'Who am I', tags, description: 'Who the credentials are, and how they were presented.', response: { 200: Me } },
    handler: async (req) => {
      const a = actorOf(req);
      return { id: a.userId!, name: a.name, email: a.email, role: a.role, via: a.via as 'session' | 'token' };
    },
  });

  app.get('/session', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getSession', summary: 'Get the browser session', tags, description: 'The logged-in user and the CSRF token of the browser session (null with a token).', response: { 200: SessionInfo } },
    handler: async (req) => {
      const a = actorOf(req);
      return {
        user: { id: a.userId!, name: a.name, email: a.email, role: a.role },
        via: a.via as 'session' | 'token',
        csrf_token: req.sessionInfo?.csrfToken ?? null,
        expires_at: req.sessionInfo?.expiresAt ?? null,
      };
    },
  });

  app.post('/session', {
    config: { auth: { public: true } },
    schema: {
      operationId: 'logIn',
      summary: 'Log in (browser session)',
      problems: { 422: false, 429: 'too many failed log-ins for this account; wait Retry-After seconds' },
      tags,
      description: 'Browser log-in with name (or email) and password; sets an HttpOnly session cookie. Refuses a token.',
      body: LoginBody,
      response: { 201: SessionInfo },
    },
    handler: async (req, reply) => {
      refuseToken(req.headers.authorization);
      const s = await sessions.login(req.body.name, req.body.password, req.id);
      setCookie(reply, s.token, SESSION_TTL_MS / 1000);
      return reply.status(201).header('location', '/api/v1/session').send(opened(s));
    },
  });

  app.post('/session/setup', {
    config: { auth: { public: true } },
    schema: {
      operationId: 'completeSetup',
      summary: 'Choose a password with a setup token',
      tags,
      description: 'Chooses a password with a one-time setup token and opens a browser session.',
      body: SetupBody,
      response: { 201: SessionInfo },
    },
    handler: async (req, reply) => {
      refuseToken(req.headers.authorization);
      const s = await sessions.setup(req.body.token, req.body.password, req.id);
      setCookie(reply, s.token, SESSION_TTL_MS / 1000);
      return reply.status(201).header('location', '/api/v1/session').send(opened(s));
    },
  });

  app.delete('/session', {
    config: { auth: sessionOnly },
    schema: { operationId: 'logOut', summary: 'Log out', tags, description: 'Ends the browser session.', response: { 204: NoContent } },
    handler: async (req, reply) => {
      await sessions.logout(actorOf(req), req.sessionInfo!.id);
      setCookie(reply, '', 0);
      return reply.status(204).send(null);
    },
  });

  app.get('/session/tokens', {
    config: { auth: sessionOnly },
    schema: {
      operationId: 'listOwnTokens',
      summary: 'List your API tokens',
      tags,
      description: 'The account\'s own live API tokens (never their values).',
      querystring: ListQuery,
      response: { 200: Page(TokenSchema) },
    },
    handler: (req) => sessions.listTokens(actorOf(req).userId!, { limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.post('/session/tokens', {
    config: { auth: sessionOnly },
    schema: {
      operationId: 'createOwnToken',
      summary: 'Create an API token',
      problems: { 422: false },
      tags,
      description: 'Mints an API token with the account\'s role; the value is shown once.',
      body: TokenCreate,
      response: { 201: NewToken },
    },
    handler: async (req, reply) => {
      const days = req.body.expires_in_days ?? null;
      const { row, token } = await sessions.createToken(actorOf(req), req.body.name, 'api', days ? days * 86400_000 : null);
      return reply.status(201).header('location', `/api/v1/session/tokens/${row.id}`).send({ ...presentToken(row), token });
    },
  });

  app.delete('/session/tokens/:id', {
    config: { auth: sessionOnly },
    schema: {
      operationId: 'revokeOwnToken',
      summary: 'Revoke one of your API tokens',
      tags,
      params: Type.Object({ id: Type.Integer({ minimum: 1, maximum: 2147483647 }) }),
      response: { 204: NoContent },
    },
    handler: async (req, reply) => {
      await sessions.revokeToken(actorOf(req), req.params.id);
      return reply.status(204).send(null);
    },
  });

  app.post('/session/onboarding-token', {
    config: { auth: sessionOnly },
    schema: {
      operationId: 'createOnboardingToken',
      summary: 'Create an onboarding token for an agent',
      tags,
      description: `Mints a token for an agent, valid ${ONBOARDING_TOKEN_TTL_MS / 3600_000} hours, with the onboarding prompt filled in.`,
      response: { 201: OnboardingToken },
    },
    handler: async (req, reply) => {
      const actor = actorOf(req);
      const { row, token } = await sessions.createToken(actor, 'onboarding', 'onboarding', ONBOARDING_TOKEN_TTL_MS);
      const o = onboardingFor(actor.role, publicBaseUrl);
      return reply.status(201).header('location', `/api/v1/session/tokens/${row.id}`).send({ ...presentToken(row), token, prompt: `${o.prompt} Your token is ${token}` });
    },
  });

  app.get('/onboarding', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'getOnboarding',
      summary: 'Get the onboarding prompt',
      tags: ['meta'],
      description: 'The two-sentence onboarding prompt and an agent-instructions snippet for the caller\'s role and this deployment; never a token.',
      response: { 200: Onboarding },
    },
    handler: async (req) => onboardingFor(actorOf(req).role, publicBaseUrl),
  });
}
