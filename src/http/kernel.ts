import crypto from 'node:crypto';
import type { Socket } from 'node:net';
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions, type onSendHookHandler } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Bindings, ChildLoggerOptions, LogFn, Logger } from 'pino';
import { redactUrl } from '../logger.ts';
import type { Registry } from '../metrics.ts';
import { serializerCompiler } from './serializer.ts';
import { validatorCompiler } from './validation.ts';

export type App = FastifyInstance<any, any, any, Logger, TypeBoxTypeProvider>;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * A Fastify server with what every component shares: request ids (taken from
 * X-Request-Id when sane), JSON logs with credentials redacted, strict validation,
 * and request metrics. Each component adds its own error format and routes.
 */
export function createServer(opts: {
  logger: Logger;
  metrics?: Registry;
  bodyLimit?: number;
  trustProxy?: boolean;
  component: string;
  /** A log line per answered request at info (default true); errors are logged whatever this says. */
  requestLines?: boolean;
  extra?: Partial<FastifyServerOptions>;
}): App {
  const app = Fastify({
    loggerInstance: opts.logger.child({ component: opts.component }),
    bodyLimit: opts.bodyLimit ?? 1024 * 1024,
    trustProxy: opts.trustProxy ?? false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : crypto.randomUUID();
    },
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: requestLogger as unknown as FastifyServerOptions['childLoggerFactory'],
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 1000 },
    ...opts.extra,
  }).withTypeProvider<TypeBoxTypeProvider>() as unknown as App;

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  // On close, requests in flight may finish and idle keep-alive connections are closed
  // (forceCloseConnections: 'idle'), but only those idle at that moment: a connection whose
  // request finishes later, or one that has not sent a byte yet (it counts as waiting for its
  // request; fetch opens such connections ahead of need), would hold the close for the
  // keep-alive timeout (72 s). So silent ones are closed, and idle ones as they become idle.
  const sockets = new Set<Socket>();
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  let reaper: NodeJS.Timeout | undefined;
  app.addHook('preClose', (done) => {
    for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
    reaper = setInterval(() => app.server.closeIdleConnections(), 100).unref();
    done();
  });
  app.addHook('onClose', (_instance, done) => {
    clearInterval(reaper);
    done();
  });

  // What each path is served with, for the 405 of a known path called with another method.
  const served: Array<{ method: string; path: RegExp }> = [];
  servedBy.set(app, served);
  app.addHook('onRoute', (route) => {
    // A catch-all at the root (the web console's page) answers any path: it says nothing of what a path takes.
    if (route.url === '/*') return;
    const path = routePattern(route.url);
    const methods = [route.method].flat();
    for (const method of methods) served.push({ method, path });
    // Only PUT routes carry it: no other request pays for a hook.
    if (methods.includes('PUT')) route.onSend = [...[route.onSend ?? []].flat(), locateCreated];
  });

  const requestLines = opts.requestLines ?? true;
  const requests = opts.metrics?.counter(`${opts.component}_http_requests_total`, 'HTTP requests by method, route and status');
  const durations = opts.metrics?.histogram(`${opts.component}_http_request_duration_seconds`, 'HTTP request duration by method and route');
  // The series of each method, route and status, found once: their label keys are made once.
  const series = new Map<string, { count: () => void; observe: (seconds: number) => void }>();
  const seriesOf = (method: string, route: string, status: number) => {
    const name = `${method} ${status} ${route}`;
    let found = series.get(name);
    if (!found) {
      const count = requests?.seriesOf({ method, route, status: String(status) });
      const observe = durations?.seriesOf({ method, route });
      series.set(name, (found = { count: () => count?.(), observe: (seconds) => observe?.(seconds) }));
    }
    return found;
  };

  // Hooks that do not wait take a callback: an async one costs a promise and its turns per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const status = reply.statusCode;
    const ms = reply.elapsedTime;
    const { count, observe } = seriesOf(request.method, route, status);
    count();
    observe(ms / 1000);
    if (status >= 500) request.log.error({ method: request.method, url: redactUrl(request.url), status, ms: Math.round(ms) }, 'request failed');
    else if (requestLines && (request.log as Logger).isLevelEnabled('info')) request.log.info({ method: request.method, url: redactUrl(request.url), status, ms: Math.round(ms) }, 'request');
    done();
  });
  return app;
}

