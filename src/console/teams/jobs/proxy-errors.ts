import { ModelProxyFailedError } from '../../../modelproxy/client.ts';
import { PermanentJobError } from '../../../queue/queue.ts';

/** The proxy answered that the key or team is not there: nothing left to do. */
export const isGone = (err: unknown) => err instanceof ModelProxyFailedError && err.upstreamStatus === 404;

/**
 * A refusal of the proxy that asking again cannot change (a 4xx other than 404, 408, 429)
 * fails the job at once; an unavailable proxy or its 5xx is retried.
 */
export function permanentIfRefused(err: unknown): never {
  if (err instanceof ModelProxyFailedError && err.upstreamStatus >= 400 && err.upstreamStatus < 500 && ![404, 408, 429].includes(err.upstreamStatus)) {
    throw new PermanentJobError(err.message);
  }
  throw err;
}
