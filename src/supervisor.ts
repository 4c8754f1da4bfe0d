/**
 * `crewhouse serve` keeps the service up: a small parent process (this one) runs the service as
 * a child process and starts it again when it dies (a bug that escaped every handler, running
 * out of memory, a kill), with backoff, logging why. The parent opens nothing of the service:
 * the embedded database belongs to one process, the child. SIGINT and SIGTERM are passed on for
 * a clean stop of both. A child that dies while starting is tried a few times, then the parent
 * gives up and says what to do, instead of starting a broken service for ever; a child that
 * exits 2 (a known start failure: bad configuration, a database held by another process, a
 * migration that failed) is not tried again at all.
 *
 * The child is `crewhouse serve --no-supervise` with an IPC channel to us: over it, the service
 * says `{type: 'ready'}` once its components are up, and it stops cleanly when the channel goes
 * (this parent was killed).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from 'pino';

export interface SupervisorOptions {
  /** The child's command line (this program, with `serve --no-supervise` and its options); it inherits our environment. */
  argv: string[];
  logger: Logger;
  /** First wait before starting a dead child again (ms); it doubles up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** A child up this long has its backoff start over (ms). */
  stableMs?: number;
  /** Starts in a row that die before the service is up, before the parent gives up. */
  startAttempts?: number;
  /** How long a child told to stop has before it is killed (ms). */
  stopGraceMs?: number;
}

/** What a child's end reads as in the log: its exit code or the signal that killed it. */
function howItEnded(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `killed by ${signal}` : `exit code ${code}`;
}

/** Runs the service as a child, restarting it when it dies; resolves with the exit code for this process. */
export function supervise(opts: SupervisorOptions): Promise<number> {
  const log = opts.logger.child({ component: 'supervisor' });
  const backoff0 = opts.backoffMs ?? 1000;
  const maxBackoff = opts.maxBackoffMs ?? 30_000;
  const stableMs = opts.stableMs ?? 60_000;
  const startAttempts = opts.startAttempts ?? 3;
  const graceMs = opts.stopGraceMs ?? 30_000;

  return new Promise<number>((resolve) => {
    let child: ChildProcess | null = null;
    let stopping: NodeJS.Signals | null = null;
    let backoff = backoff0;
    let failedStarts = 0;
    let restartTimer: NodeJS.Timeout | undefined;
    let killTimer: NodeJS.Timeout | undefined;

    const finish = (code: number) => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      clearTimeout(restartTimer);
      clearTimeout(killTimer);
      resolve(code);
    };

    function start() {
      restartTimer = undefined;
      const startedAt = Date.now();
      let up = false;
      // The child's own output goes where ours does; the channel tells us when it is up.
      const c = spawn(opts.argv[0], opts.argv.slice(1), { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      child = c;
      log.info({ service_pid: c.pid }, 'service process started');
      c.on('message', (m: unknown) => {
        if ((m as { type?: string } | null)?.type !== 'ready') return;
        up = true;
        failedStarts = 0;
        log.info({ service_pid: c.pid }, 'service process is up');
      });
      c.on('error', (err) => log.error({ err }, 'could not start the service process'));
      c.once('exit', (code, signal) => {
        child = null;
        if (stopping) {
          log.info({ service_pid: c.pid, how: howItEnded(code, signal) }, 'service process stopped');
          return finish(code === 0 ? 0 : 1);
        }
        if (!up && code === 2) {
          log.error({ service_pid: c.pid }, 'the service could not start (see the error above); fix it and start the service again');
          return finish(2);
        }
        if (!up && ++failedStarts >= startAttempts) {
          log.error({ service_pid: c.pid, how: howItEnded(code, signal), attempts: failedStarts }, `the service died while starting ${failedStarts} times in a row; the errors above say why: fix the cause and start the service again`);
          return finish(1);
        }
        if (Date.now() - startedAt >= stableMs) backoff = backoff0;
        const wait = backoff;
        backoff = Math.min(backoff * 2, maxBackoff);
        log.error({ service_pid: c.pid, how: howItEnded(code, signal), restart_in_ms: wait }, up ? `the service process died (${howItEnded(code, signal)}); starting it again in ${Math.round(wait / 100) / 10} s` : `the service process died while starting (${howItEnded(code, signal)}); trying again in ${Math.round(wait / 100) / 10} s`);
        restartTimer = setTimeout(start, wait);
      });
    }

    function onSignal(signal: NodeJS.Signals) {
      if (stopping) return;
      stopping = signal;
      log.info({ signal }, 'stopping the service');
      if (!child) return finish(0);
      child.kill(signal);
      const c = child;
      killTimer = setTimeout(() => {
        log.error({ service_pid: c.pid, grace_ms: graceMs }, 'the service process did not stop in time; killing it');
        c.kill('SIGKILL');
      }, graceMs);
    }

    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    start();
  });
}
