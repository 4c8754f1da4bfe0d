// The agent runtime's control channel (its stdin after the request line): a cancel line ends
// the turn `cancelled` with the running tool's process group killed and every call settled;
// the channel's end (the worker gone) kills the tool and exits recording nothing.
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startScriptedModel, type ScriptedModel } from '../../test/fakes/scripted-model.ts';
import { Journal } from './journal.ts';
import { journalPath, WORKER_GONE_EXIT } from './main.ts';
import type { AgentConfig } from './protocol.ts';
import { waitFor } from '../../test/harness.ts';

/** A process that exists and is not a zombie (a killed orphan may wait a while to be reaped). */
const alive = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

describe('agent runtime control channel', () => {
  let ws: string;
  let model: ScriptedModel;

  before(async () => {
    ws = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-ctl-'));
    // Every conversation: one long shell command that leaves its pid behind, then finish (a "served" one: two short commands).
    model = await startScriptedModel((req) =>
      req.body.messages.some((m) => String(m.content).includes('served'))
        ? req.body.messages.filter((m) => m.role === 'tool').length < 2
          ? { tool_calls: [{ name: 'shell', arguments: { command: 'echo step' } }] }
          : { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'done' } }] }
        : req.body.messages.some((m) => m.role === 'tool')
        ? { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'done' } }] }
        : { tool_calls: [{ name: 'shell', arguments: { command: `echo $$ > ${path.join(ws, 'tool.pid')}; exec sleep 300` } }] },
    );
  });

  after(async () => {
    await model.close();
    fs.rmSync(ws, { recursive: true, force: true });
  });

  const config = (): AgentConfig => ({
    role: 'lead',
    lead: true,
    model: 'fake',
    base_url: model.baseUrl,
    system_prompt: 'You lead.',
    tools: ['shell', 'finish'],
    confirmation_policy: 'never_confirm',
    max_iterations: 5,
    roles: ['lead'],
    next_role: null,
    workspace: ws,
    repo_dir: null,
    branch: null,
    documents: [],
    skills: [],
    context_tokens: 100_000,
  });

  /** Starts a turn with the control channel open; resolves once its tool runs, with the tool's pid. */
  async function startTurn(name: string): Promise<{ child: ChildProcessWithoutNullStreams; toolPid: number; exit: Promise<number | null> }> {
    fs.rmSync(path.join(ws, 'tool.pid'), { force: true });
    const child = spawn(process.execPath, [path.join(import.meta.dirname, 'main.ts')], { stdio: ['pipe', 'pipe', 'pipe'] });
    const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.stdout.resume();
    child.stdin.write(`${JSON.stringify({ op: 'turn', conversation: name, config: config(), input: { kind: 'task', text: name, from: 'person' } })}\n`);
    const pidFile = path.join(ws, 'tool.pid');
    await waitFor('the tool to start', () => fs.existsSync(pidFile) && fs.readFileSync(pidFile, 'utf8').trim() !== '');
    return { child, toolPid: Number(fs.readFileSync(pidFile, 'utf8')), exit };
  }

  it('a cancel line kills the tool and ends the turn cancelled, every call settled', async () => {
    const { child, toolPid, exit } = await startTurn('cancelme');
    assert.ok(alive(toolPid));
    child.stdin.write(`${JSON.stringify({ op: 'cancel' })}\n`);
    assert.equal(await exit, 0);
    await waitFor('the tool to be gone', () => !alive(toolPid));
    const j = Journal.open(journalPath(ws, 'cancelme'));
    const events = j.all();
    j.close();
    const last = events.at(-1)!;
    assert.ok(last.type === 'turn_end' && last.outcome.kind === 'cancelled', JSON.stringify(last));
    const result = events.find((e) => e.type === 'tool_result');
    assert.ok(result && result.type === 'tool_result' && result.interrupted === true && /cancelled by the person/.test(result.output));
  });

  it('the end of the channel (the worker gone) kills the tool and exits recording nothing', async () => {
    const { child, toolPid, exit } = await startTurn('orphaned');
    const before = Journal.open(journalPath(ws, 'orphaned'));
    const seen = before.all().map((e) => e.type);
    before.close();
    assert.equal(seen.at(-1), 'tool_started');
    child.stdin.end();
    assert.equal(await exit, WORKER_GONE_EXIT);
    await waitFor('the tool to be gone', () => !alive(toolPid));
    const j = Journal.open(journalPath(ws, 'orphaned'));
    assert.deepEqual(j.all().map((e) => e.type), seen, 'nothing was recorded after the worker went away');
    j.close();
  });

  it('serving many requests, tells each event of a channel once, in order, as recorded, and its end after them', async () => {
    const child = spawn(process.execPath, [path.join(import.meta.dirname, 'main.ts')], { stdio: ['pipe', 'pipe', 'pipe'] });
    const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stdin.write(`${JSON.stringify({ op: 'serve' })}\n`);
    child.stdin.write(`${JSON.stringify({ ch: 7, request: { op: 'turn', conversation: 'served', config: config(), input: { kind: 'task', text: 'served', from: 'person' } } })}\n`);
    await waitFor('the channel to end', () => out.includes('"exit"'));
    child.stdin.end();
    assert.equal(await exit, WORKER_GONE_EXIT);
    const lines = out.trim().split('\n').map((l) => JSON.parse(l));
    const j = Journal.open(journalPath(ws, 'served'));
    const recorded = j.all();
    j.close();
    assert.deepEqual(recorded.map((e) => e.type), ['input', 'model_call', 'model_reply', 'tool_started', 'tool_result', 'model_call', 'model_reply', 'tool_started', 'tool_result', 'model_call', 'model_reply', 'turn_end']);
    assert.deepEqual(lines, [...recorded.map((event) => ({ ch: 7, event })), { ch: 7, exit: 0 }]);
  });
});
