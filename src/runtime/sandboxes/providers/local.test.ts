// The local provider on this machine: isolation seen from inside (only the gateway answers,
// nothing else on the host or beyond, no host process visible), exec streams and exit codes,
// sleep and wake, /workspace across restarts, and nothing left behind by destroy or a failed
// create. Needs root; skips with the reason elsewhere.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createLogger } from '../../../logger.ts';
import { execText, localSkipReason, randomLink, sandboxId } from '../../../../test/sandboxes.ts';
import { Cgroup, cgroupVersion, MAX_PROCESSES } from '../cgroups.ts';
import { firewallExists, resourceTag } from '../network.ts';
import { SandboxError, type SandboxSpec } from '../provider.ts';
import { syscallNumber } from '../seccomp.ts';
import { pollUntil } from '../system.ts';
import { createLocalProvider } from './local.ts';

const skip = localSkipReason();

test('a missing bubblewrap names the Debian package to install', async () => {
  const p = createLocalProvider({ root: path.join(os.tmpdir(), 'unused'), gatewayPort: 1, bwrap: '/nonexistent/bin/bwrap' });
  await assert.rejects(p.check(), (err: SandboxError) => err instanceof SandboxError && err.code === 'unavailable' && /apt-get install bubblewrap/.test(err.message));
});

