// A root user clones into /root (mode 0700 on Debian), which the unprivileged sandbox user cannot
// pass through: the default sandbox directory then moves to an open place and the start says so;
// a SERVICE_SANDBOX_DIR the operator chose is kept, the local provider refuses, and a task given
// to a team that needs it is answered 503 saying what is closed and what to do.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { makeAgent, makeEnvironment, makeTeam, makeTemplate } from '../../../test/factories.ts';
import { captureLogger, testApp } from '../../../test/harness.ts';
import { localSkipReason, teamDirectory } from '../../../test/sandboxes.ts';
import { startSandboxHost } from './host.ts';
import { createLocalProvider } from './providers/local.ts';
import { closedAbove, reachableSandboxDir } from './sandbox-dir.ts';

const skip = process.getuid?.() === 0 ? localSkipReason() : 'needs root (the sandbox directory is moved only for a root user)';

describe('the sandbox directory under a directory closed to the sandbox user', { skip: skip ?? false }, () => {
  test('the default one moves to an open place, saying so; one the operator chose stays', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'chhome-'));
    const open = fs.mkdtempSync(path.join(os.tmpdir(), 'chopen-'));
    fs.chmodSync(open, 0o755);
    try {
      assert.equal(fs.statSync(home).mode & 0o777, 0o700, 'like /root');
      const dataDir = path.join(home, 'crewhouse', 'data');
      const base = path.join(open, 'lib');
      const moved = await reachableSandboxDir({ dataDir, sandboxDir: path.join(dataDir, 'sandboxes') }, base);
      assert.ok(moved.dir && moved.dir.startsWith(`${base}/sandboxes-`), String(moved.dir));
      assert.equal(await closedAbove(path.join(moved.dir, 'sb_x')), null, 'the sandbox user reaches it');
      assert.match(moved.moved ?? '', new RegExp(`^sandboxes live in ${moved.dir}: ${home} \\(above the data directory\\) is closed to the unprivileged sandbox user \\(mode 0700\\); set SERVICE_SANDBOX_DIR to choose another place$`));
      // The same data directory finds the same place again (the host keeps its id there).
      assert.equal((await reachableSandboxDir({ dataDir, sandboxDir: path.join(dataDir, 'sandboxes') }, base)).dir, moved.dir);
      const chosen = path.join(home, 'mine');
      assert.deepEqual(await reachableSandboxDir({ dataDir, sandboxDir: chosen }, base), { dir: chosen, moved: null });
      const fine = path.join(open, 'data');
      assert.deepEqual(await reachableSandboxDir({ dataDir: fine, sandboxDir: path.join(fine, 'sandboxes') }, base), { dir: path.join(fine, 'sandboxes'), moved: null });
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
      fs.rmSync(open, { recursive: true, force: true });
    }
  });

  test('where it cannot move, the start says why in one line and a task is answered 503 with the cause and the fix', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'chhome-'));
    const t = await testApp({ modelProxy: true });
    const { logger, lines } = captureLogger();
    const dir = path.join(home, 'sandboxes');
    await t.db.updateTable('sandbox_hosts').set({ stopped_at: sql`now()` }).execute();
    const host = await startSandboxHost({
      config: { ...t.config, sandboxDir: dir },
      db: t.db,
      teams: teamDirectory(t.db),
      logger,
      local: createLocalProvider({ root: dir, gatewayPort: 1, logger }),
      tickMs: 3_600_000,
    });
    try {
      assert.deepEqual(host.providers, []);
      const said = lines.filter((l) => l.includes('the local sandbox provider cannot run on this host'));
      assert.equal(said.length, 1, 'one line');
      assert.match(said[0], /closed to the unprivileged sandbox user \(mode 0700\).*set SERVICE_SANDBOX_DIR to a directory whose parents every user may enter/);

      const env = await makeEnvironment(t, { provider: 'local', vcpus: 1, memory_mib: 256, disk_gib: 1 });
      const agent = await makeAgent(t);
      const tpl = await makeTemplate(t, { lead: 'lead', roles: { lead: { agent: agent.name, model: 'fast', vm: env.name } }, pipeline: {} }, ['lead']);
      const team = await makeTeam(t, { template: tpl.name });
      const res = await t.request({ method: 'POST', url: `/api/v1/teams/${team.name}/tasks`, token: t.adminToken, body: { text: 'hello' } });
      assert.equal(res.status, 503, res.text);
      assert.match(res.body.detail, new RegExp(`no live sandbox host runs local environments \\(environment "${env.name}" of the lead role\\): on host [^,]+, ${home} is closed to the unprivileged sandbox user \\(mode 0700\\)`));
      assert.match(res.body.detail, /chmod o\+x/);
    } finally {
      await host.stop();
      await t.close();
      fs.rmSync(home, { recursive: true, force: true });
    }
  });
});
