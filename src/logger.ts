import pino, { type Logger } from 'pino';

/**
 * JSON logs. Credentials never reach a log line: these paths are censored wherever a
 * request, reply or error is logged, and code logs no bodies.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-console-csrf"]',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers.cookie',
  '*.password',
  '*.token',
  '*.value',
  '*.secret',
  '*.api_key',
  '*.setup_token',
  // The embedded database attaches a failed query's parameters to its errors.
  'err.params',
  'err.queryOptions',
];

export function createLogger(opts: { level: string; destination?: pino.DestinationStream; name?: string }): Logger {
  return pino(
    {
      level: opts.level,
      name: opts.name ?? 'crewhouse',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination,
  );
}

/** A URL for logs with credential-like query parameters censored. */
export function redactUrl(url: string): string {
  return url.replace(/([?&](?:token|key|api_key|secret|password|code)=)[^&#]*/gi, '$1[redacted]');
}

export type { Logger };
