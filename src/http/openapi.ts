import swagger from '@fastify/swagger';
import { IsObject, IsUnion, Type } from 'typebox';
import type { App } from './kernel.ts';
import type { AuthRule } from './auth.ts';
import { isIfMatchRequired, ProblemSchema } from './schemas.ts';

export const API_PREFIX = '/api/v1';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The OpenAPI name of a route's trailing `*` parameter. */
    openapiWildcard?: string;
  }
  interface FastifySchema {
    /** One line saying what the operation does: the contract's summary of it. */
    summary?: string;
    /**
     * Problem answers this route gives beyond those derived from its declaration (see
     * `problemsOf`), each with the reason a client would meet it; `false` drops a derived one
     * the route cannot answer.
     */
    problems?: Partial<Record<number, string | false>>;
    /** The success answers carry the resource's ETag (a write of it needs it back in If-Match). */
    etag?: boolean;
    /** The 202 answer carries the Location of what it started (every 201 carries the created resource's). */
    location?: boolean;
  }
}

const PROBLEM_CONTENT = { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } };

/**
 * The problem answers a route declaration implies, by status, and the shared response
 * component each one is listed as. What they say holds for every route of that kind.
 */
const DERIVED = {
  400: { name: 'BadRequest', description: 'the request does not match its schema (errors[] names each field), a cursor is not one this list gave out, or a header is malformed' },
  401: { name: 'Unauthorized', description: 'no credentials, or they are unknown, revoked, expired or malformed' },
  403: { name: 'Forbidden', description: 'the role may not make this request, or a browser session did not send its CSRF token' },
  404: { name: 'NotFound', description: 'no resource of that name (or one outside your reach)' },
  412: { name: 'PreconditionFailed', description: 'If-Match does not match the current ETag: read again and retry once' },
  413: { name: 'PayloadTooLarge', description: 'the body is larger than this route accepts' },
  415: { name: 'UnsupportedMediaType', description: 'the Content-Type is not one this route accepts' },
  422: { name: 'UnprocessableContent', description: 'the body matches its schema but breaks a rule (errors[] names each field)' },
  428: { name: 'PreconditionRequired', description: 'If-Match is missing: send the ETag of a fresh GET (a resource that is not there is a 404 first)' },
} as const;
type DerivedStatus = keyof typeof DERIVED;

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The problem statuses a route can answer, from what it declares: every route may answer
 * 400 (schema, malformed headers) and 401 (credentials, a malformed one even on public
 * routes); 403 where a role above viewer, a session, or a CSRF token on unsafe methods is
 * required; 404 with path parameters; 413, 415 and (JSON) 422 with a body; 412 and 428 with
 * If-Match (on a create-or-replace route, 428 only when replacing). The route's own
 * `problems` add to these or drop from them.
 */
export function problemsOf(method: string, rule: AuthRule | undefined, schema: Record<string, any>): Map<number, string> {
  const out = new Map<number, string>();
  const add = (status: DerivedStatus) => out.set(status, DERIVED[status].description);
  add(400);
  add(401);
  if (rule && !('public' in rule) && (rule.role !== 'viewer' || rule.sessionOnly || !SAFE.has(method))) add(403);
  if (Object.keys(schema.params?.properties ?? {}).length > 0) add(404);
  if (schema.body) {
    add(413);
    add(415);
    if (!schema.body.content) add(422);
  }
  if (schema.headers?.properties?.['if-match']) {
    add(412);
    if (isIfMatchRequired(schema.headers)) add(428);
    else out.set(428, 'replacing an existing resource without If-Match: send the ETag of a fresh GET (omit it only to create)');
  }
  for (const [status, reason] of Object.entries(schema.problems ?? {})) {
    if (reason === false) out.delete(Number(status));
    else if (typeof reason === 'string') out.set(Number(status), reason);
  }
  return out;
}

const ETAG_HEADER = { type: 'string', description: 'the strong ETag of the resource, for If-Match (and If-None-Match where a route says so)' };
const LOCATION_HEADER = { type: 'string', description: 'the path of the created resource' };
const RETRY_AFTER_HEADER = { type: 'integer', minimum: 1, description: 'seconds to wait before trying again' };

