import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';

const LOGGER = path.join(import.meta.dirname, 'logger.ts');

/** Starts a process that logs `lines` lines of `bytes` bytes through the service's logger, then (after `waitMs`) exits. */
function logAndExit(lines: number, bytes: number, waitMs = 0) {
  // Exits as the service does: the lines flushed (bounded), then process.exit.
  const script = `
    import { createLogger, flushLogs } from ${JSON.stringify(LOGGER)};
    const logger = createLogger({ level: 'info' });
    for (let i = 0; i < ${lines}; i++) logger.info({ i, pad: 'x'.repeat(${bytes}) }, 'line');
    setTimeout(() => flushLogs(logger).then(() => process.exit(0)), ${waitMs});
  `;
  // Not a test process itself: without the runner's NODE_TEST_CONTEXT, as the service runs.
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'], env });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // The process ended and its output was all read.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  return { child, exited, closed };
}

/** Resolves with the exit code, or null if the process is still there after `ms` (it is then killed). */
async function exitWithin(p: ReturnType<typeof logAndExit>, ms: number): Promise<number | null | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), ms)));
  const outcome = await Promise.race([p.exited, hung]);
  clearTimeout(timer);
  if (outcome === 'hung') {
    p.child.kill('SIGKILL');
    await p.exited;
  }
  return outcome;
}

test('a process whose log reader stopped reading still exits (the final flush is bounded)', async () => {
  // 8 MB of log lines into a pipe nobody reads: the pipe fills within the first 64 KB, and the
  // process exits 3 s later, when the pending write has made no progress for that long.
  const p = logAndExit(2000, 4000, 3000);
  p.child.stdout.pause();
  // Bounded generously for a loaded machine; without the bound the process never ends.
  const outcome = await exitWithin(p, 60_000);
  assert.notEqual(outcome, 'hung', 'the process was still waiting on its log destination after 60 s');
  assert.equal(outcome, 0);
});

test('with a reader, every line is written before the process exits', async () => {
  const p = logAndExit(3000, 100);
  let stdout = '';
  p.child.stdout.setEncoding('utf8');
  p.child.stdout.on('data', (chunk) => (stdout += chunk));
  const outcome = await exitWithin(p, 60_000);
  assert.equal(outcome, 0);
  await p.closed;
  const lines = stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.length, 3000);
  assert.equal(lines[2999].i, 2999);
});

test('a reader that pauses still gets every line: the flush before exit waits for the write on its way', async () => {
  // 8,000 lines of 1 KB (under the 16 MB held for a slow reader, far more than a pipe holds), so writes are still pending (or waiting
  // to retry a full pipe) when the process flushes and exits.
  const p = logAndExit(8000, 1000);
  let stdout = '';
  p.child.stdout.setEncoding('utf8');
  p.child.stdout.once('data', () => {
    p.child.stdout.pause();
    setTimeout(() => p.child.stdout.resume(), 300);
  });
  p.child.stdout.on('data', (chunk) => (stdout += chunk));
  const outcome = await exitWithin(p, 60_000);
  assert.equal(outcome, 0);
  await p.closed;
  const lines = stdout.trim().split('\n').map((l) => JSON.parse(l) as { i: number });
  assert.equal(lines.length, 8000);
  assert.deepEqual(
    lines.map((l) => l.i).filter((i, at) => i !== at),
    [],
    'every line once, in order',
  );
});

test('an error ignored on purpose is logged with its cause and the context given', async () => {
  const { logIgnored } = await import('./logger.ts');
  const lines: Array<{ obj: Record<string, unknown>; msg: string }> = [];
  const handler = logIgnored({ warn: (obj: Record<string, unknown>, msg: string) => void lines.push({ obj, msg }) } as never, 'could not remove a tap device', { device: 'chs-1' });
  await Promise.reject(new Error('Cannot find device "chs-1"')).catch(handler);
  handler('not an Error');
  assert.deepEqual(lines, [
    { obj: { device: 'chs-1', cause: 'Cannot find device "chs-1"' }, msg: 'could not remove a tap device' },
    { obj: { device: 'chs-1', cause: 'not an Error' }, msg: 'could not remove a tap device' },
  ]);
});
