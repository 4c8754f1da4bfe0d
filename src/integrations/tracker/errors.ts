import type { SaidForPeople } from '../../errors/problems.ts';
import { redactSecrets } from '../../logger.ts';

/**
 * A call to an issue tracker that failed: `message` is one line for people, without secrets;
 * `status` is the tracker's HTTP status (0 when it could not be reached).
 */
export class TrackerError extends Error implements SaidForPeople {
  override name = 'TrackerError';
  readonly forPeople = true;
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.status = status;
  }
  /** Worth trying again later: unreachable, rate-limited or a server error. */
  get transient(): boolean {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }
}

/** The codes and names along an error's causes (`cause`, an SDK's `raw`), outermost first. */
function codesOf(err: unknown): string[] {
  const out: string[] = [];
  let e = err;
  for (let depth = 0; depth < 5 && e && typeof e === 'object'; depth++) {
    const x = e as { code?: unknown; name?: unknown; cause?: unknown; raw?: unknown };
    if (typeof x.code === 'string') out.push(x.code);
    if (typeof x.name === 'string') out.push(x.name);
    e = x.cause ?? x.raw;
  }
  return out;
}

/**
 * Why a call got no answer from the tracker it could use, in words, from the error's codes: a
 * refused or closed connection, an unknown host, no answer in time, a certificate not accepted, a
 * body that is not JSON. Never the exception's own text: an SDK's message may quote a response
 * body or an address, and a detail must not carry what a secret may hide in.
 */
export function transportReason(err: unknown, title: string, what: string): TrackerError {
  const codes = codesOf(err);
  const has = (...names: string[]) => codes.some((c) => names.includes(c));
  const next = 'check the setting api_url and that the service is up, then try again';
  if (has('SyntaxError')) return new TrackerError(`${title} answered something that is not JSON while ${what}: is api_url the API's address?`, 502);
  let why = 'the call failed before an answer came';
  if (has('ECONNREFUSED')) why = 'the connection was refused';
  else if (has('ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME')) why = 'its host name could not be resolved';
  else if (has('ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ECONNABORTED', 'ERR_STREAM_PREMATURE_CLOSE')) why = 'the connection was closed before an answer came';
  else if (has('ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'TimeoutError', 'AbortError')) why = 'no answer came in time';
  else if (codes.some((c) => /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS|ERR_SSL/.test(c))) why = 'its TLS certificate was not accepted';
  else if (has('ERR_INVALID_URL')) why = 'api_url is not a valid address';
  return new TrackerError(`${title} could not be reached while ${what}: ${why}; ${next}`, 0);
}

/**
 * What a tracker itself said about a failure (an error message of its API), as one clipped line
 * without addresses or anything that looks like a token, for a detail.
 */
export function saidLine(said: string): string {
  return redactSecrets(said.replace(/https?:\/\/\S+/gi, '(an address)'))
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 200);
}
