import crypto from 'node:crypto';
import type { Socket } from 'node:net';
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Logger } from 'pino';
import { redactUrl } from '../logger.ts';
import type { Registry } from './metrics.ts';
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
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 1000 },
    ...opts.extra,
  }).withTypeProvider<TypeBoxTypeProvider>() as unknown as App;

  app.setValidatorCompiler(validatorCompiler);

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

  const requests = opts.metrics?.counter(`${opts.component}_http_requests_total`, 'HTTP requests by method, route and status');
  const durations = opts.metrics?.histogram(`${opts.component}_http_request_duration_seconds`, 'HTTP request duration by method and route');

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const seconds = reply.elapsedTime / 1000;
    requests?.inc({ method: request.method, route, status: String(reply.statusCode) });
    durations?.observe({ method: request.method, route }, seconds);
    const line = { method: request.method, url: redactUrl(request.url), status: reply.statusCode, ms: Math.round(reply.elapsedTime) };
    if (reply.statusCode >= 500) request.log.error(line, 'request failed');
    else request.log.info(line, 'request');
  });
  return app;
}
