import { Type } from 'typebox';
import type { App } from './kernel.ts';

export const ProblemSchema = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    errors: Type.Array(Type.Object({ field: Type.String(), message: Type.String() })),
  },
  { $id: 'Problem', description: 'RFC 9457 problem; errors[] names each bad field' },
);

// Both If-Match headers validate as optional: a missing one must reach the handler, which
// answers 428 (or creates). The contract lists the first as required.
/** Headers of a write of an existing resource: If-Match is required (428 when missing, 412 when stale). */
export const IfMatchHeader = Type.Object({
  'if-match': Type.Optional(Type.String({ description: 'the ETag from a fresh GET, one ETag as given ("12"); 428 when missing, 412 when stale, 400 for * or a list' })),
});

/** Headers of a create-or-replace write: without If-Match it creates; replacing needs it (412 when stale). */
export const IfMatchToReplace = Type.Object({
  'if-match': Type.Optional(Type.String({ description: 'to replace: the ETag from a fresh GET, one ETag as given (412 when stale, 400 for * or a list); omit to create' })),
});

/** Whether a route's headers schema requires If-Match (the contract marks it required). */
export const isIfMatchRequired = (headers: { properties?: Record<string, unknown> }): boolean => headers.properties?.['if-match'] === IfMatchHeader.properties['if-match'];

export const NoContent = Type.Null({ description: 'no content' });

/**
 * The query string of a route that takes no query parameters: one sent anyway is a 400 naming
 * it, as a list refuses a parameter it does not know (ListQuery), rather than being ignored.
 * Routes do not name it: `refuseUnknownQuery` gives it to every route of a scope that declares
 * no query string of its own.
 */
export const NoQuery = Type.Object({}, { additionalProperties: false });

/**
 * Every route registered in `scope` (and the scopes inside it), of any method, refuses a query
 * parameter it does not take: one that declares no query string gets NoQuery, and one that
 * declares its own must refuse unknown parameters itself (`additionalProperties: false`), else
 * the server does not start. Set on an API's scope before its routes, and only where the contract
 * says so: the chat API ignores unknown parameters as Zulip does, and webhook senders and the web
 * pages are not ours to refuse. The route's schema is replaced in place, so the served OpenAPI
 * (which holds the route's options) documents what is validated.
 */
export function refuseUnknownQuery(scope: App): void {
  scope.addHook('onRoute', (route) => {
    const query = route.schema?.querystring as { additionalProperties?: unknown } | undefined;
    if (query === undefined) route.schema = { ...route.schema, querystring: NoQuery };
    else if (query.additionalProperties !== false) {
      throw new Error(`${String(route.method)} ${route.url}: its query string must refuse parameters it does not name (additionalProperties: false)`);
    }
  });
}

/** A path segment name: what most resources are called by. */
export const NameParam = (pattern = '^[a-z0-9][a-z0-9._-]{0,62}$', words = 'lowercase letters, digits, ".", "_" and "-", starting with a letter or digit; at most 63 characters') =>
  Type.String({ minLength: 1, maxLength: 128, ...matching(pattern, words) });

/**
 * The keyword beside a `pattern` that says in words what the pattern allows. Validation
 * messages and the web console's forms show these words, never the expression itself; every
 * pattern of the served contract has them (src/http/validation-words.test.ts).
 */
export const PATTERN_WORDS = 'x-pattern-description';

/** A string's `pattern` and, beside it, what it allows in words ("lowercase letters, digits and -"). */
export const matching = (pattern: string, words: string): { pattern: string; [PATTERN_WORDS]: string } => ({ pattern, [PATTERN_WORDS]: words });
