import type { FastifyRequest } from 'fastify';
import type { Actor } from '../audit/audit.ts';
import { findSession, findToken, touchToken } from '../auth/auth.service.ts';
import { lookupCredential } from '../auth/credential-cache.ts';
import { hashToken, safeEqual } from '../auth/credentials.ts';
import type { Role } from '../auth/roles.ts';
import type { Db } from '../db/database.ts';
import type { App } from './kernel.ts';
import { problems } from '../errors/problems.ts';

/**
 * Who may call a route: `public` (anyone), or the least role; `session` routes refuse a
 * token. Every route under /api/v1 must say, or the server refuses to start (deny by default).
 */
export type AuthRule = { public: true } | { role: Role; sessionOnly?: boolean };

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthRule;
  }
  interface FastifyRequest {
    actor: Actor | null;
    sessionInfo: { id: number; csrfToken: string; expiresAt: string } | null;
  }
}

export const SESSION_COOKIE = 'crewhouse_session';
export const CSRF_HEADER = 'x-console-csrf';
const RANK: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export const roleAtLeast = (role: Role, least: Role) => RANK[role] >= RANK[least];

export function readCookie(header: string | undefined, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return null;
}

/** A credential's user as the users module tells it (the composition root passes the lookup in); null when gone. */
export interface AuthUser {
  user_id: number;
  name: string;
  email: string | null;
  role: Role;
  disabled: boolean;
}
export type UserLookup = (db: Db, userId: number) => Promise<AuthUser | null>;

/** A token or session found, with its user as the users module tells it; null when either is gone. */
async function withUser<T extends { user_id: number }>(db: Db, userOf: UserLookup, found: T | undefined) {
  const user = found ? await userOf(db, found.user_id) : null;
  return found && user ? { ...found, ...user } : undefined;
}

/** The actor of a request, or a problem: bearer token or session cookie, checked against the route's rule. */
async function authenticate(db: Db, userOf: UserLookup, request: FastifyRequest, rule: AuthRule): Promise<void> {
  const authz = request.headers.authorization;
  const cookie = readCookie(request.headers.cookie, SESSION_COOKIE);
  const csrf = request.headers[CSRF_HEADER];
  request.actor = null;
  request.sessionInfo = null;
  // A webhook's sender proves itself its own way (a signature; chat_a's slash command sends
  // `Authorization: Token <command token>`): a header that is not ours is left to the route.
  if ('public' in rule && request.url.startsWith('/webhooks/') && authz !== undefined && !/^Bearer /i.test(authz)) return;

  if (authz !== undefined) {
    // The scheme is matched without case (RFC 9110, 11.1), the token exactly.
    const m = /^Bearer +(\S*)$/i.exec(authz);
    if (!m) throw problems.unauthorized('the Authorization header must be "Bearer <token>"');
    if (!/^[A-Za-z0-9._~+/=-]{8,512}$/.test(m[1])) throw problems.unauthorized('the bearer token is malformed: a token is 8 to 512 of A-Z a-z 0-9 . _ ~ + / = -');
    if (csrf !== undefined) throw problems.badRequest(`${CSRF_HEADER} is only for browser sessions; do not send it with a token`, [{ field: CSRF_HEADER, message: 'not accepted with a token' }]);
    const hash = hashToken(m[1]);
    const row = await lookupCredential(db, `t:${hash}`, async () => withUser(db, userOf, await findToken(db, hash)));
    if (!row) throw problems.unauthorized('the token is unknown, revoked or expired');
    if (row.disabled) throw problems.unauthorized('the account is disabled');
    if (!row.last_used_at || Date.now() - Date.parse(row.last_used_at) > 60_000) {
      // Best effort, off the request's path: a missed touch only makes last_used_at older.
      touchToken(db, row.token_id).catch((err) => request.log.warn({ err }, 'recording when a token was last used failed'));
    }
    request.actor = { userId: row.user_id, name: row.name, email: row.email, role: row.role, via: 'token', requestId: request.id };
  } else if (cookie) {
    const hash = hashToken(cookie);
    const row = await lookupCredential(db, `s:${hash}`, async () => withUser(db, userOf, await findSession(db, hash)));
    if (row && !row.disabled) {
      request.actor = { userId: row.user_id, name: row.name, email: row.email, role: row.role, via: 'session', requestId: request.id };
      request.sessionInfo = { id: row.session_id, csrfToken: row.csrf_token, expiresAt: row.expires_at };
    } else if (!('public' in rule)) {
      throw problems.unauthorized('the session has ended; log in again');
    }
  }

  if ('public' in rule) return;
  const actor = request.actor as Actor | null;
  if (!actor) throw problems.unauthorized('send "Authorization: Bearer <token>" or log in');
  if (rule.sessionOnly && actor.via !== 'session') throw problems.forbidden('this route is only for a browser session and cannot be called with a token');
  if (actor.via === 'session' && !SAFE_METHODS.has(request.method)) {
    const sent = typeof csrf === 'string' ? csrf : '';
    if (!request.sessionInfo || !safeEqual(sent, request.sessionInfo.csrfToken)) {
      throw problems.forbidden(`a browser session must send its CSRF token (given at sign-in and with the session) in the ${CSRF_HEADER} header; reload the page to get it again`);
    }
  }
  if (!roleAtLeast(actor.role, rule.role)) throw problems.forbidden(`this request needs the ${rule.role} role; you are ${actor.role}`);
}

/** Installs authentication on a server; routes declare `config.auth`; `userOf` finds a credential's user. */
export function useAuth(app: App, db: Db, opts: { prefix: string; userOf: UserLookup }): void {
  app.decorateRequest('actor', null);
  app.decorateRequest('sessionInfo', null);
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith(opts.prefix)) return;
    if (!route.config?.auth) throw new Error(`route ${route.method} ${route.url} does not declare config.auth`);
  });
  app.addHook('onRequest', async (request) => {
    const rule = request.routeOptions.config?.auth;
    if (!rule) return;
    await authenticate(db, opts.userOf, request, rule);
  });
}

/** The actor of an authenticated route (the hook guarantees one). */
export function actorOf(request: FastifyRequest): Actor {
  if (!request.actor) throw problems.unauthorized('not authenticated');
  return request.actor;
}
