// A run whose roles are placed on two sandbox hosts: two workers in this process, each with its
// own sandbox host (its own SERVICE_SANDBOX_DIR, so its own host id, and subnet), share the test's
// PostgreSQL schema and job queue. Host A has room for the lead's environment only, host B for
// the dev's too. The lead runs on A (B is started while the lead's first model call waits); when
// the lead hands off, A places the dev's sandbox on B and forwards the run there instead of
// failing it; when the dev hands back, B finds the lead's sandbox on A and forwards it back.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { RunningComponent } from '../../src/components.ts';
import { Registry } from '../../src/metrics.ts';
import { advanceRunJob } from '../../src/runtime/engine/advance-run.job.ts';
import { createLocalProvider } from '../../src/runtime/sandboxes/providers/local.ts';
import { workerComponent } from '../../src/runtime/worker.component.ts';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { captureLogger, dbKind, sharedServices, testConfig, uniq } from '../harness.ts';
import { lastText, roleOf, startStack, stackSkip, waitFor, type Stack } from './stack.ts';

const skip = stackSkip || (dbKind === 'pglite' ? 'the embedded database serves one process, so one sandbox host: there is no other host to forward a run to (runs on PostgreSQL: set SERVICE_TEST_DATABASE_URL)' : false);

interface Host {
  dir: string;
  subnet: string;
  worker: RunningComponent;
  lines: string[];
}