/** The success answers of a route with the headers it declares sending. */
function withSuccessHeaders(response: Record<string, any>, schema: Record<string, any>): Record<string, any> {
  const out: Record<string, any> = {};
  for (const [code, answer] of Object.entries(response)) {
    const headers: Record<string, object> = {};
    if (schema.etag && (/^2\d\d$/.test(code) || code === '304')) headers.etag = ETAG_HEADER;
    // Every 201 carries it (a PUT that creates answers its own path: see the kernel); a 202 where the route says so.
    if (code === '201' || (schema.location && code === '202')) headers.location = LOCATION_HEADER;
    out[code] = Object.keys(headers).length > 0 ? { ...answer, headers: { ...answer.headers, ...headers } } : answer;
  }
  return out;
}

const REASONS: Record<string, string> = { 200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content', 304: 'Not Modified' };

/** A JSON Schema keyword whose value is a map of schemas, or a schema, or a list of schemas. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs']);
const SCHEMA_LISTS = new Set(['anyOf', 'oneOf', 'allOf', 'prefixItems']);
const SCHEMA_ONE = new Set(['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames']);

/**
 * Applies `fn` to a schema and each of its subschemas, bottom up, into a new schema: `fn` gets
 * the copy with its subschemas already mapped, and the original (whose identity may matter).
 */
function mapSchema(schema: any, fn: (mapped: any, original: any) => any): any {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return schema;
  const out: Record<string, any> = {};
  for (const [k, v] of Object.entries(schema)) {
    if (SCHEMA_MAPS.has(k) && v && typeof v === 'object') out[k] = Object.fromEntries(Object.entries(v).map(([n, s]) => [n, mapSchema(s, fn)]));
    else if (SCHEMA_LISTS.has(k) && Array.isArray(v)) out[k] = v.map((s) => mapSchema(s, fn));
    else if (SCHEMA_ONE.has(k)) out[k] = mapSchema(v, fn);
    else out[k] = v;
  }
  return fn(out, schema);
}

const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x) => (x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x));

/** Times are the fields named `*_at`: RFC 3339 strings (or null where nullable). */
function markTimes(schema: any): any {
  if (!schema.properties) return schema;
  const properties: Record<string, any> = {};
  for (const [name, p] of Object.entries<any>(schema.properties)) {
    if (!name.endsWith('_at')) properties[name] = p;
    else if (p.type === 'string') properties[name] = { ...p, format: 'date-time' };
    else if (Array.isArray(p.anyOf)) properties[name] = { ...p, anyOf: p.anyOf.map((b: any) => (b.type === 'string' ? { ...b, format: 'date-time' } : b)) };
    else properties[name] = p;
  }
  return { ...schema, properties };
}

/** Shapes the contract lists by name, each as one component: a schema object -> its name. */
export type NamedShapes = Map<object, string>;

/**
 * The named shapes of schema modules: every exported object or union schema, named by its
 * export (`DocumentSchema` -> `Document`). Pass the modules whose shapes routes answer or take.
 */
export function shapesOf(...modules: Array<Record<string, unknown>>): NamedShapes {
  const shapes: NamedShapes = new Map();
  for (const m of modules) {
    for (const [name, value] of Object.entries(m)) {
      if ((IsObject(value) || IsUnion(value)) && !shapes.has(value as object)) shapes.set(value as object, name.replace(/Schema$/, ''));
    }
  }
  return shapes;
}

/**
 * A route's body or answer schema with each named shape in it titled by its name, for
 * `finishDocument` to list once; a page of a named item is `<Item>Page`. Validation and
 * serialization keep the untouched schemas.
 */
function nameShapes(schema: any, shapes: NamedShapes): any {
  return mapSchema(schema, (mapped, original) => {
    const name = shapes.get(original);
    if (name) return { ...mapped, title: name };
    const item = original.properties?.items?.items;
    return original.properties?.next_cursor && item && shapes.has(item) ? { ...mapped, title: `${shapes.get(item)}Page` } : mapped;
  });
}

