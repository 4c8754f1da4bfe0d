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

export function createLogger(opts: { level: string; destination?: pino.DestinationStream; name?: string }): Logger {
  return pino(
    {
      level: opts.level,
      name: opts.name ?? 'crewhouse',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
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
