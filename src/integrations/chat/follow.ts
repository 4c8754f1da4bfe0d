import type { Logger } from 'pino';

/**
 * A chat surface's listener kept in step with its settings, the same for every adapter: while
 * `wanted` answers a configuration (its `fingerprint` a hash of what the listener depends on:
 * the server's URL, the tokens), one listener runs; a change of fingerprint stops it and starts
 * another, none stops it. Checked at once, every `everyMs` (15 s by default) and on `refresh`.
 * A listener whose start fails (`ready` rejects: a token refused) is stopped and tried again at
 * the next check.
 */

export interface FollowedListener {
  /** Resolves once connected (or retrying by itself); rejects when it cannot start at all. */
  ready: Promise<unknown>;
  stop(): void | Promise<void>;
}

export interface FollowOptions {
  /** The surface, for the log (`chat_a`, `chat_b`). */
  what: string;
  logger: Logger;
  /** The listener's configuration now, or null when it must not run (not enabled, not configured). */
  wanted(): Promise<{ fingerprint: string; start(): FollowedListener } | null>;
  everyMs?: number;
}

export function followSettings(opts: FollowOptions) {
  const log = opts.logger.child({ component: `${opts.what}.inbound` });
  let current: { fingerprint: string; listener: FollowedListener } | null = null;
  let stopped = false;
  let pending: Promise<void> = Promise.resolve();

  async function apply(): Promise<void> {
    const want = await opts.wanted();
    if (stopped || (want?.fingerprint ?? null) === (current?.fingerprint ?? null)) return;
    await current?.listener.stop();
    current = null;
    if (!want) return;
    const listener = want.start();
    current = { fingerprint: want.fingerprint, listener };
    try {
      await listener.ready;
    } catch (err) {
      log.warn({ reason: err instanceof Error ? err.message : String(err) }, `the ${opts.what} listener could not start: it is tried again when the settings are checked next`);
      current = null;
      await Promise.resolve(listener.stop()).catch((e: unknown) => log.warn({ reason: e instanceof Error ? e.message : String(e) }, `the ${opts.what} listener did not stop cleanly`));
    }
  }

  const refresh = () => (pending = pending.then(apply).catch((err) => log.error({ err }, `the ${opts.what} listener could not follow its settings`)));
  const timer = setInterval(() => void refresh(), opts.everyMs ?? 15_000);
  timer.unref();
  void refresh();

  return {
    /** Follows the settings now; resolves once the listener is (re)started or stopped. */
    refresh,
    /** Whether a listener is running. */
    get listening() {
      return current !== null;
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await pending;
      await current?.listener.stop();
      current = null;
    },
  };
}

export type FollowedSettings = ReturnType<typeof followSettings>;