/** A route's answers with their named shapes titled (see `nameShapes`), in either form an answer takes. */
function nameAnswers(response: Record<string, any>, shapes: NamedShapes): Record<string, any> {
  const out: Record<string, any> = {};
  for (const [code, answer] of Object.entries(response)) {
    out[code] = answer?.content ? { ...answer, content: mapContent(answer.content, (x) => nameShapes(x, shapes)) } : nameShapes(answer, shapes);
  }
  return out;
}

/** Examples of a contract, which `finishDocument` places where a reader (and Swagger UI) finds them. */
export interface ContractExamples {
  /** One value of each named shape, by component name; a `<Item>Page` gets a page of its item's. */
  shapes: Record<string, unknown>;
  /** Bodies and answers that are not named shapes, by operationId. */
  operations: Record<string, { body?: unknown; answer?: unknown }>;
  /** Path parameter values by `<first path segment>.<name>` (`teams.name`), as names differ by resource. */
  params: Record<string, unknown>;
}

/** The document with its examples in place: on named schemas, on operations' media, on path parameters. */
function withExamples(doc: any, examples: ContractExamples): any {
  const schemas: Record<string, any> = { ...doc.components.schemas };
  for (const [name, value] of Object.entries(examples.shapes)) if (schemas[name]) schemas[name] = { ...schemas[name], examples: [value] };
  for (const name of Object.keys(schemas)) {
    const item = name.endsWith('Page') ? examples.shapes[name.slice(0, -4)] : undefined;
    if (item !== undefined && !schemas[name].examples) schemas[name] = { ...schemas[name], examples: [{ items: [item], next_cursor: null }] };
  }
  const withMediaExample = (content: Record<string, any>, value: unknown) =>
    Object.fromEntries(Object.entries(content).map(([type, media]) => [type, value !== undefined && (type.includes('json') || type.includes('yaml')) && !media.schema?.$ref ? { ...media, example: value } : media]));
  const paths: Record<string, any> = {};
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    const resource = path.split('/')[1];
    paths[path] = {};
    for (const [method, op] of Object.entries<any>(item)) {
      const own = examples.operations[op.operationId] ?? {};
      const next = { ...op };
      if (op.parameters) next.parameters = op.parameters.map((p: any) => (p.in === 'path' && `${resource}.${p.name}` in examples.params ? { ...p, example: examples.params[`${resource}.${p.name}`] } : p));
      if (op.requestBody?.content) next.requestBody = { ...op.requestBody, content: withMediaExample(op.requestBody.content, own.body) };
      next.responses = Object.fromEntries(Object.entries<any>(op.responses).map(([code, answer]) => [code, /^2/.test(code) && answer.content ? { ...answer, content: withMediaExample(answer.content, own.answer) } : answer]));
      paths[path][method] = next;
    }
  }
  return { ...doc, paths, components: { ...doc.components, schemas } };
}

/**
 * The last pass over the generated document: every schema with a `title` becomes one named
 * component, referred to wherever it appears (two different shapes with one name are a
 * programming error); times get `format: date-time` in answers; the derived problem answers
 * refer to shared response components; success answers get their reason as description.
 */
