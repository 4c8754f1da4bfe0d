import swaggerUi from '@fastify/swagger-ui';
import type { App } from './kernel.ts';
import { API_PREFIX } from './openapi.ts';
import { CONSOLE_CSP } from './web.ts';

/** Where the interactive API documentation is served: outside the API, beside it. */
export const DOCS_PREFIX = '/api/docs';

/**
 * Interactive documentation of the served contract (Swagger UI, its files served from this
 * origin) at /api/docs. The page and its files are public and sent under the console's own
 * CSP; the contract it shows is read from /api/docs/json, which, like /api/v1/openapi.json,
 * needs a signed-in user (the browser session's cookie goes with it). "Try it out" calls the
 * API on this origin, with a token given under Authorize.
 */
export async function docsRoutes(app: App): Promise<void> {
  await app.register(async (docs) => {
    // The plugin's routes carry no auth rule of their own: the contract is a viewer's, the rest public.
    docs.addHook('onRoute', (route) => {
      const contract = /\/(json|yaml)$/.test(route.url);
      route.config = { ...(route.config as object), auth: contract ? { role: 'viewer' } : { public: true } } as typeof route.config;
    });
    docs.addHook('onSend', async (_req, reply) => {
      reply.header('content-security-policy', CONSOLE_CSP);
      reply.header('x-content-type-options', 'nosniff');
    });
    await docs.register(swaggerUi, {
      routePrefix: DOCS_PREFIX,
      uiConfig: { deepLinking: true, persistAuthorization: false, tryItOutEnabled: false, displayRequestDuration: true },
      // Requests from the page go to this origin's API whatever SERVICE_PUBLIC_BASE_URL says, as CSP's connect-src 'self' requires.
      transformSpecification: (doc: Record<string, any>) => ({ ...doc, servers: [{ url: API_PREFIX, description: 'this console' }] }),
      theme: { title: 'Crewhouse Console API' },
    });
  });
}
