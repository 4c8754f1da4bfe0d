// The sandbox host on a real database (both kinds): registration and what it serves, the
// life of a sandbox through the host (made on first use, idle sleep, woken by work with its
// processes intact, deep sleep, destroyed by the archive job), a failed create that leaves the
// host working and gives its capacity back, metrics, and recovery after the host process is
// killed with SIGKILL.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { openDatabase } from '../../db/database.ts';
import { migrateToLatest } from '../../db/migrate.ts';
import { Registry } from '../../metrics.ts';
import { captureLogger, testConfig, testDb, TEST_DATABASE_URL, type TestDb } from '../../../test/harness.ts';
import { execText, localSkipReason, makeTeamRows, randomSubnet, teamDirectory } from '../../../test/sandboxes.ts';
import { startSandboxHost, type SandboxHost } from './host.ts';
import { createDestroyTeamSandboxes } from './jobs/destroy-team.job.ts';
import { resourceTag } from './network.ts';
import type { PlacementError } from './placement.ts';
import { SandboxError } from './provider.ts';
import { createLocalProvider } from './providers/local.ts';
import { createMicrovmProvider } from './providers/microvm/index.ts';
import { pollUntil } from './system.ts';

const root = path.resolve(import.meta.dirname, '../../..');
const skip = localSkipReason();

/** Runs a command through the host to its end. */
const hostExec = (host: SandboxHost, id: string, argv: string[]) => execText({ exec: (sid, req) => host.exec(sid, req) }, id, argv);

describe('sandbox host registration', () => {
  let t: TestDb;
  before(async () => (t = await testDb()));
  after(() => t.close());

  test('a host without bubblewrap serves nothing, says which package to install, and a stopped host is gone at once', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chhost-'));
    const { logger, lines } = captureLogger();
    const config = testConfig({ SERVICE_SANDBOX_DIR: dir, SERVICE_SANDBOX_MICROVM_FALLBACK: 'local', SERVICE_SANDBOX_VCPUS: '3' });
    const host = await startSandboxHost({ config, db: t.db, teams: teamDirectory(t.db), logger, local: createLocalProvider({ root: dir, gatewayPort: 1, bwrap: '/nonexistent/bwrap' }) });
    try {
      const row = await t.db.selectFrom('sandbox_hosts').selectAll().where('id', '=', host.id).executeTakeFirstOrThrow();
      assert.deepEqual(row.providers, []);
      assert.equal(row.vcpus, 3);
      assert.equal(row.microvm_via_local, false, 'no fallback without a working local provider');
      assert.ok(lines.some((l) => /apt-get install bubblewrap/.test(l)), 'the log names the package');
      assert.equal(fs.readFileSync(path.join(dir, 'host-id'), 'utf8'), host.id, 'the id is kept for the next start');
    } finally {
      await host.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const stopped = await t.db.selectFrom('sandbox_hosts').select('stopped_at').where('id', '=', host.id).executeTakeFirstOrThrow();
    assert.ok(stopped.stopped_at);
  });
});