export function finishDocument(doc: any, examples?: ContractExamples): any {
  const schemas: Record<string, any> = { ...doc.components?.schemas };
  const seen = new Map<string, string>();
  const hoist = (s: any) => {
    if (typeof s.title !== 'string') return s;
    const key = canonical(s);
    const before = seen.get(s.title);
    if (before !== undefined && before !== key) {
      throw new Error(`OpenAPI: two different schemas are named ${s.title} (two exports of that name, or a shape with *_at times used as a request body too)`);
    }
    seen.set(s.title, key);
    schemas[s.title] = s;
    return { $ref: `#/components/schemas/${s.title}` };
  };
  const responses: Record<string, any> = { Problem: { description: 'a problem (RFC 9457)', content: PROBLEM_CONTENT } };
  for (const d of Object.values(DERIVED)) responses[d.name] = { description: d.description, content: PROBLEM_CONTENT };
  responses.Unauthorized.headers = { 'www-authenticate': { description: 'the scheme to authenticate with: Bearer realm="crewhouse"', schema: { type: 'string' } } };

  const paths: Record<string, any> = {};
  for (const [path, item] of Object.entries<any>(doc.paths ?? {})) {
    paths[path] = {};
    for (const [method, op] of Object.entries<any>(item)) {
      if (!op || typeof op !== 'object' || !op.responses) {
        paths[path][method] = op;
        continue;
      }
      const next = { ...op };
      if (op.requestBody?.content) {
        next.requestBody = { ...op.requestBody, content: mapContent(op.requestBody.content, (s) => mapSchema(s, hoist)) };
      }
      if (next['x-optional-body']) {
        if (next.requestBody) next.requestBody.required = false;
        delete next['x-optional-body'];
      }
      next.responses = {};
      for (const [code, answer] of Object.entries<any>(op.responses)) {
        const derived = DERIVED[Number(code) as DerivedStatus];
        if (code === 'default') next.responses[code] = { $ref: '#/components/responses/Problem' };
        else if (derived && answer.description === derived.description) next.responses[code] = { $ref: `#/components/responses/${derived.name}` };
        else {
          const described = answer.description === 'Default Response' && REASONS[code] ? { ...answer, description: REASONS[code] } : answer;
          next.responses[code] = described.content ? { ...described, content: mapContent(described.content, (s) => mapSchema(s, (x) => hoist(markTimes(x)))) } : described;
        }
      }
      paths[path][method] = next;
    }
  }
  const sortedSchemas = Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => a.localeCompare(b)));
  const finished = { ...doc, paths, components: { ...doc.components, schemas: sortedSchemas, responses } };
  return examples ? withExamples(finished, examples) : finished;
}

function mapContent(content: Record<string, any>, fn: (schema: any) => any): Record<string, any> {
  return Object.fromEntries(Object.entries(content).map(([type, media]) => [type, media?.schema ? { ...media, schema: fn(media.schema) } : media]));
}

/**
 * Registers OpenAPI 3.1 generation from the route schemas. Paths are relative to the
 * server URL `<public base>/api/v1`; each operation's security follows its auth rule, its
 * problem answers follow its declaration (`problemsOf`), and named shapes are components
 * (`finishDocument`). Routes outside /api/v1 are not listed.
 */
export async function useOpenApi(app: App, opts: { publicBaseUrl: string; version: string; shapes?: NamedShapes; examples?: ContractExamples }) {
  const shapes = opts.shapes ?? new Map();
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Crewhouse Console API',
        version: opts.version,
        license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
        description:
          'Runs teams of coding agents in sandboxes. Errors are application/problem+json. Lists answer {items, next_cursor}; ' +
          'limit is 1 to 200 (default 50), except a run\'s posts (1 to 500, default 200, and `cursor` is the last `seq` seen). Writes of existing resources need If-Match (428 missing, 412 stale). ' +
          'A request that does not match a schema answers 400 naming each field; one that matches but breaks a rule answers 422. ' +
          'A path called with a method it does not take answers 405 with the methods it takes in `Allow`. A 201 carries the created resource\'s `Location`.\n\n' +
          CONTRACT_POLICY,
      },
      servers: [{ url: `${opts.publicBaseUrl}${API_PREFIX}` }],
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'an API token (chk_...)' },
          sessionCookie: { type: 'apiKey', in: 'cookie', name: 'crewhouse_session', description: 'browser session; unsafe requests also need X-Console-CSRF' },
        },
        schemas: { Problem: ProblemSchema as any },
      },
    },
    hideUntagged: false,
    transform: ({ schema, url, route }) => {
      if (!url.startsWith(API_PREFIX)) return { schema: { ...(schema as object), hide: true } as any, url };
      const rule = (route.config as { auth?: AuthRule } | undefined)?.auth;
      const security =
        !rule || 'public' in rule ? [] : rule.sessionOnly ? [{ sessionCookie: [] }] : [{ bearerAuth: [] }, { sessionCookie: [] }];
      const s = { ...(schema as Record<string, any>) };
      s.security = security;
      const method = [route.method].flat()[0] as string;
      const problems = problemsOf(method, rule, s);
      // A trailing wildcard (a name that may contain `/`) is documented as a named path parameter.
      let path = url;
      if (url.endsWith('/*')) {
        const name = (route.config as { openapiWildcard?: string } | undefined)?.openapiWildcard ?? 'path';
        path = `${url.slice(0, -1)}:${name}`;
        const params = s.params as { properties?: Record<string, unknown>; required?: string[] } | undefined;
        if (params?.properties?.['*']) {
          const { '*': wildcard, ...rest } = params.properties;
          s.params = { ...params, properties: { ...rest, [name]: wildcard }, required: (params.required ?? []).map((r) => (r === '*' ? name : r)) };
        }
      }
      // A required If-Match is documented as required; validation leaves it optional so that its absence is a 428, not a 400.
      if (s.headers && isIfMatchRequired(s.headers)) s.headers = { ...s.headers, required: [...(s.headers.required ?? []), 'if-match'] };
      // Carried to finishDocument, which has the built requestBody (the generator marks every body required).
      if (s.body && (route.config as { optionalBody?: boolean } | undefined)?.optionalBody) s['x-optional-body'] = true;
      if (s.body) s.body = s.body.content ? { ...s.body, content: mapContent(s.body.content, (x) => nameShapes(x, shapes)) } : nameShapes(s.body, shapes);
      const response = withSuccessHeaders(nameAnswers(s.response ?? {}, shapes), s);
      for (const [status, description] of problems) {
        response[status] = status === 429 ? { description, content: PROBLEM_CONTENT, headers: { 'retry-after': RETRY_AFTER_HEADER } } : { description, content: PROBLEM_CONTENT };
      }
      response.default = { description: 'any other problem (500, 503)', content: PROBLEM_CONTENT };
      s.response = response;
      for (const key of ['problems', 'etag', 'location']) delete s[key];
      return { schema: s as any, url: path.slice(API_PREFIX.length) || '/' };
    },
    transformObject: (documents) => finishDocument('openapiObject' in documents ? documents.openapiObject : documents.swaggerObject, opts.examples) as any,
  });
}

