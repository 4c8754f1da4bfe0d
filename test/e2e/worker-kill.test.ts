// kill -9 of the worker mid-run: the worker runs in a child process (worker-child.ts) against
// the test's PostgreSQL; it is killed with SIGKILL while a model call waits for its answer and
// again while a tool runs, another worker is started each time, and the run completes with
// every post exactly once and no tool effect repeated (the tool appends a line per call).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { dbKind } from '../harness.ts';
import { assertResumedWithoutRepeats, processesWith, startStack, stackSkip, waitFor, workspaceFile, type Stack } from './stack.ts';

const skip = stackSkip || (dbKind === 'pglite' ? 'the embedded database lives in one process: a worker in another process cannot share it (runs on PostgreSQL: set SERVICE_TEST_DATABASE_URL)' : false);


describe('kill -9 of the worker mid-run', { skip }, () => {
  let stack: Stack;
  let worker: ChildProcess | null = null;
  const token = String(crypto.randomInt(100000, 999999));
  const sleeper = ['sleep', `600.${token}`];
  // The first model request at step 2 is held until the test has killed the worker under it.
  let holdStep2: Promise<void> | null = null;
  let releaseStep2: () => void = () => {};
  let step2Waiting = false;

  async function script(req: ScriptedRequest): Promise<ScriptedAnswer> {
    const results = req.body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content ?? ''));
    const n = results.length;
    if (n === 0) return { tool_calls: [{ name: 'shell', arguments: { command: 'echo one >> lines.txt' } }] };
    if (n === 1) {
      if (holdStep2) {
        const held = holdStep2;
        holdStep2 = null;
        step2Waiting = true;
        await held;
      }
      return { tool_calls: [{ name: 'shell', arguments: { command: `echo two >> lines.txt; sleep 600.${token}; echo never >> lines.txt` } }] };
    }
    if (n === 2) return { tool_calls: [{ name: 'shell', arguments: { command: 'echo three >> lines.txt' } }] };
    return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `three lines (${results[1].slice(0, 60)})` } }] };
  }

  async function startWorker(): Promise<ChildProcess> {
    const place = stack.t.dbPlace!;
    const env = { ...stack.env, SERVICE_MODEL_PROXY_URL: stack.t.config.modelProxyUrl ?? '' };
    const child = spawn(process.execPath, [path.join(import.meta.dirname, 'worker-child.ts'), JSON.stringify({ dbUrl: place.url, schema: place.schema, env })], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d) => {
        out += d;
        if (out.includes('ready\n')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`the worker exited before it was ready (${code})`)));
    });
    child.removeAllListeners('exit');
    return child;
  }

  async function killWorker() {
    const w = worker!;
    const gone = new Promise((r) => w.once('exit', r));
    w.kill('SIGKILL');
    await gone;
    worker = null;
  }

  before(async () => {
    // A short job lease: each takeover of the killed worker's run waits for it to run out.
    stack = await startStack({ script, worker: false, config: { SERVICE_JOB_LEASE_SECONDS: '10' } });
  });

  after(async () => {
    if (worker) await killWorker();
    for (const pid of processesWith(sleeper)) process.kill(pid, 'SIGKILL');
    await stack?.stop();
  });

  it('completes with every post once and no tool effect repeated', async () => {
    assert.ok(stack.t.config.modelProxyUrl);
    worker = await startWorker();
    const team = await stack.makeTeam({ roles: { lead: { tools: ['shell', 'finish'], system_prompt: 'You lead.' } } });
    holdStep2 = new Promise<void>((r) => (releaseStep2 = r));
    const id = await stack.giveTask(team, 'Write three lines');

    // Kill 1: while the model call of step 2 waits for its answer.
    await waitFor('the model call of step 2', async () => step2Waiting);
    await killWorker();
    releaseStep2();
    worker = await startWorker();

    // Kill 2: while the tool of step 2 runs (its line is written, it sleeps).
    const lines = () => workspaceFile(stack, 'lines.txt');
    await waitFor('the tool of step 2 to run', async () => lines() === 'one\ntwo\n' && processesWith(sleeper).length > 0, 300_000);
    await killWorker();
    // The runtime loses its worker: it stops the tool and exits, recording nothing.
    await waitFor('the tool to stop with its worker', async () => processesWith(sleeper).length === 0);
    worker = await startWorker();

    const done = await waitFor(
      'the run to succeed',
      async () => {
        const r = await stack.run(id);
        assert.notEqual(r.state, 'failed', r.failure_reason);
        return r.state === 'succeeded' ? r : null;
      },
      400_000,
    );
    await assertResumedWithoutRepeats(stack, done, 'lines.txt');
  });
});
