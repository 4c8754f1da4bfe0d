// The local provider's network pool (links made ahead of demand): taken and refilled, removed
// with the sandbox that took it, found again by the next start after its maker was killed, and
// as isolating as a link made on demand (one pooled sandbox cannot reach another). Needs root;
// skips with the reason elsewhere.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { execText, localSkipReason, randomLink, sandboxId } from '../../../../test/sandboxes.ts';
import { firewallExists, resourceTag, type PooledLink } from '../network.ts';
import type { SandboxSpec } from '../provider.ts';
import { findProgram } from '../system.ts';
import { createLocalProvider } from './local.ts';

const skip = localSkipReason();

/** Whether anything of a pooled link is on the host: its namespace, its host end, its firewall. */
const present = async (item: PooledLink) => ({
  netns: fs.existsSync(`/run/netns/${item.netns}`),
  link: fs.existsSync(`/sys/class/net/${item.link}`),
  firewall: await firewallExists('nft', item.link),
});
const gone = { netns: false, link: false, firewall: false };
const whole = { netns: true, link: true, firewall: true };

/** Mount points under a directory (the host's mount table). */
const mountsUnder = (dir: string) =>
  fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((m) => m?.startsWith(`${dir}/`));

/**
 * Starts a process that fills a pool of 2 links on `dir` (and, given a sandbox, makes it, which
 * leaves a spare volume made ahead of demand), kills it once it has, and answers the links it made.
 */