describe('local provider', { skip: skip ?? false }, () => {
  let root: string;
  let gateway: net.Server;
  let gatewayPort: number;
  let other: net.Server;
  let loopback: net.Server;
  const seenBy = new Set<string>();
  let provider: ReturnType<typeof createLocalProvider>;

  const spec = (over: Partial<SandboxSpec> = {}): SandboxSpec => {
    const id = over.id ?? sandboxId('lp');
    return { id, vcpus: 1, memoryMib: 256, diskGib: 1, image: null, env: { CREWHOUSE_TEST: 'yes' }, network: randomLink(id), caPem: '-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n', ...over };
  };
  const listen = async (host: string, onConn: (s: net.Socket) => void) => {
    const server = net.createServer(onConn);
    await new Promise<void>((r) => server.listen(0, host, r));
    return server;
  };

  before(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'chsb-'));
    // The test's gateway: answers a line with "pong" and remembers who asked.
    gateway = await listen('0.0.0.0', (s) => {
      seenBy.add(`${s.localAddress}>${s.remoteAddress}`);
      s.once('data', () => s.end('pong\n'));
    });
    gatewayPort = (gateway.address() as net.AddressInfo).port;
    other = await listen('0.0.0.0', (s) => s.end('other\n'));
    loopback = await listen('127.0.0.1', (s) => s.end('loopback\n'));
    provider = createLocalProvider({ root, gatewayPort });
    await provider.check();
  });

  after(async () => {
    for (const id of await provider.list()) await provider.destroy(id).catch(() => {});
    fs.rmSync(root, { recursive: true, force: true });
    for (const s of [gateway, other, loopback]) s.close();
  });

  /** The command line of every process of a sandbox (its cgroup), read on the host. */
  const sandboxCommands = async (id: string) => {
    const out: string[] = [];
    for (const pid of await new Cgroup(cgroupVersion()!, `chs-${resourceTag(id)}`).pids()) {
      try {
        out.push(fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim());
      } catch {
        // ended meanwhile
      }
    }
    return out;
  };

  /** Connects from inside to address:port, sends a line, prints the answer; exit 0 only when one came. */
  const tcp = (id: string, address: string, port: number) =>
    execText(provider, id, ['/usr/bin/timeout', '10', '/bin/bash', '-c', `exec 3<>/dev/tcp/${address}/${port} && echo ping >&3 && read -r line <&3 && echo "$line"`]);

  test('from inside, only the gateway answers: nothing else on the host, no internet, no DNS, no host process', async () => {
    const marker = spawn('/usr/bin/sleep', ['31337.5'], { stdio: 'ignore' });
    const s = spec();
    try {
      await provider.create(s);
      const { hostAddress, sandboxAddress } = s.network;

      const gw = await tcp(s.id, hostAddress, gatewayPort);
      assert.equal(gw.code, 0, gw.stderr);
      assert.equal(gw.stdout.trim(), 'pong');
      assert.ok(seenBy.has(`${hostAddress}>${sandboxAddress}`), 'the gateway sees the sandbox by its link addresses');

      const otherPort = (other.address() as net.AddressInfo).port;
      const onHost = await tcp(s.id, hostAddress, otherPort);
      assert.notEqual(onHost.code, 0, 'a host listener on 0.0.0.0 is not reachable');
      assert.doesNotMatch(onHost.stdout, /other/);
      const lo = await tcp(s.id, '127.0.0.1', (loopback.address() as net.AddressInfo).port);
      assert.notEqual(lo.code, 0, 'the host loopback is not the sandbox loopback');
      assert.doesNotMatch(lo.stdout, /loopback/);
      const internet = await tcp(s.id, '1.1.1.1', 80);
      assert.notEqual(internet.code, 0);
      assert.match(internet.stderr, /unreachable/i);

      const routes = await execText(provider, s.id, ['/bin/cat', '/proc/net/route', '/etc/resolv.conf']);
      assert.equal(routes.code, 0);
      assert.doesNotMatch(routes.stdout, /^eth0\s+00000000/m, 'no default route');
      assert.equal((await execText(provider, s.id, ['/usr/bin/getent', 'hosts', 'example.com'])).code === 0, false, 'no name resolution');

      const ps = await execText(provider, s.id, ['/bin/ps', '-eo', 'pid,args']);
      assert.equal(ps.code, 0, ps.stderr);
      assert.doesNotMatch(ps.stdout, /31337/, 'a host process is not visible');
      assert.doesNotMatch(ps.stdout, /node/, 'the host service is not visible');
      const me = await execText(provider, s.id, ['/usr/bin/id', '-u']);
      assert.equal(me.stdout.trim(), '1000');
      const ro = await execText(provider, s.id, ['/bin/sh', '-c', 'touch /usr/x || touch /etc/x']);
      assert.notEqual(ro.code, 0, 'the system is read-only');
      const ca = await execText(provider, s.id, ['/bin/cat', '/etc/ssl/certs/ca-certificates.crt']);
      assert.match(ca.stdout, /BEGIN CERTIFICATE/);
    } finally {
      marker.kill();
      await provider.destroy(s.id);
    }
  });

  test('exec streams stdin to stdout as it goes, keeps stderr apart, and reports exit codes and kills', async () => {
    const s = spec();
    await provider.create(s);
    try {
      const h = await provider.exec(s.id, { argv: ['/bin/sh', '-c', 'while read -r l; do echo "got $l"; echo "e $l" >&2; done; exit 7'], env: { EXTRA: '1' } });
      const lines: string[] = [];
      let errText = '';
      h.stdout.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)));
      h.stderr.on('data', (d: Buffer) => (errText += d.toString()));
      h.stdin.write('one\n');
      assert.ok(await pollUntil(() => lines.includes('got one'), 400, 25), 'the first line comes back before stdin ends');
      h.stdin.write('two\n');
      assert.ok(await pollUntil(() => lines.includes('got two'), 400, 25));
      h.stdin.end();
      assert.equal(await h.exit, 7);
      assert.match(errText, /e one\ne two/);

      const env = await execText(provider, s.id, ['/bin/sh', '-c', 'echo "$CREWHOUSE_TEST $HOME $(pwd)"']);
      assert.equal(env.stdout.trim(), 'yes /workspace /workspace');

      const ac = new AbortController();
      const long = await provider.exec(s.id, { argv: ['/bin/sh', '-c', 'sleep 300 & sleep 300; wait'], signal: ac.signal });
      long.stdout.resume();
      long.stderr.resume();
      ac.abort();
      assert.equal(await long.exit, 137);
      assert.ok(await pollUntil(async () => !(await sandboxCommands(s.id)).some((c) => c.includes('sleep 300')), 400, 25), 'the aborted command and its children are gone');

      await provider.copyIn(s.id, [{ path: 'context/notes.md', content: 'read me', mode: 0o444 }]);
      const copied = await execText(provider, s.id, ['/bin/sh', '-c', 'cat context/notes.md; stat -c %a context/notes.md']);
      assert.equal(copied.stdout, 'read me444\n');
      await assert.rejects(provider.copyIn(s.id, [{ path: '../escape', content: 'x' }]), /relative to \/workspace/);
      // A link made inside cannot turn a copy into a write on the host.
      await execText(provider, s.id, ['/bin/ln', '-s', '/etc', 'hostetc']);
      await assert.rejects(provider.copyIn(s.id, [{ path: 'hostetc/evil', content: 'x' }]));
      assert.equal(fs.existsSync('/etc/evil'), false);
      await assert.rejects(provider.exec(s.id, { argv: [] }), SandboxError);
    } finally {
      await provider.destroy(s.id);
    }
  });

  test('sleep freezes and wake thaws: a process started before sleep still runs after wake; deep sleep keeps only the disk', async () => {
    const s = spec();
    await provider.create(s);
    try {
      const bg = await provider.exec(s.id, { argv: ['/bin/sh', '-c', 'while :; do date +%s%N > /workspace/tick; sleep 0.05; done'] });
      bg.stdout.resume();
      bg.stderr.resume();
      let bgExit: number | null = null;
      void bg.exit.then((c) => (bgExit = c));
      const tick = path.join(root, s.id, 'workspace', 'tick');
      assert.ok(await pollUntil(() => fs.existsSync(tick)));

      assert.equal((await provider.sleep(s.id, 'sleep')).state, 'sleeping');
      assert.equal((await provider.status(s.id)).state, 'sleeping');
      await assert.rejects(provider.exec(s.id, { argv: ['/bin/true'] }), (e: SandboxError) => e.code === 'wrong_state');
      await assert.rejects(provider.sleep(s.id, 'sleep'), (e: SandboxError) => e.code === 'wrong_state');
      const cg = new Cgroup(cgroupVersion()!, `chs-${resourceTag(s.id)}`);
      assert.equal(await cg.frozen(), true, 'the kernel holds every process of the sandbox frozen');
      const frozenAt = fs.readFileSync(tick, 'utf8');

      const woke = await provider.wake(s.id);
      assert.equal(woke.state, 'running');
      assert.equal(woke.coldBooted, false);
      assert.ok(await pollUntil(() => fs.readFileSync(tick, 'utf8') !== frozenAt), 'the loop runs again after wake');
      assert.equal(bgExit, null, 'the same process');
      await assert.rejects(provider.wake(s.id), (e: SandboxError) => e.code === 'wrong_state');

      // 8 MiB written: its page cache is charged to the sandbox until deep sleep gives it back.
      await execText(provider, s.id, ['/bin/sh', '-c', 'echo kept > /workspace/kept; head -c 8388608 /dev/zero > /workspace/cached']);
      assert.ok((await cg.memoryBytes()) >= 8 * 2 ** 20, 'the written file is charged to the sandbox while it runs');
      assert.equal((await provider.sleep(s.id, 'deep')).state, 'deep_sleep');
      assert.deepEqual(await cg.pids(), [], 'no process is left in deep sleep');
      assert.ok((await cg.memoryBytes()) < 2 ** 20, `deep sleep holds no memory: ${await cg.memoryBytes()} bytes still charged`);
      const cold = await provider.wake(s.id);
      assert.equal(cold.coldBooted, true);
      assert.equal((await execText(provider, s.id, ['/bin/cat', '/workspace/kept'])).stdout, 'kept\n');
      assert.notEqual(bgExit, null, 'the command running before the deep sleep ended');
      assert.equal((await sandboxCommands(s.id)).some((c) => c.includes('date +%s')), false, 'processes did not survive deep sleep');
    } finally {
      await provider.destroy(s.id);
    }
  });

  test('a restarted host finds its sandboxes; /workspace persists across a restart of the sandbox', async () => {
    const s = spec();
    await provider.create(s);
    try {
      await execText(provider, s.id, ['/bin/sh', '-c', 'echo survived > /workspace/file']);
      const again = createLocalProvider({ root, gatewayPort });
      await again.check();
      assert.ok((await again.list()).includes(s.id));
      assert.equal((await again.status(s.id)).state, 'running');
      assert.equal((await execText(again, s.id, ['/bin/cat', 'file'])).stdout, 'survived\n');
      await again.sleep(s.id, 'deep');
      await again.wake(s.id);
      assert.equal((await execText(again, s.id, ['/bin/cat', 'file'])).stdout, 'survived\n');
      // Its limits: 256 MiB of memory, one CPU's worth of time per period.
      const v = cgroupVersion()!;
      const tag = `chs-${resourceTag(s.id)}`;
      const read = (f: string) => fs.readFileSync(f, 'utf8').trim();
      if (v === 1) {
        assert.equal(read(`/sys/fs/cgroup/memory/crewhouse/${tag}/memory.limit_in_bytes`), String(256 * 1024 * 1024));
        assert.equal(read(`/sys/fs/cgroup/cpu/crewhouse/${tag}/cpu.cfs_quota_us`), '100000');
        assert.equal(read(`/sys/fs/cgroup/pids/crewhouse/${tag}/pids.max`), String(MAX_PROCESSES));
      } else {
        assert.equal(read(`/sys/fs/cgroup/crewhouse/${tag}/memory.max`), String(256 * 1024 * 1024));
        assert.equal(read(`/sys/fs/cgroup/crewhouse/${tag}/cpu.max`), '100000 100000');
        assert.equal(read(`/sys/fs/cgroup/crewhouse/${tag}/pids.max`), String(MAX_PROCESSES));
      }
    } finally {
      await provider.destroy(s.id);
    }
  });

  test('a shared /etc per CA goes with the last sandbox that uses it, and one an earlier process left is removed at start-up', async () => {
    const etcs = () => (fs.existsSync(path.join(root, '.shared')) ? fs.readdirSync(path.join(root, '.shared')) : []).filter((f) => f.startsWith('etc-')).sort();
    const pem = (n: string) => `-----BEGIN CERTIFICATE-----\n${n}\n-----END CERTIFICATE-----\n`;
    const [a, b, c] = [spec({ caPem: pem('one') }), spec({ caPem: pem('one') }), spec({ caPem: pem('two') })];
    const before = etcs();
    try {
      await provider.create(a);
      await provider.create(b);
      await provider.create(c);
      const made = etcs().filter((f) => !before.includes(f));
      assert.equal(made.length, 2, 'one /etc per CA');
      await provider.destroy(c.id);
      assert.equal(etcs().filter((f) => made.includes(f)).length, 1, 'the second CA\'s /etc went with its only sandbox');
      await provider.destroy(a.id);
      assert.equal(etcs().filter((f) => made.includes(f)).length, 1, 'the first CA\'s /etc stays while a sandbox uses it');
      assert.equal((await execText(provider, b.id, ['/bin/cat', '/etc/ssl/certs/ca-certificates.crt'])).stdout, pem('one'));
      await provider.destroy(b.id);
      assert.deepEqual(etcs().filter((f) => made.includes(f)), []);
      // What a process stopped before destroying the last user of one leaves is removed when the next starts.
      fs.mkdirSync(path.join(root, '.shared', 'etc-0123456789abcdef', 'ssl'), { recursive: true });
      const again = createLocalProvider({ root, gatewayPort });
      await again.check();
      assert.ok(!etcs().includes('etc-0123456789abcdef'));
    } finally {
      for (const s of [a, b, c]) await provider.destroy(s.id).catch(() => {});
    }
  });

  test('destroy and a failed create leave nothing behind: no namespace, link, firewall, cgroup, process or files', async () => {
    const leftovers = async (id: string, hostInterface: string) => {
      const tag = resourceTag(id);
      return {
        dir: fs.existsSync(path.join(root, id)),
        netns: fs.existsSync(`/run/netns/chs-${tag}`),
        link: fs.existsSync(`/sys/class/net/${hostInterface}`),
        firewall: await firewallExists('nft', hostInterface),
        cgroup: new Cgroup(cgroupVersion()!, `chs-${tag}`).exists(),
        mount: isMounted(path.join(root, id, 'workspace')),
      };
    };
    const none = { dir: false, netns: false, link: false, firewall: false, cgroup: false, mount: false };
    const s = spec();
    await provider.create(s);
    assert.equal((await leftovers(s.id, s.network.hostInterface)).netns, true);
    assert.equal((await leftovers(s.id, s.network.hostInterface)).mount, true);
    await provider.destroy(s.id);
    assert.deepEqual(await leftovers(s.id, s.network.hostInterface), none);
    await provider.destroy(s.id); // again: nothing to do, no error
    await assert.rejects(provider.status(s.id), (e: SandboxError) => e.code === 'not_found');

    // The link cannot be made (its address is not an address): create fails and cleans up.
    const bad = spec();
    bad.network = { ...bad.network, hostAddress: '10.999.0.1' };
    await assert.rejects(provider.create(bad), (e: SandboxError) => e.code === 'failed' && /could not be made/.test(e.message));
    assert.deepEqual(await leftovers(bad.id, bad.network.hostInterface), none);
    assert.equal((await provider.list()).includes(bad.id), false);
  });

  test('/workspace is a volume of the disk size: a write past it fails with ENOSPC inside, the host keeps the rest, a lost mount comes back', async () => {
    const s = spec({ diskGib: 64 / 1024 });
    await provider.create(s);
    const image = path.join(root, s.id, 'workspace.img');
    try {
      // Sparse and lazily initialized: a new volume takes next to nothing on the host.
      assert.ok(fs.statSync(image).blocks * 512 < 8 * 2 ** 20, `a fresh volume holds ${fs.statSync(image).blocks * 512} bytes of the host's disk`);
      const df = await execText(provider, s.id, ['/bin/df', '-B1', '--output=size', '/workspace']);
      const size = Number(df.stdout.trim().split('\n').pop());
      assert.ok(size > 40 * 2 ** 20 && size <= 64 * 2 ** 20, `/workspace is about 64 MiB, not ${size} bytes`);
      assert.deepEqual(fs.readdirSync(path.join(root, s.id, 'workspace')), [], 'an empty workspace (no lost+found)');

      const big = await execText(provider, s.id, ['/bin/dd', 'if=/dev/zero', 'of=/workspace/big', 'bs=1M', 'count=100']);
      assert.notEqual(big.code, 0, 'writing 100 MiB into 64 MiB fails');
      assert.match(big.stderr, /No space left on device/);
      assert.ok(fs.statSync(image).blocks * 512 <= 64 * 2 ** 20, 'the host holds no more than the volume');
      assert.ok(fs.statSync(image).size === 64 * 2 ** 20);
      assert.equal(fs.existsSync(path.join(root, s.id, 'big')), false);
      await execText(provider, s.id, ['/bin/rm', '/workspace/big']);
      assert.equal((await execText(provider, s.id, ['/bin/sh', '-c', 'echo kept > /workspace/kept'])).code, 0, 'room again once freed');

      // A host that rebooted: processes and the mount are gone; wake mounts the volume again.
      await provider.sleep(s.id, 'deep');
      execFileSync('umount', [path.join(root, s.id, 'workspace')]);
      assert.equal(isMounted(path.join(root, s.id, 'workspace')), false);
      await provider.wake(s.id);
      assert.equal((await execText(provider, s.id, ['/bin/cat', '/workspace/kept'])).stdout, 'kept\n');
      assert.equal(isMounted(path.join(root, s.id, 'workspace')), true);
    } finally {
      await provider.destroy(s.id);
    }
    assert.equal(fs.existsSync(image), false, 'destroy removes the volume');
  });

  describe('its edge', () => {
    // As the worker makes it: the runtime's sources at a neutral path, Node execute-only.
    const checkout = path.resolve(import.meta.dirname, '../../../..');
    const NODE = '/opt/crewhouse/bin/node';
    let hardened: ReturnType<typeof createLocalProvider>;
    let s: SandboxSpec;
    const nr = (call: string) => syscallNumber(process.arch === 'arm64' ? 'aarch64' : 'x86_64', call);
    /** A perl line that prints "<label>=<errno, or ok>" for a system call. */
    const perlCall = (label: string, call: string, ...args: Array<number | string>) => `print "${label}=", (syscall(${[nr(call), ...args].join(', ')}) < 0 ? $!+0 : "ok"), "\n";`;

    before(async () => {
      hardened = createLocalProvider({ root, gatewayPort, readOnly: [{ source: path.join(checkout, 'src'), target: '/opt/crewhouse/src' }], node: { source: process.execPath, target: NODE } });
      s = spec();
      await hardened.create(s);
    });
    after(async () => {
      await hardened.destroy(s.id);
    });

    test('an exec runs under the seccomp filter with no_new_privs and cannot make namespaces; ordinary work still runs', async () => {
      const status = await execText(hardened, s.id, ['/bin/cat', '/proc/self/status']);
      assert.match(status.stdout, /^Seccomp:\s+2$/m);
      assert.match(status.stdout, /^NoNewPrivs:\s+1$/m);
      for (const argv of [['/usr/bin/unshare', '-Ur', 'true'], ['/usr/bin/unshare', '-Urn', 'true'], ['/usr/bin/unshare', '-n', 'true'], ['/usr/bin/unshare', '-m', 'true']]) {
        const r = await execText(hardened, s.id, argv);
        assert.notEqual(r.code, 0, `${argv.join(' ')} fails`);
      }
      // Straight at the kernel: each refused call answers its errno (38 ENOSYS, 1 EPERM).
      const calls = [
        perlCall('io_uring_setup', 'io_uring_setup', 1, 0),
        perlCall('bpf', 'bpf', 0, 0, 0),
        perlCall('keyctl', 'keyctl', 0, -3, 0),
        perlCall('perf_event_open', 'perf_event_open', 0, 0, -1, -1, 0),
        perlCall('ptrace', 'ptrace', 0, 0, 0, 0),
        perlCall('kcmp', 'kcmp', '$$', '$$', 0, 0, 0),
        perlCall('userfaultfd', 'userfaultfd', 0),
        perlCall('setns', 'setns', 0, 0),
        perlCall('clone3', 'clone3', 0, 0),
      ].join(' ');
      const perl = await execText(hardened, s.id, ['/usr/bin/perl', '-e', calls]);
      assert.equal(perl.code, 0, perl.stderr);
      assert.deepEqual(Object.fromEntries(perl.stdout.trim().split('\n').map((l) => l.split('='))), {
        io_uring_setup: '38', bpf: '1', keyctl: '1', perf_event_open: '1', ptrace: '1', kcmp: '1', userfaultfd: '1', setns: '1', clone3: '38',
      });

      const work = await execText(hardened, s.id, ['/bin/sh', '-c', `set -e; git init -q repo; cd repo; echo hi > f; git add f; git -c user.email=a@b -c user.name=a commit -q -m one; git log --oneline | wc -l; ${NODE} -e "const c = require('node:child_process'); console.log(c.execFileSync('/bin/sh', ['-c', 'echo from-node | tr a-z A-Z']).toString().trim())"`]);
      assert.equal(work.code, 0, work.stderr);
      assert.equal(work.stdout, '1\nFROM-NODE\n');
    });

    test('each exec is its own PID namespace: what a command leaves behind ends with it, and exit never waits on a copy of its pipes', async () => {
      const daemon = await execText(hardened, s.id, ['/bin/sh', '-c', 'setsid sh -c "sleep 1000 &"; (sleep 1001 > /dev/null 2>&1 &); echo started']);
      assert.equal(daemon.code, 0, daemon.stderr);
      assert.equal(daemon.stdout, 'started\n');
      assert.ok(await pollUntil(async () => !(await sandboxCommands(s.id)).some((c) => /sleep 100[01]/.test(c)), 400, 25), 'the setsid leftovers are gone');

      // A background child holds stdout: the exec still ends when its command does.
      const held = await execText(hardened, s.id, ['/bin/sh', '-c', 'sleep 1002 & echo hi; exit 3']);
      assert.equal(held.code, 3);
      assert.equal(held.stdout, 'hi\n');
      assert.equal((await sandboxCommands(s.id)).some((c) => c.includes('sleep 1002')), false);

      const ps = await execText(hardened, s.id, ['/bin/ps', '-eo', 'pid,args']);
      assert.doesNotMatch(ps.stdout, /sleep/, 'another exec sees none of them');
    });

    test('an exec ends when its command does even while another exec holds a copy of its stdout', { skip: fs.existsSync('/usr/bin/python3') ? false : 'needs /usr/bin/python3 to pass a descriptor' }, async () => {
      // The holder: a command of another exec that receives a descriptor over a socket in /tmp and keeps it.
      const ac = new AbortController();
      const holder = await hardened.exec(s.id, {
        argv: ['/usr/bin/python3', '-c', "import socket, time\ns = socket.socket(socket.AF_UNIX)\ns.bind('/tmp/hold')\ns.listen()\nc, _ = s.accept()\nmsg, fds, _, _ = socket.recv_fds(c, 10, 4)\nprint('held', len(fds), flush=True)\ntime.sleep(600)"],
        signal: ac.signal,
      });
      let held = '';
      holder.stdout.on('data', (d: Buffer) => (held += d.toString()));
      holder.stderr.resume();
      try {
        assert.ok(await pollUntil(() => fs.existsSync(path.join(root, s.id, 'tmp', 'hold')), 400, 25), 'the holder listens');
        const giver = await execText(hardened, s.id, ['/usr/bin/python3', '-c', "import socket\nc = socket.socket(socket.AF_UNIX)\nc.connect('/tmp/hold')\nsocket.send_fds(c, [b'x'], [1])\nprint('sent', flush=True)"]);
        assert.equal(giver.code, 0, giver.stderr);
        assert.equal(giver.stdout, 'sent\n');
        assert.ok(await pollUntil(() => held === 'held 1\n', 400, 25), 'the other exec holds the copy of its stdout');
      } finally {
        ac.abort();
        await holder.exit;
      }
    });

    test('the runtime is out of its tools\' reach: its descriptors cannot be opened, traced or taken', async () => {
      // What a tool would run against the runtime that started it ($PPID).
      const attack = [
        'readlink /proc/$PPID/fd/1 && echo fd-visible',
        'echo FORGED > /proc/$PPID/fd/1 && echo opened',
        'cat /proc/$PPID/environ > /dev/null && echo environ-read',
        `perl -e '${['my $p = getppid();', perlCall('ptrace_attach', 'ptrace', 16, '$p', 0, 0), 'my $fd = syscall(' + nr('pidfd_open') + ', $p, 0);', 'print "pidfd_getfd=", (syscall(' + nr('pidfd_getfd') + ', $fd, 1, 0) < 0 ? $!+0 : "ok"), "\\n";'].join(' ')}'`,
      ].join('; ');
      const viaRuntime = await execText(hardened, s.id, [NODE, '-e', `const r = require('node:child_process').spawnSync('/bin/sh', ['-c', process.argv[1]], { encoding: 'utf8' }); process.stderr.write(r.stdout + r.stderr);`, attack]);
      assert.equal(viaRuntime.code, 0, viaRuntime.stderr);
      assert.doesNotMatch(viaRuntime.stdout, /FORGED/, 'nothing reached the runtime\'s stdout');
      assert.doesNotMatch(viaRuntime.stderr, /fd-visible|opened|environ-read/);
      assert.match(viaRuntime.stderr, /Permission denied/);
      assert.match(viaRuntime.stderr, /ptrace_attach=1\n/);
      assert.match(viaRuntime.stderr, /pidfd_getfd=1\n/);

      // The same look at a process that is not the runtime (a readable binary) does reach its descriptors.
      const viaShell = await execText(hardened, s.id, ['/bin/sh', '-c', `/bin/sh -c 'readlink /proc/$PPID/fd/1 && echo fd-visible'; true`]);
      assert.match(viaShell.stdout, /fd-visible/, 'the attack itself works: only the runtime is protected');
    });

    test('only stdin, stdout and stderr reach a sandbox, whatever the service inherited; no host path shows in any command line or environment', async () => {
      // A service started with an extra descriptor (fd 251, a pipe's write end) runs an exec.
      const child = spawn(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `import fs from 'node:fs';
           import { createLocalProvider } from ${JSON.stringify(path.join(import.meta.dirname, 'local.ts'))};
           import { execText } from ${JSON.stringify(path.join(checkout, 'test/sandboxes.ts'))};
           const [root, port, id] = process.argv.slice(1);
           const held = fs.readlinkSync('/proc/self/fd/251');
           const r = await execText(createLocalProvider({ root, gatewayPort: Number(port) }), id, ['/bin/sh', '-c', 'ls /proc/$$/fd']);
           process.stdout.write(JSON.stringify({ held, ...r }));`,
          root,
          String(gatewayPort),
          s.id,
        ],
        { stdio: ['ignore', 'pipe', 'inherit', ...Array<'ignore'>(248).fill('ignore'), 'pipe'] },
      );
      let out = '';
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      const code = await new Promise((r) => child.on('exit', r));
      assert.equal(code, 0);
      const inside = JSON.parse(out) as { held: string; code: number; stdout: string; stderr: string };
      assert.match(inside.held, /^(pipe|socket):/, 'the service held an inherited descriptor at 251');
      assert.equal(inside.code, 0, inside.stderr);
      assert.deepEqual(inside.stdout.trim().split('\n'), ['0', '1', '2'], 'a sandbox process holds only 0, 1 and 2');

      // Every process of the sandbox (init, its reaper, an exec running now), read on the host.
      const ac = new AbortController();
      const running = await hardened.exec(s.id, { argv: [NODE, '-e', 'setTimeout(() => {}, 60000)'], signal: ac.signal });
      running.stdout.resume();
      running.stderr.resume();
      try {
        const cg = new Cgroup(cgroupVersion()!, `chs-${resourceTag(s.id)}`);
        assert.ok(await pollUntil(async () => (await sandboxCommands(s.id)).some((c) => c.startsWith(NODE)), 400, 25), 'the runtime-like process runs');
        const pids = await cg.pids();
        assert.ok(pids.length >= 4);
        for (const pid of pids) {
          for (const what of ['cmdline', 'environ']) {
            const text = fs.readFileSync(`/proc/${pid}/${what}`, 'utf8').replaceAll('\0', ' ');
            assert.equal(text.includes(checkout), false, `process ${pid}'s ${what} shows the checkout: ${text}`);
            assert.equal(text.includes(root), false, `process ${pid}'s ${what} shows the sandbox directory: ${text}`);
            assert.equal(text.includes('CH_CGROUP_PROCS'), false, `process ${pid}'s ${what}: ${text}`);
          }
        }
      } finally {
        ac.abort();
        assert.equal(await running.exit, 137);
      }
    });
  });

  test('/tmp is bounded and shared by the execs; a process killed for memory is counted, and the next exec works', async () => {
    const s = spec({ memoryMib: 256 });
    await provider.create(s);
    try {
      const df = await execText(provider, s.id, ['/bin/df', '-B1', '--output=size', '/tmp']);
      assert.equal(Number(df.stdout.trim().split('\n').pop()), 64 * 2 ** 20, 'a quarter of the memory');
      assert.equal((await execText(provider, s.id, ['/bin/sh', '-c', 'echo shared > /tmp/note'])).code, 0);
      assert.equal((await execText(provider, s.id, ['/bin/cat', '/tmp/note'])).stdout, 'shared\n', 'the next exec sees the same /tmp');
      const fill = await execText(provider, s.id, ['/bin/dd', 'if=/dev/zero', 'of=/tmp/fill', 'bs=1M', 'count=200']);
      assert.notEqual(fill.code, 0);
      assert.match(fill.stderr, /No space left on device/);

      const before = await provider.oomKills(s.id);
      const hog = await execText(provider, s.id, ['/usr/bin/perl', '-e', '$x = "a" x (400 * 1024 * 1024); print length $x']);
      assert.equal(hog.code, 137, 'killed by the kernel');
      assert.ok(await pollUntil(async () => (await provider.oomKills(s.id)) > before, 400, 25), 'the OOM kill is counted');
      assert.equal((await provider.status(s.id)).state, 'running', 'the sandbox is still running');
      const rec = JSON.parse(fs.readFileSync(path.join(root, s.id, 'sandbox.json'), 'utf8')) as { pid: number };
      assert.equal(fs.readFileSync(`/proc/${rec.pid}/oom_score_adj`, 'utf8').trim(), '0');
      assert.equal((await execText(provider, s.id, ['/bin/cat', '/proc/self/oom_score_adj'])).stdout, '500\n', 'an exec\'s processes are picked before the init');
      assert.equal((await execText(provider, s.id, ['/bin/echo', 'ok'])).stdout, 'ok\n', 'the next exec works, /tmp still full');

      await provider.sleep(s.id, 'deep');
      await provider.wake(s.id);
      assert.notEqual((await execText(provider, s.id, ['/bin/cat', '/tmp/note'])).code, 0, '/tmp is empty after a deep sleep');
      assert.equal(await provider.oomKills('lp-nonexistent-x').catch(() => 0), 0);
    } finally {
      await provider.destroy(s.id);
    }
  });

  test('without loop devices /workspace is a plain directory, said once in the log', async () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'info', destination: { write: (l: string) => void lines.push(l) } });
    const plain = createLocalProvider({ root, gatewayPort, logger, loopControl: '/nonexistent/loop-control' });
    const a = spec();
    const b = spec();
    try {
      await plain.create(a);
      await plain.create(b);
      assert.equal(lines.filter((l) => l.includes('no loop devices')).length, 1);
      assert.equal(isMounted(path.join(root, a.id, 'workspace')), false);
      assert.equal(fs.existsSync(path.join(root, a.id, 'workspace.img')), false);
      assert.equal((await execText(plain, a.id, ['/bin/sh', '-c', 'echo hi > /workspace/f && cat /workspace/f'])).stdout, 'hi\n');
    } finally {
      await plain.destroy(a.id);
      await plain.destroy(b.id);
    }
  });
});

function isMounted(mountPoint: string): boolean {
  return fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((l) => l.split(' ')[4] === mountPoint);
}
