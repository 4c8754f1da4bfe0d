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

/**
 * Query parameter names that carry credentials: any name holding one of these words (so
 * `access_token`, `refresh_token`, `x-api-key`, `client_secret`, `sig`, `code`, ...).
 */
const CREDENTIAL_NAME = /token|key|secret|passw|pwd|auth|credential|sig|session|cookie|csrf|jwt|bearer|^code$|ticket|otp|nonce/i;

function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return raw;
  }
}

/** A URL for logs with the value of every credential-like query parameter censored. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const hash = url.indexOf('#', q);
  const query = url.slice(q + 1, hash < 0 ? undefined : hash);
  const censored = query
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      if (eq < 0) return pair;
      return CREDENTIAL_NAME.test(decodedName(pair.slice(0, eq))) ? `${pair.slice(0, eq)}=[redacted]` : pair;
    })
    .join('&');
  return url.slice(0, q + 1) + censored + (hash < 0 ? '' : url.slice(hash));
}

export type { Logger };
