// `crewhouse serve` supervises its service process: a child killed with SIGKILL comes back and
// answers /healthz again, SIGTERM stops both cleanly, and a service that dies while starting is
// not started for ever. Real processes: `node src/main.ts serve` against a temporary
// SERVICE_DATA_DIR (or a fresh schema on the test PostgreSQL).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { servicePlace, type ServicePlace } from './harness.ts';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const NODE = path.join(root, 'node_modules', '.bin', 'node');
const MAIN = path.join(root, 'src', 'main.ts');

async function poll<T>(what: string, probe: () => Promise<T | null | undefined | false> | T | null | undefined | false, ms = 120_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

interface Supervised {
  child: ChildProcess;
  /** Every JSON log line so far. */
  lines(): Array<Record<string, any>>;
  output(): string;
  exited: Promise<number | null>;
}

function start(env: Record<string, string>, args = ['serve', '--only', 'console']): Supervised {
  const child = spawn(NODE, [MAIN, ...args], { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env }, cwd: root });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return {
    child,
    output: () => out,
    lines: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => {
          try {
            return JSON.parse(l) as Record<string, any>;
          } catch {
            return {};
          }
        }),
    exited,
  };
}

describe('crewhouse serve supervises its service process', { concurrency: false }, () => {
  let place: ServicePlace;
  const env: Record<string, string> = {};

  before(async () => {
    place = await servicePlace('sup');
    Object.assign(env, place.env);
  });

  after(() => place.drop());

  /** The console's address in the newest start of the service, once it answers /healthz, and the pid of that service process. */
  async function upAgain(s: Supervised, notPid: number | null): Promise<{ pid: number; url: string }> {
    return poll('the service to answer /healthz', async () => {
      const lines = s.lines();
      const started = lines.filter((l) => l.msg === 'service process started').at(-1);
      const ready = lines.filter((l) => l.msg === 'service process is up').at(-1);
      const address = lines.filter((l) => l.msg === 'component started' && l.component === 'console').at(-1)?.address;
      if (!started || started.service_pid === notPid || ready?.service_pid !== started.service_pid || !address) return null;
      const res = await fetch(`${address}/healthz`).catch(() => null);
      return res?.status === 200 ? { pid: started.service_pid as number, url: address as string } : null;
    });
  }

  test('a service process killed with SIGKILL is started again and answers; SIGTERM stops both', async () => {
    const s = start(env);
    try {
      const first = await upAgain(s, null);
      assert.notEqual(first.pid, s.child.pid, 'the service runs in a child of the supervisor');
      process.kill(first.pid, 'SIGKILL');
      const second = await upAgain(s, first.pid);
      assert.ok(!alive(first.pid));
      const why = s.lines().find((l) => l.component === 'supervisor' && l.service_pid === first.pid && l.level === 50);
      assert.match(why?.msg ?? '', /^the service process died \(killed by SIGKILL\); starting it again in 1 s$/, s.output());

      s.child.kill('SIGTERM');
      assert.equal(await s.exited, 0, s.output());
      await poll('the service process to be gone', () => !alive(second.pid), 30_000);
      assert.ok(s.lines().some((l) => l.msg === 'shutting down' && l.signal === 'SIGTERM'), 'the service was stopped cleanly, not killed');
    } finally {
      if (s.child.exitCode === null) s.child.kill('SIGKILL');
    }
  });

  test('a service that dies while starting is tried a few times, then the supervisor gives up and says what to do', async () => {
    // A database nobody answers at: every start dies before the service is up.
    const s = start({ ...env, SERVICE_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
    try {
      assert.equal(await s.exited, 1, s.output());
      const lines = s.lines().filter((l) => l.component === 'supervisor');
      assert.equal(lines.filter((l) => l.msg === 'service process started').length, 3, s.output());
      assert.match(lines.at(-1)!.msg, /^the service died while starting 3 times in a row; the errors above say why: fix the cause and start the service again$/);
    } finally {
      if (s.child.exitCode === null) s.child.kill('SIGKILL');
    }
  });

  test('--no-supervise runs the service in this process', async () => {
    const s = start(env, ['serve', '--only', 'console', '--no-supervise']);
    try {
      const address = await poll('the console to listen', () => s.lines().find((l) => l.msg === 'component started')?.address as string | undefined);
      assert.equal((await fetch(`${address}/healthz`)).status, 200);
      assert.ok(!s.lines().some((l) => l.component === 'supervisor'));
      s.child.kill('SIGTERM');
      assert.equal(await s.exited, 0, s.output());
    } finally {
      if (s.child.exitCode === null) s.child.kill('SIGKILL');
    }
  });
});
