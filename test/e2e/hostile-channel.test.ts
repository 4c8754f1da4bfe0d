// A hostile agent against the worker's control channel (issue 28): whatever comes out of a
// sandbox on the agent runtime's stdout may fail that run, never the service. First through the
// whole stack (a scripted model whose shell call floods the runtime's stdout, beside a second
// team's run that must finish, and /healthz answering throughout); then the run engine itself
// driving a run in a real `local` sandbox whose runtime is hostile: a line without end, bytes
// that are not events, a cancel it ignores, a process left behind holding its stdout.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import type { AgentConfig } from '../../src/agent/protocol.ts';
import { pushesOf } from '../../src/gateway/pushes.ts';
import { sandboxSpendOf } from '../../src/modelproxy/sandbox-spend.ts';
import { createRunEngine, type RoleSandbox } from '../../src/runtime/engine/engine.ts';
import { startSandboxHost, type SandboxHost } from '../../src/runtime/sandboxes/host.ts';
import type { ExecRequest } from '../../src/runtime/sandboxes/provider.ts';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { captureLogger } from '../harness.ts';
import { processesWith, startStack, stackSkip, waitFor, type Stack } from './stack.ts';

const scenarioOf = (req: ScriptedRequest) => /(?<!Asked: )SCENARIO (\S+)/.exec(String(req.body.messages.find((m) => m.role === 'user')?.content ?? ''))?.[1] ?? '?';
const toolResults = (req: ScriptedRequest) => req.body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content ?? ''));


const FLOOD = `python3 - "$PPID" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
try:
    fd = libc.syscall(438, os.pidfd_open(int(sys.argv[1])), 1, 0)  # pidfd_getfd(runtime, its stdout)
except OSError:
    fd = -1
if fd < 0:
    print("UNREACHABLE")
    sys.exit(0)
chunk = b"a" * (1 << 20)
for _ in range(200):
    os.write(fd, chunk)
print("WROTE")
PY`;

describe('a hostile agent floods the control channel, through the whole stack', { skip: stackSkip }, () => {
  let stack: Stack;

  function script(req: ScriptedRequest): ScriptedAnswer {
    const results = toolResults(req);
    switch (scenarioOf(req)) {
      case 'flood':
        // 200 MiB without a newline, written into the runtime's own stdout (the shell's parent),
        // taken with pidfd_getfd, as the red-team did, when the sandbox lets a tool reach it.
        if (!results.length) return { tool_calls: [{ name: 'shell', arguments: { command: FLOOD } }] };
        return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: results[0].includes('UNREACHABLE') ? 'the runtime was out of reach' : `the flood went through: ${results[0].slice(0, 300)}` } }] };
      case 'calm':
        if (results.length < 2) return { tool_calls: [{ name: 'shell', arguments: { command: `echo step ${results.length}` } }] };
        return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'calm work done' } }] };
      default:
        return { tool_calls: [{ name: 'finish', arguments: { outcome: 'failed', summary: 'unknown scenario' } }] };
    }
  }

  before(async () => {
    stack = await startStack({ script });
  });

  after(async () => {
    await stack?.stop();
  });

  it('fails only the flooding run, with a reason for people; /healthz answers throughout and another team finishes', async () => {
    const tools = ['shell', 'finish'];
    const [hostile, calm] = await Promise.all([stack.makeTeam({ roles: { lead: { tools, system_prompt: 'You lead.' } } }), stack.makeTeam({ roles: { lead: { tools, system_prompt: 'You lead.' } } })]);
    const flood = await stack.giveTask(hostile, 'SCENARIO flood');
    const work = await stack.giveTask(calm, 'SCENARIO calm');

    let probes = 0;
    const failures: string[] = [];
    const ended = (s: string) => ['succeeded', 'failed', 'cancelled'].includes(s);
    const [a, b] = await waitFor('both runs to end, /healthz asked meanwhile', async () => {
      const h = await stack.t.request({ method: 'GET', url: '/healthz' });
      probes++;
      if (h.status !== 200) failures.push(`${h.status} ${h.text}`);
      const runs = [await stack.run(flood), await stack.run(work)];
      return runs.every((r) => ended(r.state)) ? runs : null;
    });
    assert.deepEqual(failures, []);
    assert.ok(probes > 0);
    assert.equal(b.state, 'succeeded', b.failure_reason);
    if (a.state === 'failed') {
      // The flood is refused at the bound, or sooner when a line of the runtime's own got mixed into it.
      assert.match(a.failure_reason, /^the lead role could not go on: the agent runtime sent (a message larger than 8 MiB|something that is not a JSON event on its control channel); the run was stopped so it cannot harm the service$/);
    } else {
      // The sandbox kept the tool away from the runtime's descriptors: the flood never reached the channel.
      assert.equal(a.state, 'succeeded', JSON.stringify(a));
      const posts = await stack.posts(flood);
      assert.ok(posts.some((p) => p.text.includes('the runtime was out of reach')), JSON.stringify(posts));
    }
    // The service still takes and finishes work.
    const again = await stack.giveTask(calm, 'SCENARIO calm');
    assert.equal((await stack.waitForState(again, 'succeeded')).state, 'succeeded');
  });
});

