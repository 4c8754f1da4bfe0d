import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { toDomainError, type DomainError } from '../errors/errors.ts';
import { methodsServing, type App } from '../http/kernel.ts';
import { fieldProblems, validationPlace } from '../http/validation.ts';
import { inspectJson, MAX_JSON_DEPTH, unstorableWords } from '../db/json-values.ts';
import { keepRawJson, rawJsonOf, readRawJson } from './raw-json.ts';

/**
 * An error in the OpenAI wire format (`{error: {message, type, param, code}}`), which is what
 * OpenAI-compatible clients parse. Every answer of the model proxy that is not a success is
 * one of these; the status and headers travel on the error.
 */
export class ProxyError extends Error {
  readonly status: number;
  readonly type: string;
  readonly code: string | null;
  readonly param: string | null;
  readonly headers: Record<string, string>;
  constructor(status: number, type: string, code: string | null, message: string, opts: { param?: string | null; headers?: Record<string, string> } = {}) {
    super(message);
    this.status = status;
    this.type = type;
    this.code = code;
    this.param = opts.param ?? null;
    this.headers = opts.headers ?? {};
  }
  toJSON() {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

const retry = (seconds: number | null | undefined): Record<string, string> => (seconds ? { 'retry-after': String(seconds) } : {});
/**
 * A spent budget's answer. The OpenAI and Anthropic SDKs retry a 429 on their own, waiting
 * `Retry-After` only up to a minute and their own short backoff past that: a budget that frees
 * no sooner (or never) says `x-should-retry: false`, which both read, so an agent is told at once
 * instead of after retries that cannot succeed.
 */
const budgetRetry = (seconds: number | null): Record<string, string> => ({ ...retry(seconds), ...(seconds !== null && seconds <= 60 ? {} : { 'x-should-retry': 'false' }) });

export const proxyErrors = {
  invalidRequest: (message: string, param: string | null = null) => new ProxyError(400, 'invalid_request_error', null, message, { param }),
  invalidKey: () => new ProxyError(401, 'invalid_request_error', 'invalid_api_key', 'the API key is missing, unknown or revoked; send a virtual key as "Authorization: Bearer <key>"'),
  adminUnauthorized: () => new ProxyError(401, 'invalid_request_error', 'invalid_api_key', 'the admin API needs the service credential as "Authorization: Bearer <credential>"'),
  adminDisabled: () => new ProxyError(503, 'service_unavailable', 'admin_not_configured', 'the admin API has no service credential: set SERVICE_SECRET_KEY (or SERVICE_MODEL_PROXY_TOKEN) on the proxy and the console'),
  modelNotFound: (model: string) => new ProxyError(404, 'invalid_request_error', 'model_not_found', `the model "${model}" does not exist; GET /v1/models lists the aliases`, { param: 'model' }),
  modelNotAllowed: (model: string) => new ProxyError(403, 'permission_error', 'model_not_allowed', `this key may not use the model "${model}"`, { param: 'model' }),
  notFound: (what: string) => new ProxyError(404, 'invalid_request_error', 'not_found', what),
  /** A known path called with a method it does not take: 405 with Allow (RFC 9110). */
  methodNotAllowed: (method: string, allowed: string[]) =>
    new ProxyError(405, 'invalid_request_error', 'method_not_allowed', `this endpoint does not take ${method}; it takes ${allowed.join(', ')}`, { headers: { allow: allowed.join(', ') } }),
  unprocessable: (message: string, param: string | null = null) => new ProxyError(422, 'invalid_request_error', 'invalid_value', message, { param }),
  rateLimited: (which: 'rpm' | 'tpm', seconds: number) =>
    new ProxyError(429, 'rate_limit_exceeded', `${which}_limit_exceeded`, `this key is over its ${which === 'rpm' ? 'requests' : 'tokens'} per minute limit; retry after ${seconds} s`, { headers: retry(seconds) }),
  keyBudget: (seconds: number | null) =>
    new ProxyError(429, 'budget_exceeded', 'key_budget_exceeded', `this key has spent its budget${seconds ? `; it resets in ${seconds} s` : ''}`, { headers: budgetRetry(seconds) }),
  teamBudget: (seconds: number | null) =>
    new ProxyError(429, 'budget_exceeded', 'team_budget_exceeded', `the team has spent its daily budget; it resets at 00:00 UTC${seconds ? ` (in ${seconds} s)` : ''}`, { headers: budgetRetry(seconds) }),
  upstream: (status: number, message: string, code: string | null = 'upstream_error', headers: Record<string, string> = {}) =>
    new ProxyError(status, status === 429 ? 'rate_limit_exceeded' : status >= 500 ? 'upstream_error' : 'invalid_request_error', code, message, { headers }),
  unavailable: (message: string, code = 'service_unavailable') => new ProxyError(503, 'service_unavailable', code, message),
  /** A domain error (see errors/errors.ts) as OpenAI's error object, with its status. */
  fromDomain: (e: DomainError) =>
    new ProxyError(e.status, e.status >= 500 ? 'service_unavailable' : 'invalid_request_error', e.code, e.message, { headers: retry(e.retryAfter) }),
  internal: () => new ProxyError(500, 'server_error', 'internal_error', 'the proxy failed to answer; the error was logged with this request id'),
};

/** Answers with the error in OpenAI's format, with its status and headers. */
export function sendProxyError(reply: FastifyReply, err: ProxyError) {
  for (const [k, v] of Object.entries(err.headers)) reply.header(k, v);
  return reply.status(err.status).type('application/json').send(err.toJSON());
}

/** Maps any error to the OpenAI error format: ours, validation, body parsing, or a 500 without internals. */
export function toProxyError(err: FastifyError, request: FastifyRequest): ProxyError {
  if (err instanceof ProxyError) return err;
  if (err.validation) {
    const problems = fieldProblems(err.validation as any, err.validationContext);
    const first = problems[0];
    return proxyErrors.invalidRequest(`${validationPlace(err.validationContext)} is not valid: ${problems.map((p) => `${p.field} ${p.message}`).join('; ')}`, first?.field ?? null);
  }
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ProxyError(415, 'invalid_request_error', 'unsupported_media_type', 'send the body as application/json');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ProxyError(413, 'invalid_request_error', 'body_too_large', 'the body is larger than the proxy accepts');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return proxyErrors.invalidRequest('the body is empty; send a JSON document');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return proxyErrors.invalidRequest('the body is not valid JSON');
  }
  if (err instanceof SyntaxError && (err as FastifyError).statusCode === 400) return proxyErrors.invalidRequest('the body is not valid JSON');
  const domain = toDomainError(err, request.log);
  if (domain) return proxyErrors.fromDomain(domain);
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) return new ProxyError(err.statusCode, 'invalid_request_error', null, err.message);
  request.log.error({ err }, 'unhandled error');
  return proxyErrors.internal();
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The body goes on upstream and is not stored: a NUL character in its text is sent on as the client sent it. */
    forwardsNul?: boolean;
    /** The body's bytes are kept beside its parsed value (see raw-json.ts): the route forwards them. */
    keepsRawJson?: boolean;
  }
}

