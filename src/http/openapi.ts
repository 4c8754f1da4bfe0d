import swagger from '@fastify/swagger';
import { Type } from 'typebox';
import type { App } from './kernel.ts';
import type { AuthRule } from './auth.ts';
import { ProblemSchema } from './schemas.ts';

export const API_PREFIX = '/api/v1';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The OpenAPI name of a route's trailing `*` parameter. */
    openapiWildcard?: string;
  }
}

/**
 * Registers OpenAPI 3.1 generation from the route schemas. Paths are relative to the
 * server URL `<public base>/api/v1`; each operation's security follows its auth rule, and
 * every operation documents the problem answer. Routes outside /api/v1 are not listed.
 */
export async function useOpenApi(app: App, opts: { publicBaseUrl: string; version: string }) {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Crewhouse Console API',
        version: opts.version,
        description:
          'Runs teams of coding agents in sandboxes. Errors are application/problem+json. Lists answer {items, next_cursor}; ' +
          'limit is 1 to 200 (default 50). Writes of existing resources need If-Match (428 missing, 412 stale). ' +
          'A request that does not match a schema answers 400 naming each field; one that matches but breaks a rule answers 422.',
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
      s.response = { ...(s.response ?? {}), default: { description: 'a problem (RFC 9457)', content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } } };
      return { schema: s as any, url: path.slice(API_PREFIX.length) || '/' };
    },
  });
}

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
