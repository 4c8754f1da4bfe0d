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

/** Log lines held for a destination that does not take them; beyond this, new lines are dropped. */
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;
/** A destination that has taken nothing for this long is stuck (long enough that a reader starved of CPU on a busy machine is not taken for one). */
const STUCK_AFTER_MS = 5000;

/**
 * Standard output, written behind the callers (off the event loop), so that a log reader that
 * stopped reading cannot hold the process: lines wait in memory up to a bound, then are
 * dropped. At exit, pino writes what is left synchronously, which on a stuck destination would
 * wait forever (in the kernel, or in a retry loop on EAGAIN): when the destination has taken
 * nothing for STUCK_AFTER_MS, what is left is dropped instead, and the process ends; a slow
 * reader that keeps reading gets every line.
 */
export function stdoutDestination(): pino.DestinationStream {
  // Node opens its stdout on first use, and a pipe or socket it opens is made non-blocking: a
  // write to a reader that stopped reading then fails at once (EAGAIN), where otherwise it would
  // block a thread in the kernel for good, and the process could never exit (it joins its
  // threads at exit).
  const fd = process.stdout.fd;
  let atExit = false;
  // At exit: when the destination last took bytes, and how many were left then.
  let exitProgressAt = 0;
  let exitLeft = Infinity;
  const stream = pino.destination({
    dest: fd,
    sync: false,
    maxLength: MAX_BUFFERED_BYTES,
    // A full non-blocking pipe (EAGAIN) is retried later while running; at exit, as long as the
    // reader keeps taking lines, and given up once it has taken nothing for STUCK_AFTER_MS.
    retryEAGAIN: (_err: Error, writing: number, rest: number) => {
      if (!atExit) return true;
      if (writing + rest < exitLeft) {
        exitLeft = writing + rest;
        exitProgressAt = Date.now();
      }
      return Date.now() - exitProgressAt < STUCK_AFTER_MS;
    },
  }) as ReturnType<typeof pino.destination> & { _writing: boolean };
  // When the pending write started or last made progress.
  let progressAt = Date.now();
  stream.on('write', () => (progressAt = Date.now()));
  const write = stream.write.bind(stream);
  stream.write = (line: string) => {
    if (!stream._writing) progressAt = Date.now();
    return write(line);
  };
  // pino's flush(cb) answers at once when lines are written as they come (sonic-boom's
  // minLength 0), even with a write still on its way; at exit that write would be lost. Here
  // the callback waits until every line given so far is written (or the write fails).
  const flush = stream.flush.bind(stream);
  stream.flush = (cb?: (err?: Error) => void) => {
    if (!cb) return flush();
    const s = stream as typeof stream & { _len: number };
    if (!stream._writing && s._len === 0) {
      process.nextTick(cb);
      return;
    }
    const done = (err?: Error) => {
      stream.off('drain', onDrain);
      stream.off('error', done);
      cb(err);
    };
    const onDrain = () => done();
    stream.once('drain', onDrain);
    stream.once('error', done);
  };
  const flushSync = stream.flushSync.bind(stream);
  stream.flushSync = () => {
    // Nothing is said about lines dropped here: the log is where it would be said, and it is what is stuck.
    if (stream._writing && Date.now() - progressAt > STUCK_AFTER_MS) return;
    atExit = true;
    exitProgressAt = Date.now();
    exitLeft = Infinity;
    try {
      flushSync();
    } catch {
      // EAGAIN for STUCK_AFTER_MS: the destination stopped taking lines; see above.
    } finally {
      atExit = false;
    }
  };
  return stream;
}

/** The fields under which an error or its text is logged: each is passed through redactError. */
const ERROR_KEYS = ['err', 'error', 'cause', 'reason'] as const;