/**
 * What is wrong with a body the proxy would not pass on or keep as sent, as a 400 naming the field
 * (OpenAI's `param`): half of a surrogate pair (not Unicode: OpenAI's and Anthropic's APIs refuse
 * the whole body as "not valid JSON" without saying where, and a text column would keep U+FFFD),
 * nesting past MAX_JSON_DEPTH (it would overflow the serializer on the way upstream), and, unless
 * the route forwards it, a NUL character (PostgreSQL cannot store it).
 */
function unsendableBody(body: unknown, nul: boolean): ProxyError | null {
  // Read from the text when it was kept: a body with no \u escape of a surrogate or of NUL can
  // only nest too deep, and the text says how deep without walking every string of the value.
  const raw = body !== null && typeof body === 'object' ? rawJsonOf(body) : undefined;
  if (raw && !raw.suspectEscape) return raw.maxOpen > MAX_JSON_DEPTH ? proxyErrors.invalidRequest(`the body nests deeper than ${MAX_JSON_DEPTH} levels`) : null;
  const found = inspectJson(body, { nul, wellFormed: true });
  if (found === null) return null;
  if ('tooDeep' in found) return proxyErrors.invalidRequest(`the body nests deeper than ${MAX_JSON_DEPTH} levels`);
  const { field, message } = unstorableWords(found);
  const name = field || '(body)';
  return proxyErrors.invalidRequest(`${name} ${message}${'illFormed' in found ? '; send the whole character or leave it out' : ''}`, name);
}

/** The proxy's error and not-found handlers, and the checks every JSON body passes before its route. */
export function useProxyErrors(app: App) {
  // Fastify's own JSON parser (its prototype-poisoning guards included), given the text as its
  // string parser would decode it. For a route that forwards the body, the text is read first
  // (raw-json.ts) and its bytes kept: when no key in it can read as __proto__ or constructor,
  // those guards can find nothing, and the text goes to JSON.parse alone (their two regular
  // expressions cost about 0.5 ms at 800 KiB). Whatever JSON.parse refuses goes to Fastify's
  // parser, so every error is its own.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    const bytes = body as Buffer;
    const text = bytes.toString('utf8');
    const raw = req.routeOptions.config?.keepsRawJson ? readRawJson(bytes, text) : null;
    if (raw && !raw.suspectKey) {
      let value: object;
      try {
        value = JSON.parse(raw.bom ? text.slice(1) : text) as object;
      } catch {
        parseJson(req, text, done);
        return;
      }
      keepRawJson(value, raw);
      done(null, value);
      return;
    }
    parseJson(req, text, (err, value) => {
      if (!err && raw && value !== null && typeof value === 'object') keepRawJson(value, raw);
      done(err, value);
    });
  });
  // A callback hook: an async one costs a promise and its turns on every request.
  app.addHook('preValidation', (req, _reply, done) => {
    if (req.body === undefined || req.body === null) return done();
    const refused = unsendableBody(req.body, !req.routeOptions.config?.forwardsNul);
    done(refused ?? undefined);
  });
  const noRoute = (request: FastifyRequest) => {
    const allowed = methodsServing(app, request.url);
    return allowed.length > 0 ? proxyErrors.methodNotAllowed(request.method, allowed) : proxyErrors.notFound(`no route ${request.method} ${request.url.split('?')[0].slice(0, 200)}`);
  };
  // A request to no route still has its body parsed first (an OPTIONS or DELETE with a JSON
  // Content-Type and no body fails there): what is wrong with it is the route, not the body.
  app.setErrorHandler((err: FastifyError, request, reply) => sendProxyError(reply, request.is404 ? noRoute(request) : toProxyError(err, request)));
  app.setNotFoundHandler((request, reply) => sendProxyError(reply, noRoute(request)));
}