async function killedPoolMaker(dir: string, gatewayPort: number, sandbox?: SandboxSpec): Promise<PooledLink[]> {
  const script = `const { createLocalProvider } = await import(process.argv[1]);
const p = createLocalProvider({ root: process.argv[2], gatewayPort: Number(process.argv[3]), poolSize: 2 });
await p.check();
if (process.argv[4]) await p.create(JSON.parse(process.argv[4]));
console.log(JSON.stringify(await p.pooled()));
setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script, path.join(import.meta.dirname, 'local.ts'), dir, String(gatewayPort), sandbox ? JSON.stringify(sandbox) : ''], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(out.split('\n')[0]);
    });
    child.on('exit', (code) => reject(new Error(`the pool maker exited (${code}) before filling its pool`)));
  });
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  const left = JSON.parse(line) as PooledLink[];
  assert.equal(left.length, 2);
  return left;
}

describe('local provider network pool', { skip: skip ?? false }, () => {
  let root: string;
  let gateway: net.Server;
  let gatewayPort: number;
  let provider: ReturnType<typeof createLocalProvider>;

  const spec = (): SandboxSpec => {
    const id = sandboxId('pool');
    return { id, vcpus: 1, memoryMib: 256, diskGib: 1, image: null, env: {}, network: randomLink(id), caPem: null };
  };
  /** Connects from inside to address:port and reads a line; exit 0 only when one came. */
  const tcp = (id: string, address: string, port: number) =>
    execText(provider, id, ['/usr/bin/timeout', '5', '/bin/bash', '-c', `exec 3<>/dev/tcp/${address}/${port} && echo ping >&3 && read -r line <&3 && echo "$line"`]);
  const netnsOf = (id: string, dir = root) => (JSON.parse(fs.readFileSync(path.join(dir, id, 'sandbox.json'), 'utf8')) as { netns?: string }).netns;

  before(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'chpool-'));
    gateway = net.createServer((s) => s.once('data', () => s.end('pong\n')));
    await new Promise<void>((r) => gateway.listen(0, '0.0.0.0', r));
    gatewayPort = (gateway.address() as net.AddressInfo).port;
    provider = createLocalProvider({ root, gatewayPort, poolSize: 2 });
    await provider.check();
  });

  after(async () => {
    for (const id of await provider.list()) await provider.destroy(id).catch(() => {});
    await provider.close();
    fs.rmSync(root, { recursive: true, force: true });
    gateway.close();
  });

  test('a create takes a pooled link (named and addressed for the sandbox), the pool refills, and destroy removes the link', async () => {
    const before = await provider.pooled();
    assert.equal(before.length, 2);
    for (const item of before) assert.deepEqual(await present(item), whole);
    const s = spec();
    await provider.create(s);
    try {
      const taken = before.find((i) => i.netns === netnsOf(s.id));
      assert.ok(taken, 'the sandbox runs in a pooled namespace');
      assert.equal(fs.existsSync(`/sys/class/net/${taken.link}`), false, 'the host end was renamed');
      assert.equal(fs.existsSync(`/sys/class/net/${s.network.hostInterface}`), true);
      assert.equal(fs.existsSync(`/run/netns/chs-${resourceTag(s.id)}`), false, 'no second namespace was made');

      const refilled = await provider.pooled();
      assert.equal(refilled.length, 2);
      assert.equal(refilled.some((i) => i.netns === taken.netns), false);
      // A volume of this size is ready, mounted; the next create's /workspace is that mount, moved.
      const spareMounts = mountsUnder(path.join(root, '.shared'));
      assert.equal(spareMounts.length, 2, 'a spare volume and its /tmp are mounted ahead of demand');
      // Another memory size than the sandbox the spare was made after: its /tmp is resized.
      const u = { ...spec(), memoryMib: 512 };
      await provider.create(u);
      for (const m of spareMounts) assert.equal(fs.existsSync(m), false);
      assert.deepEqual(mountsUnder(path.join(root, u.id)).sort(), [path.join(root, u.id, 'tmp'), path.join(root, u.id, 'workspace')]);
      const tmp = await execText(provider, u.id, ['/bin/sh', '-c', 'stat -f -c "%b %S" /tmp && ls -A /tmp | wc -l']);
      const [blocks, blockSize] = tmp.stdout.split('\n')[0].split(' ').map(Number);
      assert.equal(blocks * blockSize, 128 * 1024 * 1024, 'a quarter of 512 MiB');
      assert.equal(tmp.stdout.split('\n')[1], '0', 'an empty /tmp');
      const w = await execText(provider, u.id, ['/bin/sh', '-c', 'echo hi > /workspace/f && cat /workspace/f && stat -c %u /workspace']);
      assert.equal(w.stdout, 'hi\n1000\n', w.stderr);
      await provider.destroy(u.id);
      assert.deepEqual(mountsUnder(path.join(root, u.id)), []);

      // The gateway answers on the link's host address; nothing else does.
      const gw = await tcp(s.id, s.network.hostAddress, gatewayPort);
      assert.equal(gw.code, 0, gw.stderr);
      assert.equal(gw.stdout.trim(), 'pong');
      const elsewhere = await tcp(s.id, s.network.hostAddress, gatewayPort === 65535 ? 65534 : gatewayPort + 1);
      assert.notEqual(elsewhere.code, 0);

      await provider.destroy(s.id);
      assert.deepEqual(await present(taken), gone);
      assert.equal(fs.existsSync(`/sys/class/net/${s.network.hostInterface}`), false);
      assert.equal(await firewallExists('nft', s.network.hostInterface), false);
    } finally {
      await provider.destroy(s.id);
    }
  });

  test('a pooled sandbox whose link was lost in deep sleep (a reboot) wakes with its firewall made again; destroy leaves nothing', async () => {
    await provider.pooled();
    const s = spec();
    await provider.create(s);
    try {
      const netns = netnsOf(s.id)!;
      const item = { netns, link: `chp${netns.slice('chp-'.length)}` };
      await provider.sleep(s.id, 'deep');
      // What a reboot loses: the namespace (with the pair) and every nftables table.
      execFileSync('ip', ['netns', 'del', netns]);
      execFileSync('nft', ['delete', 'table', 'inet', `crewhouse_${item.link}`]);
      assert.equal(fs.existsSync(`/sys/class/net/${s.network.hostInterface}`), false);
      await provider.wake(s.id);
      assert.equal(await firewallExists('nft', s.network.hostInterface), true, 'the link made again has its firewall');
      const gw = await tcp(s.id, s.network.hostAddress, gatewayPort);
      assert.equal(gw.stdout.trim(), 'pong', gw.stderr);
      const elsewhere = await tcp(s.id, s.network.hostAddress, gatewayPort === 65535 ? 65534 : gatewayPort + 1);
      assert.notEqual(elsewhere.code, 0);
      await provider.destroy(s.id);
      assert.deepEqual(await present(item), gone);
      assert.equal(await firewallExists('nft', s.network.hostInterface), false);
      assert.equal(fs.existsSync(`/sys/class/net/${s.network.hostInterface}`), false);
    } finally {
      await provider.destroy(s.id);
    }
  });

  test('two sandboxes from the pool cannot reach each other, nor each other’s gateway address', { skip: findProgram('socat') ? false : 'needs socat' }, async () => {
    const a = spec();
    const b = spec();
    await provider.pooled();
    await provider.create(a);
    await provider.pooled();
    await provider.create(b);
    try {
      assert.ok(netnsOf(a.id)?.startsWith('chp-') && netnsOf(b.id)?.startsWith('chp-'), 'both took pooled links');
      // A listener in b, reachable from the host (so it is there to be refused).
      const listener = await provider.exec(b.id, { argv: ['/usr/bin/socat', 'TCP-LISTEN:8080,fork,reuseaddr', 'SYSTEM:echo here'] });
      listener.stdout.resume();
      listener.stderr.resume();
      const fromHost = () =>
        new Promise<string>((resolve) => {
          const c = net.connect(8080, b.network.sandboxAddress);
          let got = '';
          c.on('data', (d) => (got += d.toString()));
          c.on('close', () => resolve(got));
          c.on('error', () => resolve(''));
        });
      let answer = '';
      for (let i = 0; i < 200 && !answer.includes('here'); i++) {
        answer = await fromHost();
        if (!answer.includes('here')) await new Promise((r) => setTimeout(r, 25));
      }
      assert.match(answer, /here/, 'the host reaches b');

      const toB = await tcp(a.id, b.network.sandboxAddress, 8080);
      assert.notEqual(toB.code, 0);
      assert.doesNotMatch(toB.stdout, /here/);
      const toBGateway = await tcp(a.id, b.network.hostAddress, gatewayPort);
      assert.notEqual(toBGateway.code, 0, "a cannot use b's link address to the gateway");
      assert.doesNotMatch(toBGateway.stdout, /pong/);
      const own = await tcp(a.id, a.network.hostAddress, gatewayPort);
      assert.equal(own.stdout.trim(), 'pong', own.stderr);
    } finally {
      await provider.destroy(a.id);
      await provider.destroy(b.id);
    }
  });

  test('links made by a process that was killed are used or removed at the next start; close removes the pool', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chpool-kill-'));
    const next = createLocalProvider({ root: dir, gatewayPort: 1, poolSize: 1 });
    try {
      // A process fills a pool of 2 on this directory, says so, and is killed.
      const made = spec();
      const left = await killedPoolMaker(dir, 1, made);
      for (const item of left) assert.deepEqual(await present(item), whole);
      const spareMounts = mountsUnder(path.join(dir, '.shared'));
      assert.equal(spareMounts.length, 2, 'the killed process left a spare volume and its /tmp, mounted');

      // The next start on the directory, with room for one: it uses one and removes the other.
      await next.check();
      const kept = await next.pooled();
      assert.equal(kept.length, 1);
      assert.ok(left.some((i) => i.netns === kept[0].netns), 'a link the killed process made is used');
      const removed = left.find((i) => i.netns !== kept[0].netns)!;
      assert.deepEqual(await present(removed), gone);
      assert.deepEqual(mountsUnder(path.join(dir, '.shared')), [], 'its spare volume is unmounted and removed');
      // The sandbox it made is this start's to adopt (or destroy).
      assert.ok((await next.list()).includes(made.id));
      await next.destroy(made.id);

      // A sandbox made from it works, and is removed whole.
      const s = spec();
      await next.create(s);
      assert.equal(netnsOf(s.id, dir), kept[0].netns);
      const r = await execText(next, s.id, ['/usr/bin/true']);
      assert.equal(r.code, 0, r.stderr);
      await next.destroy(s.id);
      assert.deepEqual(await present(kept[0]), gone);

      // Closed: what the pool holds goes, and a create makes its link on demand.
      const refilled = await next.pooled();
      await next.close();
      for (const item of refilled) assert.deepEqual(await present(item), gone);
      assert.deepEqual(fs.readdirSync(path.join(dir, '.shared', 'network-pool')), []);
      assert.deepEqual(mountsUnder(dir), [], 'no spare volume stays mounted');
      const t = spec();
      await next.create(t);
      assert.equal(netnsOf(t.id, dir), undefined);
      assert.equal(fs.existsSync(`/run/netns/chs-${resourceTag(t.id)}`), true);
      await next.destroy(t.id);
    } finally {
      for (const id of await next.list()) await next.destroy(id).catch(() => {});
      await next.close();
      // A provider without a pool removes whatever a dead process left.
      await createLocalProvider({ root: dir, gatewayPort: 1 }).check();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('links a killed process made for another gateway port are removed, never used', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chpool-port-'));
    const next = createLocalProvider({ root: dir, gatewayPort: 1, poolSize: 2 });
    try {
      const left = await killedPoolMaker(dir, 2);
      await next.check();
      for (const item of left) assert.deepEqual(await present(item), gone);
      const own = await next.pooled();
      assert.equal(own.length, 2);
      assert.equal(own.some((i) => left.some((l) => l.netns === i.netns)), false);
    } finally {
      await next.close();
      await createLocalProvider({ root: dir, gatewayPort: 1 }).check();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
