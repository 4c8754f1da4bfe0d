import type { DomainError } from './errors.ts';

/** One field problem inside a problem document. */
export interface FieldProblem {
  field: string;
  message: string;
}

const TYPE_BASE = 'https://crewhouse.dev/problems/';

/**
 * An RFC 9457 problem. Every error the API answers is one of these, built by the
 * factories below; the status travels with the error, and one handler renders it.
 */
export class Problem extends Error {
  readonly status: number;
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly errors: FieldProblem[];
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    code: string,
    title: string,
    detail: string,
    errors: FieldProblem[] = [],
    headers: Record<string, string> = {},
  ) {
    super(detail);
    this.status = status;
    this.type = TYPE_BASE + code;
    this.title = title;
    this.detail = detail;
    this.errors = errors;
    this.headers = headers;
  }

  toJSON() {
    return { type: this.type, title: this.title, status: this.status, detail: this.detail, errors: this.errors };
  }
}

const TITLES: Record<number, string> = { 400: 'Bad request', 409: 'Conflict', 413: 'Payload too large', 422: 'Validation failed', 503: 'Service unavailable' };

export const problems = {
  badRequest: (detail: string, errors: FieldProblem[] = []) => new Problem(400, 'bad-request', 'Bad request', detail, errors),
  invalidField: (field: string, message: string, status: 400 | 422 = 422) =>
    new Problem(status, status === 400 ? 'bad-request' : 'validation', status === 400 ? 'Bad request' : 'Validation failed', `${field}: ${message}`, [{ field, message }]),
  validation: (errors: FieldProblem[], detail?: string) =>
    new Problem(422, 'validation', 'Validation failed', detail ?? errors.map((e) => `${e.field}: ${e.message}`).join('; '), errors),
  unauthorized: (detail: string) =>
    new Problem(401, 'unauthorized', 'Unauthorized', detail, [], { 'www-authenticate': 'Bearer realm="crewhouse"' }),
  forbidden: (detail: string) => new Problem(403, 'forbidden', 'Forbidden', detail),
  notFound: (what: string, name: string | number) => new Problem(404, 'not-found', 'Not found', `no ${what} named "${name}"`),
  /** Nothing by that name, said in a sentence of its own (one that names what there is). */
  notFoundSaid: (detail: string) => new Problem(404, 'not-found', 'Not found', detail),
  /** A record known by a number, not a name (a user, a token). */
  notFoundById: (what: string, id: number) => new Problem(404, 'not-found', 'Not found', `no ${what} with id ${id}`),
  routeNotFound: (method: string, url: string) => new Problem(404, 'not-found', 'Not found', `no route ${method} ${url}`),
  /** A known resource called with a method it does not take (RFC 9110: 405 with Allow). */
  methodNotAllowed: (method: string, allowed: string[]) =>
    new Problem(405, 'method-not-allowed', 'Method not allowed', `this resource does not take ${method}; it takes ${allowed.join(', ')}`, [], { allow: allowed.join(', ') }),
  conflict: (detail: string, errors: FieldProblem[] = []) => new Problem(409, 'conflict', 'Conflict', detail, errors),
  preconditionFailed: () =>
    new Problem(412, 'precondition-failed', 'Precondition failed', 'If-Match does not match the current ETag: the resource changed since you read it; read it again and retry once'),
  preconditionRequired: () =>
    new Problem(428, 'precondition-required', 'Precondition required', 'this write needs an If-Match header with the ETag from a fresh GET of the resource'),
  payloadTooLarge: (detail: string) => new Problem(413, 'payload-too-large', 'Payload too large', detail),
  unsupportedMediaType: (detail: string) => new Problem(415, 'unsupported-media-type', 'Unsupported media type', detail),
  tooManyRequests: (detail: string, retryAfterSeconds?: number) =>
    new Problem(429, 'too-many-requests', 'Too many requests', detail, [], retryAfterSeconds ? { 'retry-after': String(retryAfterSeconds) } : {}),
  badGateway: (detail: string) => new Problem(502, 'bad-gateway', 'Bad gateway', detail),
  unavailable: (detail: string) => new Problem(503, 'unavailable', 'Service unavailable', detail),
  /** A domain error (see errors/errors.ts) as a problem: its status, its code as the type. */
  fromDomain: (e: DomainError) =>
    new Problem(e.status, e.code.replace(/_/g, '-'), TITLES[e.status] ?? 'Error', e.message, [], e.retryAfter ? { 'retry-after': String(e.retryAfter) } : {}),
  internal: () => new Problem(500, 'internal', 'Internal server error', 'the server failed to answer; the error was logged with this request id'),
};

/**
 * A check with an integration's outside service that got no answer about the thing checked (a
 * team's chat room, a tracker team or project, a repository the code-host app should cover,
 * checked when a link is made or a team created): the fault is not the request's, so not a 422.
 * `credentials`: the service refused the integration's own credentials (401, 403, a revoked or
 * under-scoped token); the caller cannot mend that from the request, an admin mends the
 * integration: 503. `failed`: the service could not be reached, rate-limited or failed; the same
 * request may succeed once it answers: 502. Either way nothing was changed. The chat, tracker and
 * code-host checks all answer through this, so each says the same for the same case.
 */
export function integrationCheckProblem(
  cause: 'credentials' | 'failed',
  check: {
    /** What was being checked, after "could not check": `the chat_a room <id>`, `ENG with Linear`. */
    what: string;
    /** The outside service in words: `Linear`, `the chat server`, `the code host`. */
    service: string;
    /** The integration kind whose settings an admin mends: `tracker_a`. */
    integration: string;
    /** Why, in words for people (a SaidForPeople message): never an exception's own text. */
    said: string;
  },
): Problem {
  const said = check.said.replace(/[.;\s]+$/, '');
  return cause === 'credentials'
    ? problems.unavailable(
        `could not check ${check.what}: ${said}. Nothing was changed: ${check.service} refuses the ${check.integration} integration's credentials, which this request cannot mend; an admin mends the integration (its connection test says what fails), then send this again`,
      )
    : problems.badGateway(
        `could not check ${check.what}: ${said}. Nothing was changed: send this again once ${check.service} answers (the ${check.integration} integration's connection test says what fails)`,
      );
}

/**
 * An error whose message is written for people: one line saying what failed and what to do
 * next, without a secret (a surface adapter's failed call: `TrackerError`, `CodeHostError`).
 */
export interface SaidForPeople extends Error {
  readonly forPeople: true;
}

/**
 * The words a failure may be shown with where people read it (a webhook delivery's `detail`): a
 * Problem's detail, or the message of an error written for people; `otherwise` for any other
 * error, whose own text is never shown (an SDK's message may quote a response body or an address
 * with a token in it).
 */
export function reasonForPeople(err: unknown, otherwise: string): string {
  if (err instanceof Problem) return err.detail;
  if (err instanceof Error && (err as Partial<SaidForPeople>).forPeople === true) return err.message;
  return otherwise;
}