/**
 * What the contract promises beyond its operations: how a team's derived `state` moves, and how
 * the API changes over time. Served in the document's description, so clients read it where they
 * read the rest.
 */
export const CONTRACT_POLICY = [
  '## Team state',
  'A team\'s `state` is derived, never set: `archived` once it is archived (final); otherwise `running` while one of its runs is in progress, ' +
    'else `waiting` while a run waits for a person (an open question or confirmation), else `sleeping` when every sandbox placed for it is asleep, else `idle`. ' +
    'A task moves an `idle` or `sleeping` team to `running`; a question moves it to `waiting` and the answer back to `running`; ' +
    'when its last open run ends it is `idle`, and `sleeping` once its idle sandboxes have gone to sleep (after the team\'s idle_after_seconds, or earlier when a host needs the room). ' +
    'A run waiting for room on a sandbox host is in progress: its team is `running`.',
  '',
  '## Compatibility and deprecation',
  'Within `/api/v1` changes are additive: new operations, new optional request fields, new fields in answers, new values of open lists (post kinds, audit actions, problem types). ' +
    'Clients ignore fields they do not know and must not rely on the order of object fields. A field, parameter or operation is never removed or given another meaning within v1: ' +
    'one to be retired is first marked `deprecated: true` here, with what replaces it in its description, and keeps working for at least two minor releases (and at least 90 days) after that. ' +
    'A change that is not additive gets a new prefix (`/api/v2`), served beside v1 for the same period. ' +
    'Operations documented as extensions of this deployment (such as `GET /audit` and `GET /hosts`) follow the same rules.',
].join('\n');

/** The answer of GET /openapi.json: an OpenAPI 3.1 document (only its top level is described). */
export const OpenApiDocument = Type.Object(
  {
    openapi: Type.String(),
    info: Type.Object({ title: Type.String(), version: Type.String() }, { additionalProperties: true }),
    paths: Type.Record(Type.String(), Type.Unknown()),
  },
  { additionalProperties: true, description: 'an OpenAPI 3.1 document' },
);

/** The answer of GET /openapi.yaml: the same document as YAML text. */
export const OpenApiYaml = { content: { 'application/yaml': { schema: Type.String({ description: 'an OpenAPI 3.1 document as YAML' }) } } };