describe('a run placed on another sandbox host is forwarded to its worker', { skip }, () => {
  let stack: Stack;
  const hosts: Host[] = [];
  let holdLead: Promise<void> | null = null;
  let releaseLead: () => void = () => {};
  let leadWaiting = false;

  async function script(req: ScriptedRequest): Promise<ScriptedAnswer> {
    const role = roleOf(req);
    const text = lastText(req);
    if (role === 'dev') {
      if (!req.body.messages.some((m) => m.role === 'tool')) return { tool_calls: [{ name: 'write_file', arguments: { path: 'hello.txt', content: 'hello from host B\n' } }] };
      return { tool_calls: [{ name: 'hand_off', arguments: { summary: 'hello.txt is written' } }] };
    }
    if (text.includes('hello.txt is written')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'the dev wrote hello.txt' } }] };
    if (holdLead) {
      const held = holdLead;
      holdLead = null;
      leadWaiting = true;
      await held;
    }
    return { tool_calls: [{ name: 'hand_off', arguments: { summary: 'Write hello.txt.' } }] };
  }

  async function startHost(memoryMib: number): Promise<Host> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-e2e-host-'));
    let subnet: string;
    do subnet = `10.${200 + crypto.randomInt(50)}.${crypto.randomInt(256)}.0/24`;
    while (subnet === stack.env.SERVICE_SANDBOX_SUBNET || hosts.some((h) => h.subnet === subnet));
    const config = testConfig({
      ...stack.env,
      SERVICE_MODEL_PROXY_URL: stack.t.config.modelProxyUrl ?? '',
      SERVICE_SANDBOX_DIR: dir,
      SERVICE_SANDBOX_SUBNET: subnet,
      SERVICE_SANDBOX_MEMORY_MIB: String(memoryMib),
    });
    const { logger, lines } = captureLogger('debug');
    const worker = await workerComponent.start({ config, db: stack.t.db, logger, metrics: new Registry(), ...sharedServices(config, stack.t.db) });
    const host: Host = { dir, subnet, worker, lines };
    hosts.push(host);
    return host;
  }

  /** The id of the live host offering this much memory (each host's is distinct). */
  const hostWith = async (memoryMib: number) => (await stack.t.db.selectFrom('sandbox_hosts').select('id').where('memory_mib', '=', memoryMib).where('stopped_at', 'is', null).executeTakeFirstOrThrow()).id;

  before(async () => {
    stack = await startStack({ script, worker: false });
  });

  after(async () => {
    for (const h of hosts) {
      await h.worker.stop();
      // Sandboxes outlive their worker by design: the test's go with their processes and network.
      const local = createLocalProvider({ root: h.dir, gatewayPort: Number(stack.env.SERVICE_GATEWAY_PORT), logger: captureLogger().logger });
      for (const id of await local.list()) await local.destroy(id).catch((err) => process.stderr.write(`could not destroy sandbox ${id}: ${String(err)}\n`));
      fs.rmSync(h.dir, { recursive: true, force: true });
    }
    await stack?.stop();
  });

  it('drives each role on the host its sandbox is placed on, and the run succeeds', async () => {
    // The lead's environment takes 512 MiB (both hosts have room), the dev's 2048 (only B has).
    const big = await stack.t.request({ method: 'POST', url: '/api/v1/environments', token: stack.t.adminToken, body: { name: uniq('env'), provider: 'local', profile: 'small', vcpus: 1, memory_mib: 2048, disk_gib: 1, idle_after_seconds: 600, deep_sleep_after_seconds: 3600 } });
    assert.equal(big.status, 201, big.text);
    const hostA = await startHost(1024);
    const tools = ['write_file', 'hand_off', 'finish'];
    const team = await stack.makeTeam({ roles: { lead: { tools, system_prompt: 'You lead.' }, dev: { tools, system_prompt: 'You write code.', role: { vm: big.body.name } } }, pipeline: { lead: 'dev' } });
    holdLead = new Promise<void>((r) => (releaseLead = r));
    const id = await stack.giveTask(team, 'Write hello.txt');

    // Host B comes up only once the lead's sandbox is on A (the only host then) and A drives the run.
    await waitFor('the lead\'s first model call', async () => leadWaiting);
    const hostB = await startHost(8192);
    const [idA, idB] = [await hostWith(1024), await hostWith(8192)];
    releaseLead();

    const done = await waitFor(
      'the run to succeed',
      async () => {
        const r = await stack.run(id);
        assert.notEqual(r.state, 'failed', r.failure_reason);
        return r.state === 'succeeded' ? r : null;
      },
      400_000,
    );
    assert.deepEqual(done.tasks.map((x: { role: string; state: string }) => `${x.role}:${x.state}`), ['lead:done', 'dev:done', 'lead:done']);

    // Each role's sandbox is on the host that had room for it, and its work happened there.
    const sandboxes = await stack.t.db.selectFrom('sandboxes').select(['role', 'host_id']).where('role', 'in', ['lead', 'dev']).orderBy('role').execute();
    assert.deepEqual(sandboxes, [
      { role: 'dev', host_id: idB },
      { role: 'lead', host_id: idA },
    ]);
    const written = (dir: string) => (fs.readdirSync(dir, { recursive: true }) as string[]).some((f) => f.endsWith(`workspace${path.sep}hello.txt`));
    assert.ok(written(hostB.dir), 'the dev wrote hello.txt on host B');
    assert.ok(!written(hostA.dir), 'nothing of the dev ran on host A');

    // Forwarded, not failed: A sent the run to B for the dev, B sent it back to A for the lead,
    // each with a job only that host's worker takes, and each said so in its log. (A job of the
    // run that found it busy is retried later and then finds nothing to do; under load one may
    // drive a step itself and forward once more, so the jobs are counted by target, not listed.)
    const runJobs = () => stack.t.db.selectFrom('jobs').select(['id', 'target', 'state', 'last_error']).where('kind', '=', advanceRunJob.kind).orderBy('id').execute();
    await waitFor(`every ${advanceRunJob.kind} job to be done`, async () => (await runJobs()).every((j) => j.state === 'done'));
    const forwarded = (await runJobs()).filter((j) => j.target !== null);
    assert.equal(forwarded[0]?.target, idB, `A forwards first, to B: ${JSON.stringify(forwarded)}`);
    assert.ok(forwarded.some((j) => j.target === idA), `B forwards back to A: ${JSON.stringify(forwarded)}`);
    assert.ok(forwarded.every((j) => j.target === idA || j.target === idB));
    const said = (h: Host, to: string) => h.lines.some((l) => l.includes('run forwarded to the worker of the host its sandbox is placed on') && l.includes(to) && l.includes(id));
    assert.ok(said(hostA, idB), 'host A logged forwarding the run to B');
    assert.ok(said(hostB, idA), 'host B logged forwarding the run to A');
    const posts = await stack.posts(id);
    assert.ok(!posts.some((p) => /placed on|forward/i.test(p.text)), 'forwarding is no post');
    assert.ok(!hosts.some((h) => h.lines.some((l) => l.includes('not on this one'))), 'no worker tried a sandbox of another host');
  });
});
