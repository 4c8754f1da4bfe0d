import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createLogger } from '../../../../logger.ts';
import { microvmSkipReason, randomLink, testImagesDir } from '../../../../../test/microvm-image.ts';
import { SandboxError, type SandboxProvider, type SandboxSpec } from '../../provider.ts';
import { createMicrovmProvider } from './index.ts';
import { accelerator, kvmUsable } from './kvm.ts';
import { waitFor } from '../../../../../test/harness.ts';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../..');
const logger = createLogger({ level: 'silent' });
// The VM tests use no database: they run in the embedded-database pass only, so CI boots them once.
const skip = process.env.SERVICE_TEST_DATABASE_URL ? 'no database involved; runs in the embedded-database pass' : microvmSkipReason();

async function collect(p: SandboxProvider, id: string, argv: string[], stdin?: string) {
  const h = await p.exec(id, { argv });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  h.stdout.on('data', (b: Buffer) => out.push(b));
  h.stderr.on('data', (b: Buffer) => err.push(b));
  h.stdin.end(stdin ?? '');
  const code = await h.exit;
  return { code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() };
}

function specFor(id: string): SandboxSpec {
  return { id, vcpus: 1, memoryMib: 256, diskGib: 1, image: 'crewhouse-test', env: { CREWHOUSE_TEST: 'yes' }, network: randomLink() };
}

const tapExists = (name: string) => fs.existsSync(`/sys/class/net/${name}`);

