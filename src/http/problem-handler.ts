import { isUtf8 } from 'node:buffer';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { toDomainError } from '../errors/errors.ts';
import { methodsServing, type App } from './kernel.ts';
import { Problem, problems } from '../errors/problems.ts';
import { fieldProblems, validationPlace } from './validation.ts';
import { inspectJson, MAX_JSON_DEPTH, unstorableWords } from '../db/json-values.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What a route's body must be, as its 415 says; JSON when not given. */
    accepts?: string;
    /** The body may be left out: none is read as `{}`, and the contract documents it as optional. */
    optionalBody?: boolean;
  }
}

const isJson = (text: string): boolean => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

/** A field of the path as the contract names it: a trailing `*` parameter by its documented name (`name`, not `*`). */
const contractField = (request: FastifyRequest, part: string | undefined, field: string): string =>
  part === 'params' && field === '*' ? (request.routeOptions.config?.openapiWildcard ?? field) : field;

/** Maps any error to a problem: ours, validation, body parsing, a domain or database error, or a 500 without internals. */
export function toProblem(err: FastifyError & { code?: string }, request: FastifyRequest): Problem {
  if (err instanceof Problem) return err;
  if (err.validation) {
    const errors = fieldProblems(err.validation as any, err.validationContext).map((e) => ({ ...e, field: contractField(request, err.validationContext, e.field) }));
    return problems.badRequest(`${validationPlace(err.validationContext)} is not valid: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`, errors);
  }
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return problems.unsupportedMediaType(`content type ${JSON.stringify(request.headers['content-type'] ?? '')} is not accepted here; send ${request.routeOptions.config?.accepts ?? 'application/json'}`);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return problems.badRequest('Content-Length does not match the body');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return problems.payloadTooLarge('the body is larger than this route accepts');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return problems.badRequest('the body is empty; send a JSON document', [{ field: '(body)', message: 'is required' }]);
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return problems.badRequest('the body is not valid JSON', [{ field: '(body)', message: 'is not valid JSON' }]);
    case 'FST_ERR_CTP_INVALID_TYPE':
      return problems.unsupportedMediaType('the Content-Type header is malformed');
    case 'FST_ERR_BAD_URL':
    case 'FST_ERR_ASYNC_CONSTRAINT':
      return problems.badRequest('the URL is malformed');
  }
  if (err instanceof SyntaxError && (err as FastifyError).statusCode === 400) {
    return problems.badRequest('the body is not valid JSON', [{ field: '(body)', message: 'is not valid JSON' }]);
  }
  const domain = toDomainError(err, request.log);
  if (domain) return problems.fromDomain(domain);
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    return new Problem(err.statusCode, 'bad-request', 'Bad request', err.message);
  }
  request.log.error({ err }, 'unhandled error');
  return problems.internal();
}

export function sendProblem(reply: FastifyReply, p: Problem): FastifyReply {
  return reply
    .status(p.status)
    .headers(p.headers)
    .type('application/problem+json')
    .send(JSON.stringify(p.toJSON()));
}

/**
 * Installs problem+json answers for every error and unknown route of a console server, and
 * refuses what the database would not keep as sent (a NUL character, half of a surrogate pair,
 * nesting past MAX_JSON_DEPTH) in the body, query or path as a 400 naming the field: PostgreSQL
 * refuses the first two in jsonb with an error naming no field, and stores half a surrogate
 * pair in a text column as U+FFFD, another value than was sent.
 */
export function useProblems(app: App): void {
  app.setErrorHandler((err: FastifyError, request, reply) => sendProblem(reply, toProblem(err, request)));
  // A JSON body is UTF-8 (RFC 8259): bytes that are not would be decoded into replacement
  // characters and stored as if the client had sent them, so they are refused first. Fastify's own
  // parser (its prototype-poisoning guards included) then reads the text.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer;
    // A route whose body may be left out takes it left out with a Content-Type too (a client that sets the header on every request).
    if (bytes.length === 0 && request.routeOptions.config?.optionalBody) {
      done(null, undefined);
      return;
    }
    if (!isUtf8(bytes)) {
      done(problems.badRequest('the body is not valid UTF-8: send JSON text encoded as UTF-8', [{ field: '(body)', message: 'is not valid UTF-8' }]), undefined);
      return;
    }
    const text = bytes.toString('utf8');
    parseJson(request, text, (err, value) => {
      // Valid JSON the parser refuses on purpose (prototype pollution) would otherwise be "not valid JSON", and
      // send the client looking for a syntax error; the second parse is on this error's path only.
      if ((err as FastifyError | null)?.code === 'FST_ERR_CTP_INVALID_JSON_BODY' && isJson(text)) {
        done(problems.badRequest('the body names a field __proto__ (or constructor.prototype), which is not accepted: leave it out', [{ field: '(body)', message: 'must not name __proto__ or constructor.prototype' }]), undefined);
        return;
      }
      done(err, value);
    });
  });
  // A callback hook: it never waits, and an async one costs a promise and its turns per request.
  app.addHook('preValidation', (request, _reply, done) => {
    if (request.body == null && request.routeOptions.config?.optionalBody) request.body = {};
    for (const part of ['body', 'query', 'params'] as const) {
      const found = inspectJson(request[part], { wellFormed: true });
      if (found === null) continue;
      const { field, message } = unstorableWords(found);
      const name = field ? contractField(request, part, field) : part === 'body' ? '(body)' : `(${part})`;
      const detail =
        'tooDeep' in found
          ? `the ${part} nests deeper than ${MAX_JSON_DEPTH} levels`
          : 'nul' in found
            ? `${name} holds a NUL character, which cannot be stored`
            : `${name} holds half of a surrogate pair (an escape such as "\\ud800" without its other half), which is not Unicode text and cannot be stored as sent: send the whole character or leave it out`;
      done(problems.badRequest(detail, [{ field: name, message }]));
      return;
    }
    done();
  });
  app.setNotFoundHandler((request, reply) => sendProblem(reply, noRouteProblem(app, request)));
}

/** The answer to a request no route takes: 405 with Allow when its path is served with other methods, else 404. */
export function noRouteProblem(app: App, request: { method: string; url: string }): Problem {
  const allowed = methodsServing(app, request.url);
  return allowed.length > 0 ? problems.methodNotAllowed(request.method, allowed) : problems.routeNotFound(request.method, request.url.split('?')[0]);
}

/**
 * For `clientErrorHandler` of a server: a request Node's HTTP parser cannot read (a malformed
 * request line or header, a body longer than its Content-Length running into the next request,
 * headers too large, a request too slow to arrive) is answered as a problem too, not Fastify's own
 * JSON: no route has it yet, so it is written on the socket, which is then closed.
 */
export function clientProblem(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const p =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new Problem(408, 'request-timeout', 'Request timeout', 'the request did not arrive in time; send it again')
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? new Problem(431, 'request-header-fields-too-large', 'Request header fields too large', 'the request headers are larger than the server reads; send fewer or shorter headers')
        : problems.badRequest('the request is not valid HTTP (a malformed request line or header, or a body that does not match its Content-Length); the connection is closed');
  const body = JSON.stringify(p.toJSON());
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${p.status} ${p.title}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/problem+json\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}

/** For `frameworkErrors` of a server: a URL the router cannot decode is a problem too. */
export function frameworkProblem(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  sendProblem(reply, toProblem(err, request));
}
