// Placement on the database (both kinds): a role's replicas.max and concurrent_runs, host
// capacity, the same claim answering the same sandbox, placements racing (each other, and the
// team's archive), hosted refused
// with the environment's name, microvm served by local only on a host allowed to, and a dead
// host's sandboxes re-placed when their work resumes.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../config.ts';
import { testDb, type TestDb } from '../../../test/harness.ts';
import { makeHostRow, makeTeamRows, randomSubnet, testServices } from '../../../test/sandboxes.ts';
import { systemActor } from '../../audit/audit.ts';
import { createDestroyTeamSandboxes, destroyTeamJob } from './jobs/destroy-team.job.ts';
import { schemaProblem } from '../../queue/queue.ts';
import { canTakeWork, placeSandbox, PlacementError, releaseClaim, type PlacementSettings, type TeamDirectory } from './placement.ts';

describe('sandbox placement', () => {
  let t: TestDb;
  let settings: PlacementSettings;
  let teams: TeamDirectory;
  let services: ReturnType<typeof testServices>;
  const claim = () => `run-${Math.random().toString(36).slice(2)}`;

  before(async () => {
    t = await testDb();
    services = testServices(t.db);
    teams = services.sandboxDirectory;
    // vCPUs not overcommitted here, so the arithmetic below reads plainly (the ratio has its own test).
    settings = { deadAfterSeconds: 30, subnet: loadConfig({ SERVICE_SANDBOX_SUBNET: randomSubnet() }).sandboxSubnet, vcpuOvercommit: 1 };
    // Every test here starts from no live host but its own.
    await t.db.deleteFrom('sandbox_hosts').execute();
  });
  after(() => t.close());

  const expectPlacementError = (code: string, pattern?: RegExp) => (err: unknown) => err instanceof PlacementError && err.code === code && (!pattern || pattern.test(err.message));

  test('replicas.max and concurrent_runs bound a role; the same claim answers the same sandbox; a released claim frees room', async () => {
    await makeHostRow(t.db);
    const team = await makeTeamRows(t.db, { replicasMax: 2, concurrentRuns: 2 });
    const claims = [claim(), claim(), claim(), claim()];
    const placed = [];
    for (const c of claims) placed.push(await placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: c }));
    const bySandbox = new Map<string, number>();
    for (const p of placed) bySandbox.set(p.sandboxId, (bySandbox.get(p.sandboxId) ?? 0) + 1);
    assert.deepEqual([...bySandbox.values()], [2, 2], 'two replicas with two runs each');
    assert.deepEqual(placed.map((p) => p.replica).sort(), [0, 0, 1, 1]);
    assert.notEqual(placed[0].network.sandboxAddress, placed[2].network.sandboxAddress);

    const again = await placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: claims[0] });
    assert.equal(again.sandboxId, placed[0].sandboxId);

    const fifth = claim();
    await assert.rejects(placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: fifth }), expectPlacementError('full', /2 replica\(s\) with 2 concurrent run\(s\)/));
    await releaseClaim(t.db, claims[1]);
    const freed = await placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: fifth });
    assert.equal(freed.sandboxId, placed[1].sandboxId);
    await createDestroyTeamSandboxes({ db: t.db, deadAfterSeconds: 30 }).destroyTeamSandboxes(team.teamId);
  });

  test('capacity: a host takes sandboxes while it has room; a claim that finds none waits in line and gets the next room; one that can never fit fails', async () => {
    await t.db.updateTable('sandbox_hosts').set({ stopped_at: sql`now()` }).execute();
    const small = await makeHostRow(t.db, { vcpus: 4, memoryMib: 4096, diskGib: 50 });
    const team = await makeTeamRows(t.db, { replicasMax: 5, concurrentRuns: 1, vcpus: 2, memoryMib: 1024, diskGib: 10 });
    const a = await placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: claim() });
    const b = await placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: claim() });
    assert.equal(a.hostId, small);
    assert.equal(b.hostId, small);
    // The host's vCPUs are all held: the third waits, in line, and says for what.
    const third = claim();
    await assert.rejects(
      placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: third, runId: 'run-third' }),
      expectPlacementError('wait', new RegExp(`"${team.environment}" \\(2 vCPU, 1024 MiB, 10 GiB\\): on the host with the most room, awake sandboxes hold 4 of the 4 vCPUs it shares out\\. This run waits its turn`)),
    );
    const fourth = claim();
    await assert.rejects(placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: fourth, runId: 'run-fourth' }), expectPlacementError('wait', /1 run\(s\) waited before this one/));
    const waits = await t.db.selectFrom('sandbox_waits').select(['claim_id', 'run_id', 'vcpus']).orderBy('since').execute();
    assert.deepEqual(waits.map((w) => w.run_id), ['run-third', 'run-fourth']);

    // A sandbox in deep sleep holds only its disk: the oldest waiter takes the room; the younger still waits.
    await t.db.updateTable('sandboxes').set({ state: 'deep_sleep', created: true }).where('id', '=', a.sandboxId).execute();
    await assert.rejects(placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: fourth, runId: 'run-fourth' }), expectPlacementError('wait', /1 run\(s\) waited before this one/));
    assert.equal((await placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: third })).hostId, small);
    assert.deepEqual((await t.db.selectFrom('sandbox_waits').select('run_id').execute()).map((w) => w.run_id), ['run-fourth'], 'a placed claim leaves the line');
    // Waking the sleeping sandbox needs its room back: its claim waits too, for that host.
    const wake = claim();
    await t.db.updateTable('sandboxes').set({ state: 'running' }).where('id', '=', b.sandboxId).execute();
    await t.db.insertInto('sandbox_claims').values({ id: wake, sandbox_id: a.sandboxId }).execute();
    await assert.rejects(placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: wake }), expectPlacementError('wait', /on the host of its sleeping sandbox/));
    assert.equal((await t.db.selectFrom('sandbox_waits').select('host_id').where('claim_id', '=', wake).executeTakeFirstOrThrow()).host_id, small);

    // Another host with room serves the line in order.
    const big = await makeHostRow(t.db, { vcpus: 2, memoryMib: 2048, diskGib: 50 });
    assert.equal((await placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: fourth })).hostId, big);
    await releaseClaim(t.db, wake);
    assert.equal((await t.db.selectFrom('sandbox_waits').select('claim_id').execute()).length, 0, 'a released claim leaves the line');

    // Larger than any host could ever hold: a failure at once, saying what to change.
    const huge = await makeTeamRows(t.db, { replicasMax: 1, vcpus: 1, memoryMib: 8192, diskGib: 1 });
    await assert.rejects(placeSandbox(t.db, settings, teams, { teamId: huge.teamId, role: huge.role, claimId: claim() }), expectPlacementError('capacity', /is larger than any live sandbox host running local environments can ever hold \(the largest offers 4 vCPU, 4096 MiB, 50 GiB\): make the environment smaller/));
    // Destroyed sandboxes free their room.
    await createDestroyTeamSandboxes({ db: t.db, deadAfterSeconds: 30 }).destroyTeamSandboxes(team.teamId);
    const other = await makeTeamRows(t.db, { replicasMax: 1, vcpus: 4, memoryMib: 4096, diskGib: 50 });
    assert.equal((await placeSandbox(t.db, settings, teams, { teamId: other.teamId, role: other.role, claimId: claim() })).hostId, small);
    for (const tm of [other, huge]) await createDestroyTeamSandboxes({ db: t.db, deadAfterSeconds: 30 }).destroyTeamSandboxes(tm.teamId);
  });

  test('vCPUs are shared by the overcommit ratio; memory is held by awake sandboxes (and a local one in light sleep), disk by all', async () => {
    await t.db.updateTable('sandbox_hosts').set({ stopped_at: sql`now()` }).execute();
    const host = await makeHostRow(t.db, { vcpus: 1, memoryMib: 2048, diskGib: 3 });
    const shared = { ...settings, vcpuOvercommit: 2 };
    const team = await makeTeamRows(t.db, { replicasMax: 4, concurrentRuns: 1, vcpus: 1, memoryMib: 1024, diskGib: 1 });
    const a = await placeSandbox(t.db, shared, teams, { teamId: team.teamId, role: team.role, claimId: claim() });
    const b = await placeSandbox(t.db, shared, teams, { teamId: team.teamId, role: team.role, claimId: claim() });
    assert.deepEqual([a.hostId, b.hostId], [host, host], 'two 1-vCPU sandboxes on one vCPU shared twice');
    await assert.rejects(placeSandbox(t.db, shared, teams, { teamId: team.teamId, role: team.role, claimId: claim() }), expectPlacementError('wait', /hold 2048 of its 2048 MiB of memory, and awake sandboxes hold 2 of the 2 vCPUs/));
    // A local sandbox in light sleep is a frozen cgroup: its memory stays held, its vCPU is free.
    await t.db.updateTable('sandboxes').set({ state: 'sleeping', created: true }).where('id', '=', a.sandboxId).execute();
    await assert.rejects(placeSandbox(t.db, shared, teams, { teamId: team.teamId, role: team.role, claimId: claim() }), (e) => e instanceof PlacementError && e.code === 'wait' && /2048 of its 2048 MiB/.test(e.message) && !/vCPU/.test(e.message.split(':').slice(1).join(':')));
    await t.db.deleteFrom('sandbox_waits').execute();
    // In deep sleep it holds only its disk.
    await t.db.updateTable('sandboxes').set({ state: 'deep_sleep' }).where('id', '=', a.sandboxId).execute();
    const c = await placeSandbox(t.db, shared, teams, { teamId: team.teamId, role: team.role, claimId: claim() });
    assert.equal(c.hostId, host);
    // Disk is held by all, asleep or not: three 1 GiB sandboxes fill 3 GiB.
    await t.db.updateTable('sandboxes').set({ state: 'deep_sleep', created: true }).where('team_id', '=', team.teamId).execute();
    await assert.rejects(placeSandbox(t.db, shared, teams, { teamId: team.teamId, role: team.role, claimId: claim() }), expectPlacementError('wait', /its sandboxes hold 3 of its 3 GiB of disk/));
    await t.db.deleteFrom('sandbox_waits').execute();
    await createDestroyTeamSandboxes({ db: t.db, deadAfterSeconds: 30 }).destroyTeamSandboxes(team.teamId);
  });

  test('placements that race never overshoot a role or a host, and never share a link', async () => {
    await t.db.updateTable('sandbox_hosts').set({ stopped_at: sql`now()` }).execute();
    await makeHostRow(t.db, { vcpus: 6, memoryMib: 65536, diskGib: 1000 });
    const team = await makeTeamRows(t.db, { replicasMax: 4, concurrentRuns: 2, vcpus: 1 });
    const other = await makeTeamRows(t.db, { replicasMax: 10, concurrentRuns: 1, vcpus: 1 });
    const attempts = [
      ...Array.from({ length: 12 }, () => placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: claim() })),
      ...Array.from({ length: 6 }, () => placeSandbox(t.db, settings, teams, { teamId: other.teamId, role: other.role, claimId: claim() })),
    ];
    const results = await Promise.allSettled(attempts);
    const ok = results.filter((r) => r.status === 'fulfilled').map((r) => (r as PromiseFulfilledResult<Awaited<(typeof attempts)[number]>>).value);
    const failed = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason);
    for (const f of failed) assert.ok(f instanceof PlacementError && ['full', 'wait'].includes(f.code), String(f));
    const rows = await t.db.selectFrom('sandboxes').select(['id', 'team_id', 'sandbox_address', 'vcpus']).where('state', '<>', 'destroyed').where('team_id', 'in', [team.teamId, other.teamId]).execute();
    assert.ok(rows.reduce((n, r) => n + r.vcpus, 0) <= 6, 'the host holds at most its vCPUs');
    assert.ok(rows.filter((r) => r.team_id === team.teamId).length <= 4);
    assert.equal(new Set(rows.map((r) => r.sandbox_address)).size, rows.length, 'every sandbox has its own link');
    const perSandbox = new Map<string, number>();
    for (const p of ok) perSandbox.set(p.sandboxId, (perSandbox.get(p.sandboxId) ?? 0) + 1);
    for (const [id, n] of perSandbox) assert.ok(n <= (rows.find((r) => r.id === id)!.team_id === team.teamId ? 2 : 1), `claims on ${id}`);
    // Demand (ten sandboxes) exceeds the host (six vCPUs): whatever the order, it ends full.
    assert.equal(rows.length, 6);
    const claims = await t.db.selectFrom('sandbox_claims').select('sandbox_id').where('sandbox_id', 'in', rows.map((r) => r.id)).execute();
    assert.equal(claims.length, ok.length, 'every answered placement holds exactly one claim');
    for (const tm of [team, other]) await createDestroyTeamSandboxes({ db: t.db, deadAfterSeconds: 30 }).destroyTeamSandboxes(tm.teamId);
    assert.equal((await t.db.selectFrom('sandbox_waits').select('claim_id').execute()).length, 0, 'an archived team waits no more');
  });

  test('an archive racing placements leaves none of the team\'s sandboxes alive: each placement lands before it (and is destroyed with the team) or after it (and is refused)', async () => {
    await t.db.updateTable('sandbox_hosts').set({ stopped_at: sql`now()` }).execute();
    await makeHostRow(t.db, { vcpus: 64, memoryMib: 65536, diskGib: 1000 });
    const team = await makeTeamRows(t.db, { replicasMax: 12, concurrentRuns: 1, vcpus: 1 });
    const { row_version } = await services.teams.get(team.team);
    const placing = Array.from({ length: 12 }, () => placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: claim() }));
    const [archived, ...results] = await Promise.allSettled([services.teams.archive(systemActor('test'), team.team, row_version), ...placing]);
    assert.equal(archived.status, 'fulfilled', String((archived as PromiseRejectedResult).reason));
    for (const r of results) if (r.status === 'rejected') assert.ok(r.reason instanceof PlacementError && r.reason.code === 'unknown_role', String(r.reason));
    const alive = await t.db.selectFrom('sandboxes').select('id').where('team_id', '=', team.teamId).where('state', '<>', 'destroyed').execute();
    assert.deepEqual(alive, [], 'every sandbox of the archived team is marked destroyed');
    await assert.rejects(placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: claim() }), expectPlacementError('unknown_role'));
    await createDestroyTeamSandboxes({ db: t.db, deadAfterSeconds: 30 }).destroyTeamSandboxes(team.teamId);
  });

  test('hosted fails with the environment named; microvm needs a host that runs it, or one allowed to serve it locally', async () => {
    await t.db.updateTable('sandbox_hosts').set({ stopped_at: sql`now()` }).execute();
    await makeHostRow(t.db, { providers: ['local'] });
    const hosted = await makeTeamRows(t.db, { provider: 'hosted', vcpus: null, memoryMib: null, diskGib: null });
    await assert.rejects(placeSandbox(t.db, settings, teams, { teamId: hosted.teamId, role: hosted.role, claimId: claim() }), expectPlacementError('hosted', new RegExp(`environment "${hosted.environment}", whose provider is hosted`)));
    assert.deepEqual(await canTakeWork(t.db, settings, teams, hosted.team), { ok: true, reason: null });

    const vm = await makeTeamRows(t.db, { provider: 'microvm' });
    await assert.rejects(placeSandbox(t.db, settings, teams, { teamId: vm.teamId, role: vm.role, claimId: claim() }), expectPlacementError('no_host', /no live sandbox host runs microvm/));
    assert.equal((await canTakeWork(t.db, settings, teams, vm.team)).ok, false);
    const fallback = await makeHostRow(t.db, { providers: ['local', 'microvm'], microvmViaLocal: true });
    const p = await placeSandbox(t.db, settings, teams, { teamId: vm.teamId, role: vm.role, claimId: claim() });
    assert.equal(p.hostId, fallback);
    assert.equal(p.provider, 'local', 'the sandbox says which provider really runs it');
    assert.equal((await canTakeWork(t.db, settings, teams, vm.team)).ok, true);
    assert.equal((await canTakeWork(t.db, settings, teams, 'no-such-team')).ok, true, 'an unknown team is the route\'s 404, not a 503');
    for (const tm of [hosted, vm]) await createDestroyTeamSandboxes({ db: t.db, deadAfterSeconds: 30 }).destroyTeamSandboxes(tm.teamId);
  });

  test('a dead host: its sandboxes move to a live host when their work resumes; with no live host the team cannot take work', async () => {
    await t.db.updateTable('sandbox_hosts').set({ stopped_at: sql`now()` }).execute();
    const first = await makeHostRow(t.db);
    const team = await makeTeamRows(t.db, { replicasMax: 1, concurrentRuns: 1 });
    const run = claim();
    const before = await placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: run });
    assert.equal(before.hostId, first);
    await t.db.updateTable('sandboxes').set({ created: true, state: 'running' }).where('id', '=', before.sandboxId).execute();

    await t.db.updateTable('sandbox_hosts').set({ heartbeat_at: sql`now() - interval '31 seconds'` }).where('id', '=', first).execute();
    assert.deepEqual(await canTakeWork(t.db, settings, teams, team.team), { ok: false, reason: `no live sandbox host runs local environments (environment "${team.environment}" of the lead role)` });
    await assert.rejects(placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: run }), expectPlacementError('no_host'));

    const second = await makeHostRow(t.db);
    assert.equal((await canTakeWork(t.db, settings, teams, team.team)).ok, true);
    const after = await placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: run });
    assert.equal(after.sandboxId, before.sandboxId, 'the same sandbox, re-placed');
    assert.equal(after.hostId, second);
    assert.equal(after.replaced, true);
    assert.equal(after.created, false, 'the new host makes it again');
    const row = await t.db.selectFrom('sandboxes').select(['state', 'host_id']).where('id', '=', after.sandboxId).executeTakeFirstOrThrow();
    assert.deepEqual(row, { state: 'starting', host_id: second });

    // Archiving while a host is dead: rows are released here; the dead host cleans up if it returns.
    const job = createDestroyTeamSandboxes({ db: t.db, deadAfterSeconds: 30 });
    await t.db.updateTable('sandbox_hosts').set({ heartbeat_at: sql`now() - interval '31 seconds'` }).where('id', '=', second).execute();
    await job.destroyTeamSandboxes(team.teamId);
    await job.destroyTeamSandboxes(team.teamId);
    const gone = await t.db.selectFrom('sandboxes').select(['state', 'released_at']).where('team_id', '=', team.teamId).execute();
    assert.ok(gone.every((g) => g.state === 'destroyed' && g.released_at !== null));
    assert.equal((await t.db.selectFrom('sandbox_claims').select('id').where('id', '=', run).execute()).length, 0);
    assert.match(schemaProblem(destroyTeamJob.payload, { team_id: 'x' }) ?? '', /team_id/);
  });
});
