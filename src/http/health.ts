import { ping, type Db } from '../db/database.ts';
import type { App } from './kernel.ts';
import type { Registry } from '../metrics.ts';

/** /healthz (the process answers), /readyz (the database answers), /metrics (Prometheus text). */
export function healthRoutes(app: App, deps: { db: Db; metrics: Registry }) {
  app.get('/healthz', { config: { auth: { public: true } }, schema: { hide: true } as any }, async () => ({ status: 'ok' }));
  app.get('/readyz', { config: { auth: { public: true } }, schema: { hide: true } as any }, async (_req, reply) => {
    const ok = await ping(deps.db);
    return reply.status(ok ? 200 : 503).send({ status: ok ? 'ready' : 'database unavailable' });
  });
  app.get('/metrics', { config: { auth: { public: true } }, schema: { hide: true } as any }, async (_req, reply) =>
    reply.type('text/plain; version=0.0.4').send(deps.metrics.render()),
  );
}