describe('sandbox host stopped with sandboxes running', () => {
  let t: TestDb;
  before(async () => (t = await testDb()));
  after(() => t.close());

  test('the stop of `crewhouse serve` says how many sandboxes keep running, that the next start adopts them, and how to remove them', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chhost-'));
    const { logger, lines } = captureLogger();
    const config = testConfig({ SERVICE_SANDBOX_DIR: dir });
    const host = await startSandboxHost({ config, db: t.db, teams: teamDirectory(t.db), logger, tickMs: 3_600_000, local: createLocalProvider({ root: dir, gatewayPort: 1, bwrap: '/nonexistent/bwrap' }) });
    try {
      const { teamId } = await makeTeamRows(t.db);
      // Three sandboxes of this host: two made (they outlive the stop), one whose create never finished.
      for (const [replica, created] of [[0, true], [1, true], [2, false]] as const) {
        await t.db.insertInto('sandboxes').values({ id: `sb_kept${replica}_${host.id.slice(5, 11)}`, team_id: teamId, role: 'lead', replica, provider: 'local', state: 'running', created, host_id: host.id }).execute();
      }
    } finally {
      await host.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const said = lines.map((l) => JSON.parse(l) as { msg: string; sandboxes?: number }).filter((l) => /keep running/.test(l.msg));
    assert.deepEqual(said.map((l) => [l.msg, l.sandboxes]), [['2 sandbox(es) keep running (with their workspaces and mounts); they are adopted at the next start. To remove them, stop the service and run crewhouse sandboxes destroy --all', 2]]);
  });

  test('a host stopped with no sandbox says nothing about them', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chhost-'));
    const { logger, lines } = captureLogger();
    const host = await startSandboxHost({ config: testConfig({ SERVICE_SANDBOX_DIR: dir }), db: t.db, teams: teamDirectory(t.db), logger, tickMs: 3_600_000, local: createLocalProvider({ root: dir, gatewayPort: 1, bwrap: '/nonexistent/bwrap' }) });
    await host.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    assert.ok(!lines.some((l) => /keep running/.test(l)), lines.join('\n'));
  });
});