describe('the run engine against a hostile agent runtime in a real sandbox', { skip: stackSkip }, () => {
  let stack: Stack;
  let host: SandboxHost;
  const { logger, lines } = captureLogger('debug');

  before(async () => {
    // No worker: this test's engine is the only one driving its runs; the sandbox host is the worker's.
    stack = await startStack({ script: () => ({ tool_calls: [{ name: 'finish', arguments: { outcome: 'failed', summary: 'no model here' } }] }), worker: false });
    host = await startSandboxHost({ config: stack.t.config, db: stack.t.db, logger, teams: stack.t.services.sandboxDirectory });
  });

  after(async () => {
    await host?.stop();
    await stack?.stop();
  });

  /** The sandbox's count of processes its memory limit killed, as its provider reads it from the cgroup. */
  const oomKills = (sandboxId: string) => host.oomKills(sandboxId);

  /** An engine whose runtime is `script` (a shell script in the role's sandbox, given the request on stdin), with short waits. */
  function engine(script: string) {
    return createRunEngine({
      runs: stack.t.services.runJournal,
      logger,
      owner: host.id,
      // A shared runtime (`{"op":"serve"}`, then a request per channel): a replay of the journal
      // finds nothing; a turn is the hostile script, its channel in $ch.
      runtimeArgv: ['/bin/sh', '-c', `IFS= read -r serve; while IFS= read -r req; do ch=\${req#'{"ch":'}; ch=\${ch%%,*}; case "$req" in *'"op":"events"'*) echo "{\\"ch\\":$ch,\\"exit\\":0}";; *'"request"'*) break;; esac; done; ${script}`],
      cancelPollMs: 100,
      stopGraceMs: 1000,
      egressRefusals: async () => [],
      gitPushes: (sandboxId, afterId, since) => pushesOf(stack.t.db, sandboxId, afterId, 100, since),
      modelSpend: (sandboxId, afterId, since) => sandboxSpendOf(stack.t.db, sandboxId, afterId, since),
      releaseSandbox: async () => {},
      async configFor(work) {
        return { role: work.task.role, lead: true, model: 'fast', base_url: 'http://llm.crewhouse.internal/v1', system_prompt: '', tools: ['finish'], confirmation_policy: 'never_confirm', max_iterations: 5, roles: [work.task.role], next_role: null, workspace: '/workspace', repo_dir: null, branch: null, documents: [], skills: [], context_tokens: 100_000 } satisfies AgentConfig;
      },
      async sandboxFor(work): Promise<RoleSandbox> {
        const placement = await host.place({ teamId: work.team.id, role: work.task.role, claimId: `${work.run.id}.${work.task.role}` });
        await host.ensureRunning(placement.sandboxId);
        return { id: placement.sandboxId, coldBooted: false, exec: (req: ExecRequest) => host.exec(placement.sandboxId, req), oomKills: () => oomKills(placement.sandboxId) };
      },
    });
  }

  async function runWith(script: string, during?: (runId: string) => Promise<void>, environment?: Record<string, unknown>) {
    const team = await stack.makeTeam({ roles: { lead: { tools: ['finish'], system_prompt: 'You lead.' } }, environment });
    const id = await stack.giveTask(team, 'be hostile');
    const advancing = engine(script).advance(id, new AbortController().signal);
    await during?.(id);
    await advancing;
    const lease = await stack.t.db.selectFrom('runs').select(['owner', 'owner_until']).where('id', '=', id).executeTakeFirstOrThrow();
    return { run: await stack.run(id), lease };
  }

  it('a line without end fails the run with a reason for people, and the runtime is killed', async () => {
    const marker = `${crypto.randomInt(100000, 999999)}`;
    const { run } = await runWith(`(sleep 600.${marker} &); head -c 100000000 /dev/zero | tr '\\0' a; sleep 600.${marker}`);
    assert.equal(run.state, 'failed');
    assert.equal(run.failure_reason, 'the lead role could not go on: the agent runtime sent a message larger than 8 MiB; the run was stopped so it cannot harm the service');
    await waitFor('the runtime and what it started to be killed', async () => (await processesWith(['sleep', `600.${marker}`])).length === 0);
  });

  it('bytes that are not a JSON event fail the run, whatever the runtime does next', async () => {
    const { run } = await runWith(`echo 'not an event'; sleep 600`);
    assert.equal(run.state, 'failed');
    assert.equal(run.failure_reason, 'the lead role could not go on: the agent runtime sent something that is not a JSON event on its control channel; the run was stopped so it cannot harm the service');
    const { run: odd } = await runWith(`echo '[1,2]'; sleep 600`);
    assert.match(odd.failure_reason, /without a sequence number and type on its control channel/);
    // A bad event on the run's own channel fails that run the same way.
    const { run: bad } = await runWith(`echo '{"ch":'$ch',"event":[1,2]}'; sleep 600`);
    assert.equal(bad.state, 'failed');
    assert.match(bad.failure_reason, /without a sequence number and type on its control channel/);
  });

  it('a cancel ends the run although the runtime ignores it: the job returns and the lease is let go', async () => {
    const marker = `${crypto.randomInt(100000, 999999)}`;
    const { run, lease } = await runWith(`trap '' TERM INT; sleep 600.${marker}`, async (id) => {
      await waitFor('the hostile runtime to run', async () => (await processesWith(['sleep', `600.${marker}`])).length > 0);
      const r = await stack.t.request({ method: 'POST', url: `/api/v1/runs/${id}/cancel`, token: stack.t.adminToken });
      assert.equal(r.status, 200, r.text);
    });
    assert.equal(run.state, 'cancelled');
    assert.equal(lease.owner, null, 'no worker holds or renews the run');
    await waitFor('the runtime to be killed', async () => (await processesWith(['sleep', `600.${marker}`])).length === 0);
  });

  it('a runtime that ignores being left (this worker no longer drives the run) is killed after the grace; nothing is recorded', async () => {
    const marker = `${crypto.randomInt(100000, 999999)}`;
    const team = await stack.makeTeam({ roles: { lead: { tools: ['finish'], system_prompt: 'You lead.' } } });
    const id = await stack.giveTask(team, 'be hostile');
    const lost = new AbortController();
    const advancing = engine(`trap '' TERM INT; sleep 600.${marker}`).advance(id, lost.signal);
    await waitFor('the hostile runtime to run', async () => (await processesWith(['sleep', `600.${marker}`])).length > 0);
    lost.abort();
    await advancing.catch(() => {});
    await waitFor('the runtime to be killed', async () => (await processesWith(['sleep', `600.${marker}`])).length === 0);
    // Left, not ended: the run waits for the worker that takes it over.
    assert.equal((await stack.run(id)).state, 'running');
  });

  it('a turn ends with its runtime although a process left behind holds its stdout', async () => {
    const marker = `${crypto.randomInt(100000, 999999)}`;
    // A turn the host believes: the model's call of finish, then the turn's end answering it.
    const at = new Date().toISOString();
    const call = JSON.stringify({ seq: 1, at, type: 'model_reply', content: null, tool_calls: [{ id: 'c1', name: 'finish', arguments: '{}' }], usage: null, finish_reason: 'tool_calls' });
    const end = JSON.stringify({ seq: 2, at, type: 'turn_end', outcome: { kind: 'finished', outcome: 'succeeded', summary: 'done', branch: null, pull_request_url: null } });
    const { run, lease } = await runWith(`(setsid sleep 600.${marker} &); echo '{"ch":'$ch',"event":${call}}'; echo '{"ch":'$ch',"event":${end}}'; echo '{"ch":'$ch',"exit":0}'; exit 0`);
    assert.equal(run.state, 'succeeded', run.failure_reason);
    assert.equal(lease.owner, null);
    for (const pid of await processesWith(['sleep', `600.${marker}`])) process.kill(pid, 'SIGKILL');
  });

  it('a runtime that dies says why in words; its own output goes to the log only', async () => {
    const { run } = await runWith(`echo 'Error: value "3000000000" is out of range for type integer' >&2; exit 1`);
    assert.equal(run.state, 'failed');
    assert.match(run.failure_reason, /^the lead role could not go on: the agent runtime of the lead role stopped before its turn ended \(exit code 1\); the service log has its last output under run /);
    assert.doesNotMatch(run.failure_reason, /out of range/);
    assert.ok(lines.some((l) => l.includes('out of range for type integer') && l.includes(run.id)));
  });

  it('a runtime killed by the sandbox\'s memory limit says the sandbox ran out of memory, and what to do', async (t) => {
    // A runtime that takes memory until the sandbox's limit kills it (tail keeps the endless line).
    const { run } = await runWith('tail /dev/zero', undefined, { memory_mib: 256 });
    const sandbox = await stack.t.db.selectFrom('sandboxes').select('id').where('team_id', '=', (await stack.t.db.selectFrom('teams').select('id').where('name', '=', run.team).executeTakeFirstOrThrow()).id).executeTakeFirstOrThrow();
    if ((await oomKills(sandbox.id)) === null) return t.skip('neither the provider nor the kernel counts this sandbox\'s out-of-memory kills here');
    assert.equal(run.state, 'failed');
    assert.equal(run.failure_reason, "the lead role could not go on: the lead sandbox ran out of memory, and its agent runtime was killed; raise the memory of the role's environment, or give the team a lighter task");
  });
});
