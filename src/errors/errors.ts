/**
 * The one classification of errors every component shares. A service or the database layer
 * throws a DomainError (or lets a database error through); each component renders it in its own
 * wire format (the console as problem+json, the chat server as Zulip's `{result, msg, code}`,
 * the model proxy as OpenAI's error object), with the status that travels on the error.
 */

/** The closed set of codes, each with its HTTP status. */
export const ERROR_STATUS = {
  /** The request conflicts with what is stored: a name taken, a row in use or gone. */
  conflict: 409,
  /** A concurrent write got there first (serialization failure, deadlock): read again and retry. */
  concurrent_write: 409,
  /** A value the database cannot take: malformed, out of range, a NUL character. */
  invalid_value: 400,
  /** A value breaks a rule the schema enforces (not null, check). */
  rule_broken: 422,
  /** A value is larger than can be stored. */
  too_large: 400,
  /** The database gave up on the statement (statement timeout) or is busy: retry later. */
  timeout: 503,
  /** The database cannot be reached or is shutting down. */
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class DomainError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Seconds after which a retry may succeed, when the error is temporary. */
  readonly retryAfter: number | null;
  constructor(code: ErrorCode, message: string, opts: { cause?: unknown; retryAfter?: number } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'DomainError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.retryAfter = opts.retryAfter ?? null;
  }
}

export const domainErrors = {
  conflict: (message = 'a resource with that name already exists', cause?: unknown) => new DomainError('conflict', message, { cause }),
  inUse: (cause?: unknown) => new DomainError('conflict', 'the resource is in use or refers to something that does not exist', { cause }),
  concurrentWrite: (cause?: unknown) => new DomainError('concurrent_write', 'a concurrent write got there first; read again and retry', { cause, retryAfter: 1 }),
  invalidValue: (cause?: unknown) => new DomainError('invalid_value', 'a value is out of range or malformed', { cause }),
  ruleBroken: (cause?: unknown) => new DomainError('rule_broken', 'a value breaks a rule of what can be stored (a required value is missing or one is out of bounds)', { cause }),
  tooLarge: (cause?: unknown) => new DomainError('too_large', 'a value is too large to store', { cause }),
  timeout: (cause?: unknown) => new DomainError('timeout', 'the database took too long to answer; retry in a moment', { cause, retryAfter: 5 }),
  unavailable: (cause?: unknown) => new DomainError('unavailable', 'the database is not available; retry in a moment', { cause, retryAfter: 5 }),
};

/** The SQLSTATE of a database error: pg and PGlite both carry it as `code`. */
function sqlState(err: unknown): string | null {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : null;
}

/**
 * Maps a database error to a domain error, once for every component; null when it is not one
 * the caller or the moment is responsible for (a bug of ours: a 500).
 */
export function fromDatabase(err: unknown): DomainError | null {
  const state = sqlState(err);
  if (state === null) return null;
  switch (state) {
    case '23505': // unique_violation
    case '23P01': // exclusion_violation
      return domainErrors.conflict(undefined, err);
    case '23503': // foreign_key_violation
    case '23001': // restrict_violation
      return domainErrors.inUse(err);
    case '23502': // not_null_violation
    case '23514': // check_violation
      return domainErrors.ruleBroken(err);
    case '40001': // serialization_failure
    case '40P01': // deadlock_detected
      return domainErrors.concurrentWrite(err);
    case '54000': // program_limit_exceeded (a value too large for an index row, a jsonb too deep)
    case '54001': // statement_too_complex
      return domainErrors.tooLarge(err);
    case '57014': // query_canceled: the statement timeout
    case '55P03': // lock_not_available: the lock timeout
      return domainErrors.timeout(err);
    case '57P01': // admin_shutdown
    case '57P02': // crash_shutdown
    case '57P03': // cannot_connect_now
      return domainErrors.unavailable(err);
  }
  switch (state.slice(0, 2)) {
    case '22': // data exception: a NUL character, a number out of range, malformed text for a typed column
      return domainErrors.invalidValue(err);
    case '08': // connection exception
    case '53': // insufficient resources (too many connections, disk full)
      return domainErrors.unavailable(err);
  }
  return null;
}

/**
 * A domain error as it is, a database error classified, anything else null. One that is the
 * moment's fault (a timeout, the database away) is logged with its cause: the caller is told
 * only to retry.
 */
export function toDomainError(err: unknown, log?: { warn(obj: object, msg: string): void }): DomainError | null {
  const domain = err instanceof DomainError ? err : fromDatabase(err);
  if (domain && domain.status >= 500) log?.warn({ err }, `answered ${domain.status}: ${domain.message}`);
  return domain;
}