describe('sandbox host running local sandboxes', { skip: skip ?? false }, () => {
  let t: TestDb;
  let dir: string;
  let gateway: net.Server;
  let host: SandboxHost;
  let metrics: Registry;
  let logs: string[];

  before(async () => {
    t = await testDb();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chhost-'));
    gateway = net.createServer((s) => s.end('gateway\n'));
    await new Promise<void>((r) => gateway.listen(0, '0.0.0.0', r));
    const config = testConfig({ SERVICE_SANDBOX_DIR: dir, SERVICE_SANDBOX_SUBNET: randomSubnet(), SERVICE_GATEWAY_PORT: String((gateway.address() as net.AddressInfo).port), SERVICE_SANDBOX_HOST_ADDRESS: 'host-under-test' });
    const captured = captureLogger();
    logs = captured.lines;
    metrics = new Registry();
    host = await startSandboxHost({ config, db: t.db, teams: teamDirectory(t.db), logger: captured.logger, metrics, tickMs: 3_600_000, caPem: '-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n' });
  });
  after(async () => {
    await host?.stop();
    const p = createLocalProvider({ root: dir, gatewayPort: 1 });
    for (const id of await p.list()) await p.destroy(id).catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
    gateway.close();
    await t.close();
  });

  test('made on first use, asleep when idle, woken by work, deep sleep, destroyed by the archive job', async () => {
    assert.deepEqual(host.providers, ['local']);
    const team = await makeTeamRows(t.db, { idleAfter: 0, deepAfter: 3600 });
    const placed = await host.place({ teamId: team.teamId, role: team.role, claimId: 'run-1' });
    assert.equal(placed.hostId, host.id);
    assert.equal(placed.hostAddress, 'host-under-test');
    const made = await host.ensureRunning(placed.sandboxId);
    assert.equal(made.coldBooted, true);

    const env = await hostExec(host, placed.sandboxId, ['/bin/sh', '-c', 'echo "$HTTPS_PROXY $SSL_CERT_FILE"; cat "$NODE_EXTRA_CA_CERTS"']);
    assert.equal(env.stdout.split('\n')[0], `http://${placed.network.hostAddress}:${(gateway.address() as net.AddressInfo).port} /etc/ssl/certs/ca-certificates.crt`);
    assert.match(env.stdout, /BEGIN CERTIFICATE/);
    await host.copyIn(placed.sandboxId, [{ path: 'context/a.md', content: 'doc' }]);
    // A command that runs on (each exec is its own PID namespace: nothing outlives its exec).
    const ac = new AbortController();
    const loop = await host.exec(placed.sandboxId, { argv: ['/bin/sh', '-c', 'while :; do date +%s%N > /workspace/tick; sleep 0.05; done'], signal: ac.signal });
    loop.stdout.resume();
    loop.stderr.resume();
    const tick = path.join(dir, placed.sandboxId, 'workspace', 'tick');
    assert.ok(await pollUntil(() => fs.existsSync(tick)));

    const state = async () => (await t.db.selectFrom('sandboxes').select('state').where('id', '=', placed.sandboxId).executeTakeFirstOrThrow()).state;
    await host.tick();
    assert.equal(await state(), 'running', 'a claimed sandbox does not sleep');
    await host.release('run-1');
    await host.tick();
    assert.equal(await state(), 'running', 'nor one with an exec running');
    const before = fs.readFileSync(tick, 'utf8');
    assert.ok(await pollUntil(() => fs.readFileSync(tick, 'utf8') !== before), 'the exec runs on');
    ac.abort();
    assert.equal(await loop.exit, 137);
    await host.tick();
    assert.equal(await state(), 'sleeping');
    assert.match(metrics.render(), /crewhouse_sandboxes\{provider="local",state="sleeping"\} 1/);

    assert.equal((await hostExec(host, placed.sandboxId, ['/bin/cat', 'context/a.md'])).stdout, 'doc', 'work wakes it');
    assert.equal(await state(), 'running');
    assert.match(metrics.render(), /crewhouse_sandbox_wake_seconds_count\{from="sleeping",provider="local"\} 1/);
    assert.match(metrics.render(), /crewhouse_sandbox_cold_boot_seconds_count\{provider="local"\} 1/);

    await t.db.updateTable('teams').set({ deep_sleep_after_seconds: 0 }).where('id', '=', team.teamId).execute();
    await host.tick();
    assert.equal(await state(), 'deep_sleep');
    const cold = await host.ensureRunning(placed.sandboxId);
    assert.equal(cold.coldBooted, true);
    assert.equal((await hostExec(host, placed.sandboxId, ['/bin/cat', 'context/a.md'])).stdout, 'doc', '/workspace outlives deep sleep');

    const job = createDestroyTeamSandboxes({ db: t.db, deadAfterSeconds: 30, host });
    await job.destroyTeamSandboxes(team.teamId);
    const row = await t.db.selectFrom('sandboxes').select(['state', 'released_at']).where('id', '=', placed.sandboxId).executeTakeFirstOrThrow();
    assert.equal(row.state, 'destroyed');
    assert.ok(row.released_at, 'its host freed it');
    assert.equal(fs.existsSync(path.join(dir, placed.sandboxId)), false, 'its disk is freed');
    assert.equal(fs.existsSync(`/run/netns/chs-${resourceTag(placed.sandboxId)}`), false);
    await assert.rejects(host.exec(placed.sandboxId, { argv: ['/bin/true'] }), (e: SandboxError) => e.code === 'not_found');
  });

  test('a sandbox that cannot be made fails its work with the cause, in the log too; the host goes on', async () => {
    const team = await makeTeamRows(t.db);
    const placed = await host.place({ teamId: team.teamId, role: team.role, claimId: 'run-bad' });
    await t.db.updateTable('sandboxes').set({ host_address: '10.999.1.1' }).where('id', '=', placed.sandboxId).execute();
    await assert.rejects(host.ensureRunning(placed.sandboxId), (e: SandboxError) => e instanceof SandboxError && /could not be made/.test(e.message));
    const row = await t.db.selectFrom('sandboxes').select(['failure', 'created']).where('id', '=', placed.sandboxId).executeTakeFirstOrThrow();
    assert.match(row.failure ?? '', /could not be made/);
    assert.equal(row.created, false);
    assert.ok(logs.some((l) => l.includes(placed.sandboxId) && /could not be made or woken/.test(l)));
    assert.equal(fs.existsSync(path.join(dir, placed.sandboxId)), false, 'nothing is left of it');

    const good = await makeTeamRows(t.db);
    const ok = await host.place({ teamId: good.teamId, role: good.role, claimId: 'run-good' });
    assert.equal((await hostExec(host, ok.sandboxId, ['/bin/echo', 'fine'])).stdout, 'fine\n');
    for (const tm of [team, good]) await createDestroyTeamSandboxes({ db: t.db, deadAfterSeconds: 30, host }).destroyTeamSandboxes(tm.teamId);
  });
});

