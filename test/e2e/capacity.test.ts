// A small host serves more teams than it has room for awake: with room for two awake sandboxes,
// a third and a fourth team's runs wait (a notice says what for, the run stays running), then run
// in the order they began to wait, once a run ends and its idle sandbox is put to sleep early to
// make room. An environment larger than any host fails at once, naming what to change. Real
// `local` sandboxes, the real worker and gateway; the model is scripted and holds the first two
// teams' runs until the test lets them finish.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { open, openBrowser, signIn, skipWithoutChromium, webDir, type Browser } from './browser.ts';
import { startStack, stackSkip, waitFor, type Stack } from './stack.ts';

describe('capacity: runs wait for room on a full host, oldest first', { skip: stackSkip }, () => {
  let stack: Stack;
  let tmp: string;
  let browser: Browser | null = null;
  const gates = new Map<string, { open: () => void; opened: Promise<void> }>();
  const firstSeen: string[] = [];
  const gate = (name: string) => {
    let open!: () => void;
    const opened = new Promise<void>((r) => (open = r));
    gates.set(name, { open, opened });
  };
  gate('TEAM-A');
  gate('TEAM-B');

  async function script(req: ScriptedRequest): Promise<ScriptedAnswer> {
    const team = /TEAM-[A-Z]/.exec(req.system)?.[0] ?? '?';
    if (!firstSeen.includes(team)) firstSeen.push(team);
    await gates.get(team)?.opened;
    return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `${team} done` } }] };
  }

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-capacity-'));
    // Room for two awake 512 MiB sandboxes.
    stack = await startStack({ script, config: { SERVICE_SANDBOX_MEMORY_MIB: '1024', ...(skipWithoutChromium ? {} : { SERVICE_WEB_DIR: await webDir(tmp) }) } });
  });
  after(async () => {
    for (const g of gates.values()) g.open();
    await browser?.context.close();
    await stack?.stop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  const team = (name: string, environment?: Record<string, unknown>) => stack.makeTeam({ roles: { lead: { tools: ['finish'], system_prompt: `You lead ${name}.` } }, ...(environment ? { environment } : {}) });
  const waitNotice = async (runId: string) =>
    waitFor(`a waiting notice on run ${runId}`, async () => (await stack.posts(runId)).find((p) => p.kind === 'notice' && p.text.includes('no sandbox host has room now')));

  it('a third and a fourth team wait, then run in line; every run finishes', async () => {
    const [a, b, c, d] = [await team('TEAM-A'), await team('TEAM-B'), await team('TEAM-C'), await team('TEAM-D')];
    const runA = await stack.giveTask(a, 'first');
    const runB = await stack.giveTask(b, 'second');
    // Both are awake and working (their model calls are held).
    await waitFor('teams A and B to be working', async () => firstSeen.includes('TEAM-A') && firstSeen.includes('TEAM-B'));

    const runC = await stack.giveTask(c, 'third');
    const notice = await waitNotice(runC);
    assert.match(notice.text, /environment "[^"]+" \(1 vCPU, 512 MiB, 1 GiB\)/);
    assert.match(notice.text, /sandboxes hold 1024 of its 1024 MiB of memory/);
    assert.match(notice.text, /goes on when an idle sandbox goes to sleep or another run ends/);
    const runD = await stack.giveTask(d, 'fourth');
    const noticeD = await waitNotice(runD);
    assert.match(noticeD.text, /1 run\(s\) waited before this one/);
    assert.equal((await stack.run(runC)).state, 'running', 'a waiting run stays running');
    assert.equal((await stack.run(runD)).state, 'running');
    assert.ok(!firstSeen.includes('TEAM-C') && !firstSeen.includes('TEAM-D'), 'no waiting run started');

    // An operator sees the line on the Hosts page: the full host, and C before D.
    if (!skipWithoutChromium) {
      await stack.t.app.listen({ host: '127.0.0.1', port: 0 });
      const address = stack.t.app.server.address();
      assert.ok(address && typeof address === 'object');
      browser = await openBrowser(path.join(tmp, 'operator'));
      const { page } = browser;
      await signIn(page, `http://127.0.0.1:${address.port}`, stack.t.adminToken, stack.t.config.publicBaseUrl, 'operator');
      await page.getByRole('link', { name: 'Hosts' }).click();
      await open(page, '#/hosts');
      await page.getByRole('table', { name: 'hosts' }).getByRole('row').filter({ hasText: '1024 of 1024 MiB' }).filter({ hasText: 'live' }).waitFor();
      const line = page.getByRole('table', { name: 'runs waiting for room' }).getByRole('row');
      await line.filter({ hasText: runD }).waitFor();
      const rows = await line.allInnerTexts();
      assert.ok(rows.findIndex((r) => r.includes(runC)) < rows.findIndex((r) => r.includes(runD)), 'the page lists the line oldest first');
      assert.ok(rows.some((r) => r.includes(c) && r.includes('1 vCPU, 512 MiB, 1 GiB')));
      assert.deepEqual(browser.problems, []);
    }

    // A ends: its idle sandbox sleeps early and C, which waited longest, takes the room.
    gates.get('TEAM-A')!.open();
    await stack.waitForState(runA, 'succeeded');
    await stack.waitForState(runC, 'succeeded');
    await waitFor('an idle sandbox to go to sleep early', async () => stack.logLines.some((l) => l.includes('went to sleep early')));
    gates.get('TEAM-B')!.open();
    await stack.waitForState(runB, 'succeeded');
    await stack.waitForState(runD, 'succeeded');
    assert.ok(firstSeen.indexOf('TEAM-C') < firstSeen.indexOf('TEAM-D'), 'C, which waited longer, started first');
    // The line was served: nothing waits any more.
    assert.equal((await stack.t.db.selectFrom('sandbox_waits').select('claim_id').execute()).length, 0);
  });

  it('an environment larger than any host fails at once, saying what to change', async () => {
    const big = await team('TEAM-BIG', { memory_mib: 4096 });
    const run = await stack.giveTask(big, 'too big');
    const failed = await stack.waitForState(run, 'failed');
    assert.match(failed.failure_reason, /is larger than any live sandbox host .* can ever hold \(the largest offers \d+ vCPU, 1024 MiB/);
    assert.match(failed.failure_reason, /make the environment smaller, or give a host more/);
  });
});