/**
 * A 201 says where what it made is (RFC 9110, Location). A PUT that creates makes its own target,
 * so its Location is the request's path, set here once for every PUT route (see createServer); a
 * POST, or a PUT that makes something elsewhere (a team's link), sets its own before it answers.
 */
const locateCreated: onSendHookHandler = (request, reply, payload, done) => {
  if (reply.statusCode === 201 && !reply.hasHeader('location')) reply.header('location', request.url.split('?')[0]);
  done(null, payload);
};

const servedBy = new WeakMap<object, Array<{ method: string; path: RegExp }>>();

/** A route's path (`/teams/:name/links/:surface/*`) as a pattern of request paths, each parameter a named group. */
function routePattern(url: string): RegExp {
  const segments = url.split('/').map((s) => (s === '*' ? '.*' : s.startsWith(':') ? `(?<${s.slice(1)}>[^/]+)` : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  return new RegExp(`^${segments.join('/')}/?$`);
}

/**
 * The methods a request path is served with on this server (HEAD with GET), GET first, or none
 * when no route serves it: a request with another method is a 405 with these in its Allow header
 * (RFC 9110), not a 404. Every surface's not-found handler asks this. `accepts` may refuse a
 * route whose path parameters the request's values cannot be (a chat `*_id` that is not digits).
 */
export function methodsServing(app: App, url: string, accepts?: (params: Record<string, string>) => boolean): string[] {
  const path = url.split('?')[0];
  const methods = new Set<string>();
  for (const route of servedBy.get(app) ?? []) {
    const match = route.path.exec(path);
    if (match && (!accepts || accepts({ ...match.groups }))) methods.add(route.method);
  }
  if (methods.has('GET')) methods.add('HEAD');
  return [...methods].sort((a, b) => METHOD_ORDER.indexOf(a) - METHOD_ORDER.indexOf(b));
}

const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT'];

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
const CHILD = Symbol('child');
const BINDINGS = Symbol('bindings');
type LazyLogger = Logger & { [CHILD]: Logger | undefined; [BINDINGS]: Bindings };
const lazyPrototypes = new WeakMap<Logger, object>();

/**
 * A request's logger (Fastify's childLoggerFactory). Fastify makes a pino child per request to
 * carry its id, and making one (its bindings serialised, redaction set up) was a sizeable part
 * of a small request's time, while most requests write no line at the configured level. This
 * one makes that child when a line is first written at an enabled level (or a child or the
 * bindings are asked for); until then the rest is the server logger's, which it inherits.
 */
function requestLogger(parent: Logger, bindings: Bindings, opts: ChildLoggerOptions): Logger {
  if (opts.level !== undefined || opts.serializers !== undefined) return parent.child(bindings, opts);
  let proto = lazyPrototypes.get(parent);
  if (!proto) lazyPrototypes.set(parent, (proto = lazyPrototype(parent)));
  const logger = Object.create(proto) as LazyLogger;
  logger[CHILD] = undefined;
  logger[BINDINGS] = bindings;
  return logger;
}

function lazyPrototype(parent: Logger): object {
  const real = (self: LazyLogger) => (self[CHILD] ??= parent.child(self[BINDINGS]));
  const proto = Object.create(parent) as Record<string, unknown>;
  for (const level of LEVELS) {
    proto[level] = function (this: LazyLogger, ...args: Parameters<LogFn>) {
      if (this[CHILD] !== undefined || parent.isLevelEnabled(level)) real(this)[level](...args);
    };
  }
  proto.child = function (this: LazyLogger, ...args: Parameters<Logger['child']>) {
    return real(this).child(...args);
  };
  proto.bindings = function (this: LazyLogger) {
    return real(this).bindings();
  };
  proto.isLevelEnabled = function (this: LazyLogger, level: string) {
    return (this[CHILD] ?? parent).isLevelEnabled(level);
  };
  Object.defineProperty(proto, 'level', {
    get(this: LazyLogger) {
      return (this[CHILD] ?? parent).level;
    },
    set(this: LazyLogger, level: string) {
      real(this).level = level;
    },
  });
  return proto;
}