describe('microvm provider: refusals that need no VM', () => {
  test('a missing QEMU names the Debian package to install', async () => {
    const p = createMicrovmProvider({ dir: os.tmpdir(), imagesDir: os.tmpdir(), logger, snapshotBudgetBytes: 1, qemu: '/nonexistent/qemu-system-x86_64' });
    await assert.rejects(p.check(), (e: SandboxError) => e.code === 'unavailable' && /qemu-system-x86\b/.test(e.message));
  });

  test('KVM is probed by running a guest, and a fallback to TCG is logged once', async () => {
    assert.equal(await kvmUsable('/nonexistent/qemu-system-x86_64'), false);
    if (!fs.existsSync('/usr/bin/qemu-system-x86_64')) return;
    const lines: string[] = [];
    const captured = createLogger({ level: 'info', destination: { write: (l: string) => void lines.push(l) } });
    // A path of its own, so the decision is not one another test already cached.
    const qemu = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'mvm-q-')), 'qemu-system-x86_64');
    fs.symlinkSync('/usr/bin/qemu-system-x86_64', qemu);
    // One probe decides (a second probe of its own could answer otherwise on a loaded host, where
    // a vCPU that cannot run may abort only after the probe's round trips): asked again, the
    // answer is the same, and TCG is said once in the log.
    const first = await accelerator(qemu, captured);
    const second = await accelerator(qemu, captured);
    assert.ok(first === 'kvm' || first === 'tcg');
    assert.equal(second, first);
    assert.equal(lines.filter((l) => l.includes('using TCG')).length, first === 'tcg' ? 1 : 0);
    assert.equal(await accelerator(qemu, captured, 'tcg'), 'tcg');
    fs.rmSync(path.dirname(qemu), { recursive: true, force: true });
  });

  test('a spec whose values would reach a command line unchecked is refused before anything is made', async () => {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mvm-'));
    try {
      const p = createMicrovmProvider({ dir, imagesDir: dir, logger, snapshotBudgetBytes: 1 });
      const good = specFor('sbx-spec');
      for (const [bad, why] of [
        [{ ...good, network: { ...good.network, sandboxAddress: '10.0.0.2/30 init=/bin/sh' } }, /sandboxAddress/],
        [{ ...good, network: { ...good.network, hostInterface: 'eth0; reboot' } }, /interface/],
        [{ ...good, memoryMib: 0 }, /memoryMib/],
        [{ ...good, vcpus: 1.5 }, /vcpus/],
      ] as const) {
        await assert.rejects(p.create(bad as SandboxSpec), (e: SandboxError) => e.code === 'failed' && why.test(e.message));
      }
      assert.deepEqual(await p.list(), []);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  test('a sandbox that does not exist is not_found, whatever the verb', async () => {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mvm-'));
    try {
      const p = createMicrovmProvider({ dir, imagesDir: dir, logger, snapshotBudgetBytes: 1 });
      for (const call of [() => p.status('nope'), () => p.wake('nope'), () => p.sleep('nope', 'sleep'), () => p.exec('nope', { argv: ['true'] }), () => p.status('../etc')]) {
        await assert.rejects(call(), (e: SandboxError) => e.code === 'not_found');
      }
      assert.deepEqual(await p.list(), []);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('microvm provider under TCG', { skip: skip ?? false }, () => {
  let imagesDir: string;
  let dir: string;
  const cleanups: Array<() => Promise<void>> = [];

  before(async () => {
    imagesDir = await testImagesDir();
    dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mvm-'));
  });

  after(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
    await fsp.rm(dir, { recursive: true, force: true });
  });

  function provider(extra: Partial<Parameters<typeof createMicrovmProvider>[0]> = {}) {
    return createMicrovmProvider({ dir, imagesDir, logger, snapshotBudgetBytes: 8 * 1024 ** 3, accel: 'tcg', ...extra });
  }

  test("KVM is chosen only where it boots the sandboxes' kernel (a guest that runs its setup code and then hangs does not count)", async () => {
    const manifest = JSON.parse(await fsp.readFile(path.join(imagesDir, 'crewhouse-test-1.json'), 'utf8'));
    const kernel = path.join(imagesDir, manifest.kernel.file);
    const lines: string[] = [];
    const captured = createLogger({ level: 'info', destination: { write: (l: string) => void lines.push(l) } });
    // A path of its own, so the decision is not one another test already cached.
    const qemu = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'mvm-q-')), 'qemu-system-x86_64');
    fs.symlinkSync('/usr/bin/qemu-system-x86_64', qemu);
    cleanups.push(() => fsp.rm(path.dirname(qemu), { recursive: true, force: true }));
    const boots = await kvmUsable(qemu, kernel);
    assert.equal(await accelerator(qemu, captured, 'auto', kernel), boots ? 'kvm' : 'tcg');
    assert.equal(lines.filter((l) => l.includes('using TCG')).length, boots ? 0 : 1);
    if (!boots) return;
    // Where the probe says KVM, a sandbox under it boots and runs a command.
    const p = provider({ accel: 'kvm', qemu });
    const spec = specFor(`sbx-${crypto.randomBytes(4).toString('hex')}`);
    cleanups.push(() => p.destroy(spec.id));
    await p.create(spec);
    assert.match((await collect(p, spec.id, ['echo', 'under kvm'])).stdout, /under kvm/);
  });

  test('an image that is missing or corrupt fails create with a clear error and leaves nothing behind', async () => {
    const bad = await fsp.mkdtemp(path.join(os.tmpdir(), 'mvm-img-'));
    cleanups.push(() => fsp.rm(bad, { recursive: true, force: true }));
    const p = provider({ imagesDir: bad });
    const spec = specFor(`sbx-${crypto.randomBytes(4).toString('hex')}`);
    await assert.rejects(p.create(spec), (e: SandboxError) => e.code === 'image' && /images build/.test(e.message));
    const manifest = JSON.parse(await fsp.readFile(path.join(imagesDir, 'crewhouse-test-1.json'), 'utf8'));
    for (const part of ['kernel', 'initrd', 'rootfs']) await fsp.symlink(path.join(imagesDir, manifest[part].file), path.join(bad, manifest[part].file));
    manifest.rootfs.sha256 = '0'.repeat(64);
    await fsp.writeFile(path.join(bad, 'crewhouse-test-1.json'), JSON.stringify(manifest));
    await assert.rejects(p.create(spec), (e: SandboxError) => e.code === 'image' && /rootfs.*sha256/.test(e.message));
    assert.equal(fs.existsSync(path.join(dir, spec.id)), false);
    assert.equal(tapExists(spec.network.hostInterface), false);
  });

  test('boot, exec, network, sleep and wake with state intact, a snapshot used once, deep sleep, an unusable snapshot, host death, destroy', async () => {
    const spec = specFor(`sbx-${crypto.randomBytes(4).toString('hex')}`);
    cleanups.push(() => provider().destroy(spec.id));

    // A host that creates the sandbox and is then killed -9: the VM outlives it.
    const child = spawn(process.execPath, [path.join(repo, 'test/microvm-host.ts'), JSON.stringify({ dir, imagesDir, spec })], { stdio: ['ignore', 'pipe', 'inherit'] });
    cleanups.push(async () => void child.kill('SIGKILL'));
    let said = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (b: Buffer) => {
        said += b.toString();
        if (said.includes('ready')) resolve();
      });
      child.on('exit', (code) => reject(new Error(`the host process exited with ${code} before the sandbox was ready`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));

    // The restarted host finds it again and talks to it.
    const p = provider();
    assert.deepEqual(await p.list(), [spec.id]);
    assert.deepEqual(await p.status(spec.id), { state: 'running', network: spec.network });
    assert.ok(tapExists(spec.network.hostInterface));

    const echo = await collect(p, spec.id, ['sh', '-c', 'cat; echo "env=$CREWHOUSE_TEST"; echo oops >&2; exit 3'], 'from stdin\n');
    assert.deepEqual(echo, { code: 3, stdout: 'from stdin\nenv=yes\n', stderr: 'oops\n' });

    await p.copyIn(spec.id, [{ path: 'notes/a.txt', content: 'kept on disk\n' }, { path: 'run.sh', content: Buffer.from('#!/bin/sh\necho ran\n'), mode: 0o755 }]);
    assert.equal((await collect(p, spec.id, ['/workspace/run.sh'])).stdout, 'ran\n');
    await assert.rejects(p.copyIn(spec.id, [{ path: '../etc/passwd', content: 'x' }]), /under \/workspace/);

    // The one link: the host end answers; there is no other route.
    const server = http.createServer((_req, res) => res.end('gateway here'));
    await new Promise<void>((r) => server.listen(0, spec.network.hostAddress, r));
    cleanups.push(() => new Promise((r) => server.close(() => r())));
    const port = (server.address() as { port: number }).port;
    const got = await collect(p, spec.id, ['wget', '-q', '-O-', `http://${spec.network.hostAddress}:${port}/`]);
    assert.equal(got.stdout, 'gateway here');
    const routes = await collect(p, spec.id, ['ip', 'route']);
    assert.doesNotMatch(routes.stdout, /default/);
    assert.match(routes.stdout, new RegExp(`dev eth0`));

    // Killing a command through its signal.
    const ac = new AbortController();
    const long = await p.exec(spec.id, { argv: ['sleep', '1000'], signal: ac.signal });
    ac.abort();
    assert.equal(await long.exit, 128 + 9);

    // Sleep with a process running; wake from the snapshot: it is still running.
    const bg = await collect(p, spec.id, ['sh', '-c', 'sleep 100000 >/dev/null 2>&1 & echo $!']);
    const pid = bg.stdout.trim();
    assert.match(pid, /^\d+$/);
    assert.deepEqual(await p.sleep(spec.id, 'sleep'), { state: 'sleeping', network: spec.network });
    assert.equal(tapExists(spec.network.hostInterface), false);
    assert.ok(fs.existsSync(path.join(dir, spec.id, 'snapshot.bin')));
    await assert.rejects(p.exec(spec.id, { argv: ['true'] }), (e: SandboxError) => e.code === 'wrong_state');
    const woke = await p.wake(spec.id);
    assert.deepEqual(woke, { state: 'running', network: spec.network });
    assert.ok(tapExists(spec.network.hostInterface));
    assert.equal((await collect(p, spec.id, ['kill', '-0', pid])).code, 0, 'the process started before sleep runs after wake');
    const clock = Number((await collect(p, spec.id, ['date', '+%s'])).stdout.trim());
    assert.ok(Math.abs(clock - Date.now() / 1000) < 30, 'the guest clock is resynced');
    // The snapshot was consumed: nothing left to resume a second time.
    assert.deepEqual((await fsp.readdir(path.join(dir, spec.id))).filter((f) => f.startsWith('snapshot')), []);

    // A snapshot that cannot be used (another QEMU wrote it) is discarded: cold boot, disk intact.
    await p.sleep(spec.id, 'sleep');
    const metaFile = path.join(dir, spec.id, 'snapshot.json');
    const meta = JSON.parse(await fsp.readFile(metaFile, 'utf8'));
    await fsp.writeFile(metaFile, JSON.stringify({ ...meta, qemu: 'QEMU emulator version 0.0.1' }));
    assert.deepEqual(await p.wake(spec.id), { state: 'running', network: spec.network, coldBooted: true });
    assert.equal((await collect(p, spec.id, ['cat', '/workspace/notes/a.txt'])).stdout, 'kept on disk\n');
    assert.notEqual((await collect(p, spec.id, ['kill', '-0', pid])).code, 0, 'a cold boot starts afresh');
    assert.equal(fs.existsSync(path.join(dir, spec.id, 'snapshot.bin')), false);

    // Deep sleep keeps the disk only; wake cold-boots.
    await collect(p, spec.id, ['sh', '-c', 'echo deep > /workspace/deep.txt']);
    assert.deepEqual(await p.sleep(spec.id, 'deep'), { state: 'deep_sleep', network: spec.network });
    assert.equal(fs.existsSync(path.join(dir, spec.id, 'snapshot.bin')), false);
    assert.equal(tapExists(spec.network.hostInterface), false);
    assert.deepEqual(await p.wake(spec.id), { state: 'running', network: spec.network, coldBooted: true });
    assert.equal((await collect(p, spec.id, ['cat', '/workspace/deep.txt'])).stdout, 'deep\n');

    // Destroy: no process, no tap, no files.
    const qemuPid = Number(await fsp.readFile(path.join(dir, spec.id, 'qemu.pid'), 'utf8'));
    await p.destroy(spec.id);
    assert.equal(fs.existsSync(path.join(dir, spec.id)), false);
    assert.equal(tapExists(spec.network.hostInterface), false);
    await waitFor('QEMU to exit', async () => !fs.existsSync(`/proc/${qemuPid}`));
    await assert.rejects(p.status(spec.id), (e: SandboxError) => e.code === 'not_found');
    await p.destroy(spec.id);
  });

  /** Runs test/microvm-host.ts until it says `word`, then kills it -9. */
  async function hostKilledAt(args: Record<string, unknown>, word: string) {
    const child = spawn(process.execPath, [path.join(repo, 'test/microvm-host.ts'), JSON.stringify({ dir, imagesDir, ...args })], { stdio: ['ignore', 'pipe', 'inherit'] });
    cleanups.push(async () => void child.kill('SIGKILL'));
    let said = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (b: Buffer) => {
        said += b.toString();
        if (said.includes(word)) resolve();
      });
      child.on('exit', (code) => reject(new Error(`the host process exited with ${code} before it said ${word}`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
  }

  test('a host killed in the middle of a sleep or a wake: the next host finishes it, waking from a saved snapshot, else cold; a dying guest agent', async () => {
    const spec = specFor(`sbx-${crypto.randomBytes(4).toString('hex')}`);
    cleanups.push(() => provider().destroy(spec.id));
    const qemuPid = async () => Number(await fsp.readFile(path.join(dir, spec.id, 'qemu.pid'), 'utf8'));
    const snapshots = async () => (await fsp.readdir(path.join(dir, spec.id))).filter((f) => f.startsWith('snapshot')).sort();

    // Killed after the snapshot was saved, before QEMU was stopped: QEMU is left, paused.
    await hostKilledAt({ spec, stopAt: 'committed' }, 'at committed');
    const first = await qemuPid();
    assert.ok(fs.existsSync(`/proc/${first}`), 'QEMU outlived the host');
    const p = provider();
    assert.deepEqual(await p.status(spec.id), { state: 'sleeping', network: spec.network });
    await waitFor('the orphan QEMU to exit', async () => !fs.existsSync(`/proc/${first}`));
    assert.equal(tapExists(spec.network.hostInterface), false);
    assert.deepEqual(await snapshots(), ['snapshot.bin', 'snapshot.json']);
    assert.deepEqual(await p.wake(spec.id), { state: 'running', network: spec.network }, 'woke from the snapshot, not cold');
    const bg = (await collect(p, spec.id, ['cat', '/workspace/bg.pid'])).stdout.trim();
    assert.match(bg, /^\d+$/);
    assert.equal((await collect(p, spec.id, ['kill', '-0', bg])).code, 0, 'the process started before the sleep still runs');
    assert.match((await collect(p, spec.id, ['ps'])).stdout, /sleep 100000/);

    // Killed after QEMU paused, before the snapshot was written: nothing to wake from.
    await hostKilledAt({ spec, create: false, stopAt: 'paused' }, 'at paused');
    const second = await qemuPid();
    assert.ok(fs.existsSync(`/proc/${second}`));
    const again = provider();
    assert.deepEqual(await again.status(spec.id), { state: 'deep_sleep', network: spec.network });
    await waitFor('the paused QEMU to exit', async () => !fs.existsSync(`/proc/${second}`));
    assert.equal(tapExists(spec.network.hostInterface), false);
    assert.deepEqual(await snapshots(), []);
    assert.deepEqual(await again.wake(spec.id), { state: 'running', network: spec.network, coldBooted: true });
    assert.equal((await collect(again, spec.id, ['cat', '/workspace/bg.pid'])).stdout.trim(), bg, 'the disk is kept');
    // By its command line, not its pid: a fresh boot hands out the same pids again.
    assert.doesNotMatch((await collect(again, spec.id, ['ps'])).stdout, /sleep 100000/, 'a cold boot starts afresh');

    // A guest agent that dies under a running command is respawned: the command fails, it does
    // not hang, and the next command runs on the new agent.
    const h = await again.exec(spec.id, { argv: ['sh', '-c', 'kill -9 $PPID; exec sleep 100000'] });
    h.stdin.end();
    h.stdout.resume();
    h.stderr.resume();
    let guard: NodeJS.Timeout | undefined;
    const hung = new Promise((_, reject) => (guard = setTimeout(() => reject(new Error('the exec still hangs 150 s after its agent died')), 150_000)));
    await assert.rejects(Promise.race([h.exit, hung]), (e: Error) => e instanceof SandboxError && /agent restarted/.test(e.message));
    clearTimeout(guard);
    const next = await collect(again, spec.id, ['echo', 'after']);
    assert.deepEqual(next, { code: 0, stdout: 'after\n', stderr: '' });

    // Killed while restoring a snapshot: its QEMU is no one's and the snapshot is spent.
    assert.equal((await again.sleep(spec.id, 'sleep')).state, 'sleeping');
    await hostKilledAt({ spec, create: false, verb: 'wake', stopAt: 'restoring' }, 'at restoring');
    const third = await qemuPid();
    assert.ok(fs.existsSync(`/proc/${third}`));
    const last = provider();
    assert.deepEqual(await last.status(spec.id), { state: 'deep_sleep', network: spec.network }, 'no snapshot is left to wake from');
    await waitFor('the restoring QEMU to exit', async () => !fs.existsSync(`/proc/${third}`));
    assert.equal(tapExists(spec.network.hostInterface), false);
    assert.deepEqual(await snapshots(), []);
    assert.deepEqual(await last.wake(spec.id), { state: 'running', network: spec.network, coldBooted: true });
    assert.equal((await collect(last, spec.id, ['cat', '/workspace/bg.pid'])).stdout.trim(), bg);
    await last.destroy(spec.id);
  });

  test('a full snapshot budget turns sleep into deep sleep', async () => {
    const spec = specFor(`sbx-${crypto.randomBytes(4).toString('hex')}`);
    const p = provider({ snapshotBudgetBytes: 1024 });
    cleanups.push(() => p.destroy(spec.id));
    await p.create(spec);
    assert.deepEqual(await p.sleep(spec.id, 'sleep'), { state: 'deep_sleep', network: spec.network });
    assert.equal(fs.existsSync(path.join(dir, spec.id, 'snapshot.bin')), false);
    await p.destroy(spec.id);
  });
});
