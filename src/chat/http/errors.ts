import type { FastifyRequest } from 'fastify';
import { toDomainError, type DomainError } from '../../errors/errors.ts';

/**
 * The chat's errors, shaped as Zulip's: `{result: "error", msg, code, ...data}` with the
 * HTTP status on the error. Services throw these; one handler renders them.
 */
export class ChatError extends Error {
  readonly status: number;
  readonly code: string;
  readonly data: Record<string, unknown>;
  readonly headers: Record<string, string>;
  constructor(msg: string, opts: { status?: number; code?: string; data?: Record<string, unknown>; headers?: Record<string, string> } = {}) {
    super(msg);
    this.status = opts.status ?? 400;
    this.code = opts.code ?? 'BAD_REQUEST';
    this.data = opts.data ?? {};
    this.headers = opts.headers ?? {};
  }
  body() {
    return { result: 'error' as const, msg: this.message, code: this.code, ...this.data };
  }
}

const BASIC = { 'WWW-Authenticate': 'Basic realm="zulip"' };

export const chatErrors = {
  bad: (msg: string) => new ChatError(msg),
  /** A parameter whose bytes (raw or percent-escaped) are not UTF-8: read as U+FFFD, other text would be stored than was sent. */
  notUtf8: (name: string) => new ChatError(`${name} is not valid UTF-8 text: send it encoded as UTF-8`),
  missing: (name: string) => new ChatError(`Missing '${name}' argument`, { code: 'REQUEST_VARIABLE_MISSING', data: { var_name: name } }),
  incompatible: (names: string[]) => new ChatError(`Unsupported parameter combination: ${names.join(', ')}`, { data: { parameters: names.join(', ') } }),
  /** Every authentication failure: 401 UNAUTHORIZED with a Basic challenge, as Zulip's REST decorator answers. */
  unauthorized: (msg = 'Not logged in: API authentication or user session required') => new ChatError(msg, { status: 401, code: 'UNAUTHORIZED', headers: BASIC }),
  authenticationFailed: () => new ChatError('Your username or password is incorrect', { status: 401, code: 'AUTHENTICATION_FAILED' }),
  userDeactivated: () => new ChatError('Account is deactivated', { status: 401, code: 'USER_DEACTIVATED' }),
  realmDeactivated: () => new ChatError('This organization has been deactivated', { status: 401, code: 'REALM_DEACTIVATED' }),
  adminRequired: () => new ChatError('Must be an organization administrator', { code: 'UNAUTHORIZED_PRINCIPAL' }),
  ownerRequired: () => new ChatError('Must be an organization owner', { code: 'UNAUTHORIZED_PRINCIPAL' }),
  noGuests: () => new ChatError('Not allowed for guest users'),
  noBots: () => new ChatError('This endpoint does not accept bot requests.'),
  botsOnly: () => new ChatError('This endpoint is only available to bot users.', { code: 'PERMISSION_DENIED' }),
  insufficientPermission: () => new ChatError('Insufficient permission'),
  noSuchUser: () => new ChatError('No such user'),
  rateLimited: (seconds: number) =>
    new ChatError('API usage exceeded rate limit', { status: 429, code: 'RATE_LIMIT_HIT', data: { 'retry-after': seconds }, headers: { 'Retry-After': String(seconds) } }),
  notFound: () => new ChatError('Endpoint does not exist.', { status: 404 }),
  /** An endpoint called with a method it does not take: 405 naming the ones it does, as Zulip's rest_dispatch answers. */
  methodNotAllowed: (allowed: string[]) =>
    new ChatError('Method Not Allowed', { status: 405, data: { allowed_methods: allowed }, headers: { Allow: allowed.join(', ') } }),
  /** A domain error (see errors/errors.ts) in Zulip's envelope, with its status. */
  fromDomain: (e: DomainError) =>
    new ChatError(e.message, { status: e.status, code: e.code === 'concurrent_write' ? 'CONCURRENT_WRITE' : 'BAD_REQUEST', headers: e.retryAfter ? { 'Retry-After': String(e.retryAfter) } : {} }),
  internal: () => new ChatError('Internal server error', { status: 500 }),
};

/** Maps any error to the chat's envelope: ours, a domain or database error, a framework 4xx, or a 500 without internals. */
export function toChatError(err: any, req: FastifyRequest): ChatError {
  if (err instanceof ChatError) return err;
  const domain = toDomainError(err, req.log);
  if (domain) return chatErrors.fromDomain(domain);
  const status = typeof err?.statusCode === 'number' ? err.statusCode : 500;
  if (status === 413) return new ChatError('Request body too large', { status: 413 });
  if (status >= 400 && status < 500) return new ChatError(String(err.message ?? 'Bad request'), { status });
  req.log.error({ err }, 'chat request failed');
  return chatErrors.internal();
}