describe('sandbox host with little room', { skip: skip ?? false }, () => {
  test('a sandbox that could not be made (a microVM image never built) gives its share of the host back at once; an idle one sleeps early for a run that waits for room', async () => {
    const t = await testDb();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chhost-'));
    const vmDir = fs.mkdtempSync(path.join(os.tmpdir(), 'chvm-'));
    const microvmDir = path.join(vmDir, 'sandboxes');
    const imagesDir = path.join(vmDir, 'images');
    fs.mkdirSync(imagesDir);
    const { logger, lines } = captureLogger();
    const metrics = new Registry();
    const config = testConfig({ SERVICE_SANDBOX_DIR: dir, SERVICE_SANDBOX_SUBNET: randomSubnet(), SERVICE_SANDBOX_VCPUS: '2', SERVICE_SANDBOX_VCPU_OVERCOMMIT: '1', SERVICE_SANDBOX_MEMORY_MIB: '512', SERVICE_SANDBOX_DISK_GIB: '20' });
    const microvm = createMicrovmProvider({ dir: microvmDir, imagesDir, logger, snapshotBudgetBytes: 1 });
    const woken: string[][] = [];
    const host = await startSandboxHost({ config, db: t.db, teams: teamDirectory(t.db), logger, metrics, microvm, microvmUsable: true, tickMs: 3_600_000, wake: async (ids) => void woken.push(ids) });
    const job = createDestroyTeamSandboxes({ db: t.db, deadAfterSeconds: 30, host });
    const teams: Array<{ teamId: number }> = [];
    try {
      assert.deepEqual([...host.providers].sort(), ['local', 'microvm']);
      const vm = await makeTeamRows(t.db, { provider: 'microvm' });
      teams.push(vm);
      const failed = await host.place({ teamId: vm.teamId, role: vm.role, claimId: 'run-vm' });
      assert.equal(failed.provider, 'microvm');
      await assert.rejects(host.ensureRunning(failed.sandboxId), (e: SandboxError) => e.code === 'image' && /no microVM image/.test(e.message));
      // The run that needed it fails with that cause, and ends its claim (the engine's part).
      await host.release('run-vm');
      const row = await t.db.selectFrom('sandboxes').select(['state', 'created', 'failure', 'released_at']).where('id', '=', failed.sandboxId).executeTakeFirstOrThrow();
      assert.equal(row.state, 'destroyed', 'nothing was made: it holds no place on the host');
      assert.equal(row.created, false);
      assert.match(row.failure ?? '', /no microVM image/, 'the cause is kept');
      assert.ok(row.released_at, 'and there is nothing left for the host to free');
      assert.equal(fs.existsSync(path.join(microvmDir, failed.sandboxId)), false);
      await assert.rejects(host.ensureRunning(failed.sandboxId), (e: SandboxError) => e.code === 'failed' && /could not be made \(.*no microVM image/.test(e.message), 'work still holding it hears why');

      // The role's next work gets a new sandbox, made anew (failing again while no image is built).
      const again = await host.place({ teamId: vm.teamId, role: vm.role, claimId: 'run-vm-2' });
      assert.notEqual(again.sandboxId, failed.sandboxId);
      assert.equal(again.replica, 0);
      await assert.rejects(host.ensureRunning(again.sandboxId), (e: SandboxError) => e.code === 'image');
      await host.release('run-vm-2');

      // An idle team's sandbox sleeps (a frozen cgroup: it keeps its memory, gives its vCPU back); the failed ones hold none.
      const idle = await makeTeamRows(t.db, { idleAfter: 0 });
      teams.push(idle);
      const asleep = await host.place({ teamId: idle.teamId, role: idle.role, claimId: 'run-idle' });
      await host.ensureRunning(asleep.sandboxId);
      await host.release('run-idle');
      await host.tick();
      assert.equal((await t.db.selectFrom('sandboxes').select('state').where('id', '=', asleep.sandboxId).executeTakeFirstOrThrow()).state, 'sleeping');
      assert.doesNotMatch(metrics.render(), /crewhouse_sandboxes\{provider="microvm"/, 'the host holds no failed sandbox');

      // Another team's run finds room: 2 vCPUs, one sleeping sandbox.
      const other = await makeTeamRows(t.db);
      teams.push(other);
      const placed = await host.place({ teamId: other.teamId, role: other.role, claimId: 'run-other' });
      assert.equal(placed.hostId, host.id);
      assert.equal((await hostExec(host, placed.sandboxId, ['/bin/echo', 'fine'])).stdout, 'fine\n');
      // A third finds a vCPU (the sleeping one gave its back) but no memory (a frozen cgroup keeps its own): it waits.
      const third = await makeTeamRows(t.db);
      teams.push(third);
      await assert.rejects(host.place({ teamId: third.teamId, role: third.role, claimId: 'run-third', runId: 'run-third' }), (e: PlacementError) => e.code === 'wait' && /sandboxes hold 512 of its 512 MiB/.test(e.message));
      // The host's sweep puts the idle sandbox into deep sleep early (a frozen one would keep its memory) and queues the waiting run.
      await host.tick();
      assert.equal((await t.db.selectFrom('sandboxes').select('state').where('id', '=', asleep.sandboxId).executeTakeFirstOrThrow()).state, 'deep_sleep');
      assert.deepEqual(woken.at(-1), ['run-third']);
      assert.ok(lines.some((l) => l.includes(asleep.sandboxId) && l.includes('went to sleep early')));
      const placedThird = await host.place({ teamId: third.teamId, role: third.role, claimId: 'run-third', runId: 'run-third' });
      assert.equal(placedThird.hostId, host.id);
      // The busy sandbox is never put to sleep for it.
      assert.equal((await t.db.selectFrom('sandboxes').select('state').where('id', '=', placed.sandboxId).executeTakeFirstOrThrow()).state, 'running');
      assert.ok(lines.some((l) => l.includes(failed.sandboxId) && /could not be made or woken/.test(l)));
    } finally {
      for (const tm of teams) await job.destroyTeamSandboxes(tm.teamId).catch(() => {});
      await host.stop();
      const p = createLocalProvider({ root: dir, gatewayPort: 1 });
      for (const id of await p.list()) await p.destroy(id).catch(() => {});
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(vmDir, { recursive: true, force: true });
      await t.close();
    }
  });
});

describe('sandbox host that looked dead', { skip: skip ?? false }, () => {
  test('a sandbox moved to another host meanwhile is removed here on the next heartbeat', async () => {
    const t = await testDb();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chhost-'));
    const { logger } = captureLogger();
    const host = await startSandboxHost({ config: testConfig({ SERVICE_SANDBOX_DIR: dir, SERVICE_SANDBOX_SUBNET: randomSubnet() }), db: t.db, teams: teamDirectory(t.db), logger, tickMs: 3_600_000 });
    const provider = createLocalProvider({ root: dir, gatewayPort: 1 });
    try {
      const team = await makeTeamRows(t.db);
      const placed = await host.place({ teamId: team.teamId, role: team.role, claimId: 'run-moved' });
      await host.ensureRunning(placed.sandboxId);
      assert.deepEqual(await provider.list(), [placed.sandboxId]);
      await t.db.updateTable('sandboxes').set({ host_id: 'host_elsewhere' }).where('id', '=', placed.sandboxId).execute();
      await host.tick();
      assert.deepEqual(await provider.list(), []);
      assert.equal(fs.existsSync(`/run/netns/chs-${resourceTag(placed.sandboxId)}`), false);
    } finally {
      await host.stop();
      for (const id of await provider.list()) await provider.destroy(id).catch(() => {});
      fs.rmSync(dir, { recursive: true, force: true });
      await t.close();
    }
  });
});

describe('sandbox host killed with SIGKILL', { skip: skip ?? false }, () => {
  test('on restart it adopts the sandboxes still running (their processes outlived it) and removes those archived meanwhile', async () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'chkill-'));
    fs.chmodSync(work, 0o711);
    const sandboxDir = path.join(work, 'sandboxes');
    const dataDir = path.join(work, 'data');
    const pg = TEST_DATABASE_URL ? await testDb() : null;
    const subnet = randomSubnet();
    const args = { dbUrl: pg?.url ?? null, schema: pg?.schema ?? null, dataDir, sandboxDir, subnet };
    const child = spawn(path.join(root, 'node_modules', '.bin', 'node'), [path.join(root, 'test', 'sandbox-host-child.ts'), JSON.stringify(args)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let host: SandboxHost | null = null;
    let closeDb = async () => {};
    try {
      const first = await new Promise<string>((resolve, reject) => {
        readline.createInterface({ input: child.stdout! }).once('line', resolve);
        child.once('exit', (code) => reject(new Error(`the child host exited (${code}) before it was ready`)));
      });
      const ready = JSON.parse(first) as { kept: string; archived: string; archivedTeam: number; hostId: string };
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));

      const opened = pg ? { db: pg.db, close: () => pg.close() } : await openDatabase({ databaseUrl: null, dataDir });
      closeDb = opened.close;
      const db = opened.db;
      if (!pg) await migrateToLatest(db);
      // While the host was dead, a team was archived: its sandbox is marked destroyed.
      await db.updateTable('sandboxes').set({ state: 'destroyed' }).where('team_id', '=', ready.archivedTeam).execute();
      // And a create cut short by the kill left a directory without its record.
      fs.mkdirSync(path.join(sandboxDir, 'sb_cutshort', 'workspace'), { recursive: true });

      const { logger } = captureLogger();
      const config = testConfig({ SERVICE_SANDBOX_DIR: sandboxDir, SERVICE_SANDBOX_SUBNET: subnet });
      host = await startSandboxHost({ config, db, teams: teamDirectory(db), logger, tickMs: 3_600_000 });
      assert.equal(host.id, ready.hostId, 'the same host');
      const provider = createLocalProvider({ root: sandboxDir, gatewayPort: 1 });
      assert.deepEqual(await provider.list(), [ready.kept]);
      assert.equal(fs.existsSync(`/run/netns/chs-${resourceTag(ready.archived)}`), false, 'nothing of the archived sandbox leaks');
      const row = await db.selectFrom('sandboxes').select(['state', 'created']).where('id', '=', ready.kept).executeTakeFirstOrThrow();
      assert.deepEqual(row, { state: 'running', created: true });
      const tick = path.join(sandboxDir, ready.kept, 'workspace', 'tick');
      const seen = fs.readFileSync(tick, 'utf8');
      assert.ok(await pollUntil(() => fs.readFileSync(tick, 'utf8') !== seen), 'the process started under the old host still runs');
      const released = await db.selectFrom('sandboxes').select('released_at').where('id', '=', ready.archived).executeTakeFirstOrThrow();
      assert.ok(released.released_at);
      await host.destroy(ready.kept);
      assert.deepEqual(await provider.list(), []);
    } finally {
      child.kill('SIGKILL');
      await host?.stop().catch(() => {});
      const p = createLocalProvider({ root: sandboxDir, gatewayPort: 1 });
      for (const id of await p.list()) await p.destroy(id).catch(() => {});
      await closeDb();
      fs.rmSync(work, { recursive: true, force: true });
    }
  });
});
