import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { isEmbedded, type Db } from '../db/database.ts';
import { healthRoutes } from '../http/health.ts';
import { createServer, type App } from '../http/kernel.ts';
import { localHandlers } from '../http/local-handlers.ts';
import { Registry } from '../metrics.ts';
import type { ModelCatalog } from '../models/catalog.ts';
import type { SecretsService } from '../secrets/secrets.service.ts';
import { ttlCache } from '../ttl-cache.ts';
import { adminRoutes } from './admin.routes.ts';
import { serviceCredential } from './credential.ts';
import { useProxyErrors } from './errors.ts';
import { createDatabaseAdmission } from './admission/database.ts';
import { embeddedLedger } from './admission/ledger.ts';
import { createModelProxyService } from './modelproxy.service.ts';
import { proxyRoutes } from './proxy.routes.ts';

/** Upstream keys are read from the secret store at most this often per name; a rotated key is used within this time. */
const CREDENTIAL_TTL_MS = 30_000;
const RESERVATION_TTL_SECONDS = 30 * 60;
const UPSTREAM_IDLE_TIMEOUT_MS = 10 * 60_000;
const SWEEP_EVERY_MS = 30_000;

export interface ModelProxyDeps {
  config: Config;
  db: Db;
  logger: Logger;
  metrics?: Registry;
  catalog: ModelCatalog;
  /** Reads an upstream credential by secret name (`cachedReveal` of the secret store, or a test's own). */
  credential: (secretName: string) => Promise<string | null>;
  /** How often expired reservations are released (ms; 0: never). */
  sweepEveryMs?: number;
}

/**
 * Reads upstream keys from the secret store at most every CREDENTIAL_TTL_MS per name; a key in
 * use is read again in the background in that time's last quarter, off the requests' way.
 */
export function cachedReveal(secrets: Pick<SecretsService, 'reveal'>): (secretName: string) => Promise<string | null> {
  const cache = ttlCache<string | null>(CREDENTIAL_TTL_MS, { refreshWithinMs: CREDENTIAL_TTL_MS / 4 });
  return (name) => cache(name, () => secrets.reveal(name));
}

/** The model proxy's server: the OpenAI-compatible front, the admin API, health. Not listening yet. */
export async function buildModelProxyApp(deps: ModelProxyDeps): Promise<App> {
  const { config, db } = deps;
  const metrics = deps.metrics ?? new Registry();
  const { catalog, credential: reveal } = deps;
  // The cipher was loaded before (src/services.ts), so a key file created on this first start is there to derive from.
  const credential = serviceCredential(config);

  // No log line per answered request: each one is a line of the request log (mp_request_log),
  // with its status and latency, and writing both cost a request's logger and a serialised line.
  const app = createServer({
    logger: deps.logger,
    metrics,
    bodyLimit: Math.max(config.bodyLimit, 32 * 1024 * 1024),
    trustProxy: config.trustProxy,
    component: 'modelproxy',
    requestLines: false,
  });
  useProxyErrors(app);
  app.removeContentTypeParser('text/plain');
  // `lost`: settlements or log lines that could not be kept (0 for a failed reread of limits, retried later).
  const onWriteError = (err: unknown, lost: number) => app.log.error({ err, lost }, 'admission could not write settlements or reread limits');
  // The embedded database has one process by construction: admit from memory there. On
  // PostgreSQL other proxies may share the rows, so admission stays in the database.
  let admission;
  if (isEmbedded(db)) {
    const ledger = embeddedLedger(db, onWriteError);
    await ledger.ready;
    admission = ledger;
  } else {
    admission = createDatabaseAdmission(db, onWriteError);
  }
  proxyRoutes(app, { db, admission, catalog, credential: reveal, reservationTtlSeconds: RESERVATION_TTL_SECONDS, upstreamIdleTimeoutMs: UPSTREAM_IDLE_TIMEOUT_MS });
  adminRoutes(app, { service: createModelProxyService({ db, catalog, admission }), credential });
  healthRoutes(app, { db, metrics });

  // Reservations of a process that died mid-request are released by whichever proxy sweeps first.
  const sweepEvery = deps.sweepEveryMs ?? SWEEP_EVERY_MS;
  if (sweepEvery > 0) {
    const sweeper = setInterval(() => {
      admission.releaseExpired().catch((err) => app.log.warn({ err }, 'releasing expired reservations failed'));
    }, sweepEvery);
    sweeper.unref();
    app.addHook('onClose', async () => clearInterval(sweeper));
  }
  return app;
}

export interface RunningModelProxy {
  app: App;
  /** Base URL, e.g. http://127.0.0.1:8081 (OpenAI clients use `${url}/v1`). */
  url: string;
  stop(): Promise<void>;
}

/** Builds the proxy and listens (port 0 picks a free one). Used by the component, the test harness and the bench. */
export async function startModelProxy(deps: ModelProxyDeps & { port?: number; host?: string }): Promise<RunningModelProxy> {
  const app = await buildModelProxyApp(deps);
  const host = deps.host ?? deps.config.host;
  await app.listen({ port: deps.port ?? deps.config.modelProxyPort, host });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : deps.config.modelProxyPort;
  const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  const url = `http://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${port}`;
  // A gateway in this process reaching this address hands its model requests to the app directly.
  const unregister = localHandlers.add(url, (req, res) => app.routing(req, res));
  return {
    app,
    url,
    stop: async () => {
      unregister();
      await app.close();
    },
  };
}
