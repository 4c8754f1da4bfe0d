// GET /hosts (an extension): each host's capacity, what its sandboxes hold (vCPUs and memory by
// awake ones, disk by all), how many are awake and asleep, and the runs waiting for room.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { testApp, type TestApp } from '../../../test/harness.ts';
import { makeHostRow, makeTeamRows, teamDirectory } from '../../../test/sandboxes.ts';
import { createDestroyTeamSandboxes } from '../../runtime/sandboxes/jobs/destroy-team.job.ts';
import { placeSandbox, PlacementError } from '../../runtime/sandboxes/placement.ts';

describe('hosts view', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp({ config: { SERVICE_SANDBOX_VCPU_OVERCOMMIT: '2' } });
    await t.db.updateTable('sandbox_hosts').set({ stopped_at: sql`now()` }).execute();
  });
  after(() => t.close());

  test('an operator sees each host\'s room, its awake and sleeping sandboxes, and the line of waiting runs; a viewer may not', async () => {
    const settings = { deadAfterSeconds: t.config.sandboxHostDeadAfter, subnet: t.config.sandboxSubnet, vcpuOvercommit: t.config.sandboxVcpuOvercommit };
    const host = await makeHostRow(t.db, { vcpus: 1, memoryMib: 1024, diskGib: 10 });
    const dead = await makeHostRow(t.db, { dead: true });
    const team = await makeTeamRows(t.db, { replicasMax: 3, vcpus: 1, memoryMib: 512, diskGib: 2 });
    const teams = teamDirectory(t.db);
    const a = await placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: 'c-a' });
    await placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: 'c-b' });
    await t.db.updateTable('sandboxes').set({ created: true, state: 'deep_sleep' }).where('id', '=', a.sandboxId).execute();
    await placeSandbox(t.db, settings, teams, { teamId: team.teamId, role: team.role, claimId: 'c-c' });
    const other = await makeTeamRows(t.db, { vcpus: 1, memoryMib: 512, diskGib: 2 });
    await assert.rejects(placeSandbox(t.db, settings, teams, { teamId: other.teamId, role: other.role, claimId: 'c-d', runId: 'run-d' }), (e) => e instanceof PlacementError && e.code === 'wait');

    const res = await t.request({ method: 'GET', url: '/api/v1/hosts', token: (await t.user('operator')).token });
    assert.equal(res.status, 200, res.text);
    const mine = res.body.hosts.find((h: { id: string }) => h.id === host);
    assert.deepEqual(
      { status: mine.status, capacity: mine.capacity, used: mine.used, sandboxes: mine.sandboxes, waiting: mine.waiting },
      { status: 'live', capacity: { vcpus: 1, vcpus_shared: 2, memory_mib: 1024, disk_gib: 10 }, used: { vcpus: 2, memory_mib: 1024, disk_gib: 6 }, sandboxes: { awake: 2, asleep: 1 }, waiting: 0 },
    );
    assert.equal(res.body.hosts.find((h: { id: string }) => h.id === dead).status, 'dead');
    assert.deepEqual(
      res.body.waiting.map((w: Record<string, unknown>) => [w.run_id, w.team, w.environment, w.memory_mib, w.host_id]),
      [['run-d', other.team, other.environment, 512, null]],
    );
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/hosts', token: (await t.user('viewer')).token })).status, 403);
    for (const tm of [team, other]) await createDestroyTeamSandboxes({ db: t.db, deadAfterSeconds: 30 }).destroyTeamSandboxes(tm.teamId);
    assert.deepEqual((await t.request({ method: 'GET', url: '/api/v1/hosts', token: t.adminToken })).body.waiting, [], 'an archived team waits no more');
  });
});
