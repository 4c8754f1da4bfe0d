// The long-lived agent runtime of a sandbox (one process serving every turn, shared-runtime.ts)
// killed with SIGKILL mid-turn, while a tool runs: the engine starts a new one, the turn is
// resumed once, the interrupted call is reported to the model and never run again, and every
// post is there once. Two runs of the team are served by the one runtime, both mid-tool when it
// dies: the other is resumed the same way and finishes.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { assertResumedWithoutRepeats, processesWith, startStack, stackSkip, waitFor, workspaceFile, type Stack } from './stack.ts';

/** The parent of a process, from /proc (0 when it is gone). */
function parentOf(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return 0;
  }
}

const cmdline = (pid: number) => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return [];
  }
};

describe('the long-lived agent runtime dies mid-turn', { skip: stackSkip }, () => {
  let stack: Stack;
  const token = String(crypto.randomInt(100000, 999999));
  const sleeper = ['sleep', `600.${token}`];
  // The other run's tool sleeps too, so that both runs are mid-tool when the runtime dies: a run
  // caught between steps would have its call reported as interrupted before it wrote anything.
  const otherSleeper = ['sleep', `601.${token}`];

  function script(req: ScriptedRequest): ScriptedAnswer {
    const results = req.body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content ?? ''));
    const first = String(req.body.messages.find((m) => m.role === 'user')?.content ?? '');
    const file = /FILE (\S+)/.exec(first)?.[1] ?? 'other.txt';
    const n = results.length;
    if (n === 0) return { tool_calls: [{ name: 'shell', arguments: { command: `echo one >> ${file}` } }] };
    if (n === 1) return { tool_calls: [{ name: 'shell', arguments: { command: file === 'lines.txt' ? `echo two >> ${file}; sleep 600.${token}; echo never >> ${file}` : `echo two >> ${file}; sleep 601.${token}; echo never >> ${file}` } }] };
    if (n === 2) return { tool_calls: [{ name: 'shell', arguments: { command: `echo three >> ${file}` } }] };
    return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `three lines (${results[1].slice(0, 60)})` } }] };
  }

  before(async () => {
    stack = await startStack({ script });
  });

  after(async () => {
    for (const pid of [...processesWith(sleeper), ...processesWith(otherSleeper)]) process.kill(pid, 'SIGKILL');
    await stack?.stop();
  });

  it('resumes the turn once on a new runtime: no tool effect repeated, every post once', async () => {
    const team = await stack.makeTeam({ roles: { lead: { tools: ['shell', 'finish'], system_prompt: 'You lead.', role: { concurrent_runs: 2 } } } });
    const id = await stack.giveTask(team, 'Write three lines FILE lines.txt');
    const lines = (name: string) => workspaceFile(stack, name);
    await waitFor('the tool of step 2 to run', async () => lines('lines.txt') === 'one\ntwo\n' && processesWith(sleeper).length > 0, 300_000);
    // A second run of the team, served by the same runtime, mid-turn when it dies.
    const other = await stack.giveTask(team, 'Write three lines FILE other.txt');
    await waitFor('the other run to be in its step 2 tool', async () => lines('other.txt') === 'one\ntwo\n' && processesWith(otherSleeper).length > 0, 300_000);

    // The runtime is the tool's ancestor that runs src/agent/main.ts: one process for both runs.
    const [tool] = processesWith(sleeper);
    let runtime = 0;
    for (let p = parentOf(tool), hops = 0; p > 1 && hops < 32; p = parentOf(p), hops++) {
      if (cmdline(p).some((a) => a.endsWith('src/agent/main.ts'))) {
        runtime = p;
        break;
      }
    }
    assert.ok(runtime > 0, 'the tool runs under an agent runtime');
    process.kill(runtime, 'SIGKILL');
    // Its sandbox's processes go with it: the tool too.
    await waitFor('the tools to stop with their runtime', async () => processesWith(sleeper).length === 0 && processesWith(otherSleeper).length === 0);

    const done = await stack.waitForState(id, 'succeeded');
    await assertResumedWithoutRepeats(stack, done, 'lines.txt');
    // Resumed once, on a new runtime.
    const resumed = stack.logLines.filter((l) => l.includes('agent runtime stopped; resuming the turn') && l.includes(id));
    assert.equal(resumed.length, 1, JSON.stringify(resumed));

    // The other run was resumed as well and finished; nothing of it ran twice either.
    const otherDone = await stack.waitForState(other, 'succeeded');
    await assertResumedWithoutRepeats(stack, otherDone, 'other.txt');
  });
});