export function createLogger(opts: { level: string; destination?: pino.DestinationStream; name?: string }): Logger {
  const serializers: Record<string, (value: unknown) => unknown> = {};
  for (const key of ERROR_KEYS) serializers[key] = redactError;
  return pino(
    {
      level: opts.level,
      name: opts.name ?? 'crewhouse',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination ?? stdoutDestination(),
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

const CENSOR = '[redacted]';
/** A file's path: from the root or here, each part short (a token's characters run long between its slashes, if any). */
const PATH = /^\.?(?:\/[\w.~-]{1,23})+\/?$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Where a credential shows in text an outside service wrote: each replaced, in order. */
const TEXT_RULES: Array<[RegExp, string | ((...m: string[]) => string)]> = [
  // An Authorization (or Proxy-Authorization) header as text or JSON, whatever its scheme.
  [/((?:proxy-)?authorization["']?\s*[:=]\s*["']?)[^"'\r\n,}]+/gi, `$1${CENSOR}`],
  // A scheme and its credential anywhere else.
  [/\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}/gi, `$1$2${CENSOR}`],
  // A credential-named field as JSON (`"access_token":"..."`) or as a form or header (`token=...`, `x-api-key: ...`).
  [/(["']?)([\w-]*(?:token|key|secret|passw|pwd|credential|session|cookie|jwt)[\w-]*)\1(\s*[:=]\s*)(["']?)[^"'\s&,;}]+/gi, (_m, q: string, name: string, sep: string, vq: string) => `${q}${name}${q}${sep}${vq}${CENSOR}`],
  // A URL's user and password.
  [/(\b[a-z][a-z0-9+.-]*:\/\/)[^/\s:@]+:[^/\s@]+@/gi, `$1${CENSOR}@`],
  // Known token shapes: Slack (xoxb-, xapp-), GitHub (ghp_, ghs_, github_pat_), Linear (lin_api_), GitLab (glpat-).
  [/\b(?:xox[abposre]|xapp)-[A-Za-z0-9-]+|\b(?:gh[pousr]_|github_pat_|lin_(?:api|oauth)_|glpat-)[A-Za-z0-9_-]+/g, CENSOR],
  // Anything else as long as a token, save an id (a UUID) and a file's path (a stack's lines).
  [/[A-Za-z0-9_\-.~+/=]{32,}/g, (m: string) => (UUID.test(m) || PATH.test(m) ? m : CENSOR)],
];

/**
 * Text an outside service or its SDK wrote (an exception's message, a body it quotes) with every
 * credential it may carry censored: an Authorization header, a scheme and its credential, a
 * credential-named field, a URL's password or credential-like query parameters, known token
 * shapes, and any run of characters as long as a token. The one redaction of free text: what is
 * logged as an error (see redactError) and what an error leaves where people read it.
 */
export function redactSecrets(text: string): string {
  let out = text;
  for (const [re, to] of TEXT_RULES) out = out.replace(re, to as string);
  return out.replace(/\bhttps?:\/\/[^\s"'<>]+/gi, (url) => redactUrl(url));
}

/**
 * A logged error (under err, error, cause or reason) as it may be written: an Error as pino
 * writes one (type, message, stack, its own fields), every text in it through redactSecrets, and
 * every field named like a credential (an SDK's request headers, say) censored whole.
 */
export function redactError(value: unknown): unknown {
  const seen = new WeakSet<object>();
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === 'string') return redactSecrets(v);
    if (!v || typeof v !== 'object') return v;
    if (seen.has(v) || depth > 6) return '[not shown]';
    seen.add(v);
    if (v instanceof Error) v = pino.stdSerializers.err(v);
    if (Array.isArray(v)) return v.slice(0, 50).map((x) => walk(x, depth + 1));
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) out[k] = CREDENTIAL_NAME.test(k) && k !== 'code' ? CENSOR : walk(x, depth + 1);
    return out;
  };
  return walk(value, 0);
}

export type { Logger };

/**
 * The handler for an error a caller goes on after on purpose (cleanup that may find nothing to
 * clean, a best-effort step a later one checks): it is logged with its cause, never lost silently.
 */
export function logIgnored(logger: Pick<Logger, 'warn'>, what: string, fields: Record<string, unknown> = {}) {
  return (err: unknown): void => {
    logger.warn({ ...fields, cause: err instanceof Error ? err.message : String(err) }, what);
  };
}

/**
 * Waits (at most `ms`) until the lines logged so far are written: what the service does before
 * it exits, so that a write still on its way at exit is not lost. A stuck destination gets `ms`.
 */
export function flushLogs(logger: Pick<Logger, 'flush'>, ms = STUCK_AFTER_MS): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    timer.unref();
    try {
      logger.flush(() => {
        clearTimeout(timer);
        resolve();
      });
    } catch {
      clearTimeout(timer);
      resolve();
    }
  });
}
