import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it, mock } from 'node:test';
import { startScriptedModel, type ScriptedAnswer, type ScriptedModel, type ScriptedRequest } from '../../test/fakes/scripted-model.ts';
import { Journal } from './journal.ts';
import { runTurn, type LoopDeps } from './loop.ts';
import { journalPath } from './main.ts';
import type { AgentConfig, AgentEvent, AgentInput } from './protocol.ts';
import { TOOL_CATALOG } from './tools/catalog.ts';

const ALL_TOOLS = TOOL_CATALOG.map((t) => t.name);

function workspace(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-ws-'));
  fs.mkdirSync(path.join(dir, 'repo'));
  execFileSync('git', ['init', '-q', '-b', 'main', path.join(dir, 'repo')]);
  execFileSync('git', ['-C', path.join(dir, 'repo'), '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '--allow-empty', '-m', 'start']);
  return dir;
}

function config(ws: string, model: ScriptedModel, over: Partial<AgentConfig> = {}): AgentConfig {
  return {
    role: 'lead',
    lead: true,
    model: 'fake',
    base_url: model.baseUrl,
    system_prompt: 'You are a careful engineer.',
    tools: ALL_TOOLS,
    confirmation_policy: 'never_confirm',
    max_iterations: 20,
    roles: ['lead', 'coder', 'reviewer'],
    next_role: 'coder',
    workspace: ws,
    repo_dir: path.join(ws, 'repo'),
    branch: 'crewhouse/run-1',
    documents: [],
    skills: [],
    context_tokens: 100_000,
    ...over,
  };
}

const deps = (over: Partial<LoopDeps> = {}): LoopDeps => ({ env: { PATH: process.env.PATH, HOME: os.tmpdir() }, sleep: async () => {}, ...over });

/** Every tool call of the conversation has exactly one result, after it. */
function assertCallsSettled(events: readonly AgentEvent[], openAllowed = 0): void {
  const results = new Map<string, number>();
  for (const e of events) if (e.type === 'tool_result') results.set(e.call_id, (results.get(e.call_id) ?? 0) + 1);
  let open = 0;
  for (const e of events) {
    if (e.type !== 'model_reply') continue;
    for (const c of e.tool_calls) {
      const n = results.get(c.id) ?? 0;
      assert.ok(n <= 1, `call ${c.id} has ${n} results`);
      if (n === 0) open++;
    }
  }
  assert.equal(open, openAllowed, 'calls without a result');
}

/** OpenAI's rule: an answer's tool calls are followed at once by one tool message each, before anything else. */
function assertWireOrder(messages: Array<{ role: string; tool_calls?: any[]; tool_call_id?: string }>): void {
  for (let i = 0; i < messages.length; i++) {
    const calls = messages[i].tool_calls ?? [];
    const next = messages.slice(i + 1, i + 1 + calls.length);
    assert.deepEqual(next.map((m) => m.tool_call_id), calls.map((c) => c.id), `the tool messages after message ${i} are out of order`);
  }
}

/** A script: the n-th answer of the list for each request, whatever was asked. */
function script(answers: ScriptedAnswer[]): (req: ScriptedRequest, n: number) => ScriptedAnswer {
  return (_req, n) => answers[n] ?? { content: 'out of script' };
}

describe('agent runtime', () => {
  let ws: string;
  before(() => {
    ws = workspace();
  });
  after(() => fs.rmSync(ws, { recursive: true, force: true }));

  for (const stream of [false, true]) {
    it(`works with files, shell and git, then finishes (${stream ? 'streamed' : 'plain'} answers)`, async () => {
      const dir = workspace();
      const model = await startScriptedModel(
        script([
          { content: 'Starting.', tool_calls: [{ name: 'update_plan', arguments: { steps: [{ step: 'write hello', status: 'in_progress' }] } }, { name: 'git_branch', arguments: { name: 'crewhouse/run-1' } }] },
          { tool_calls: [{ name: 'write_file', arguments: { path: 'repo/hello.txt', content: 'hello\nworld\n' } }] },
          { tool_calls: [{ name: 'edit_file', arguments: { path: 'repo/hello.txt', old_text: 'world', new_text: 'team' } }, { name: 'read_file', arguments: { path: 'repo/hello.txt' } }] },
          { tool_calls: [{ name: 'shell', arguments: { command: 'wc -l < hello.txt && echo err >&2 && exit 3', cwd: 'repo' } }] },
          { tool_calls: [{ name: 'search', arguments: { pattern: 'TEAM', case_sensitive: false, path: 'repo' } }, { name: 'list_files', arguments: { path: 'repo', glob: '*.txt' } }] },
          { tool_calls: [{ name: 'git_commit', arguments: { message: 'Say hello to the team' } }, { name: 'git_log', arguments: { max_count: 2 } }] },
          { tool_calls: [{ name: 'post_progress', arguments: { text: 'committed' } }, { name: 'finish', arguments: { outcome: 'succeeded', summary: 'Wrote hello.txt', branch: 'crewhouse/run-1' } }] },
        ]),
      );
      try {
        const journal = Journal.open(journalPath(dir, 'lead-1'));
        const outcome = await runTurn(config(dir, model), journal, { kind: 'task', text: 'Write hello.txt', from: 'person' }, deps({ stream }));
        assert.deepEqual(outcome, { kind: 'finished', outcome: 'succeeded', summary: 'Wrote hello.txt', branch: 'crewhouse/run-1', pull_request_url: null });
        assert.equal(fs.readFileSync(path.join(dir, 'repo/hello.txt'), 'utf8'), 'hello\nteam\n');
        const results = journal.all().filter((e): e is Extract<AgentEvent, { type: 'tool_result' }> => e.type === 'tool_result');
        const byName = (n: string) => results.find((r) => r.name === n)!;
        assert.match(byName('read_file').output, /1\thello\n2\tteam/);
        assert.equal(byName('shell').ok, false);
        assert.match(byName('shell').output, /exit code: 3[\s\S]*stdout:\n2\n[\s\S]*stderr:\nerr/);
        assert.match(byName('search').output, /hello.txt:2: team/);
        assert.match(byName('list_files').output, /hello\.txt/);
        assert.match(byName('git_commit').output, /^committed [0-9a-f]{40} Say hello to the team/);
        const branch = execFileSync('git', ['-C', path.join(dir, 'repo'), 'rev-parse', '--abbrev-ref', 'HEAD'], { encoding: 'utf8' }).trim();
        assert.equal(branch, 'crewhouse/run-1');
        assert.ok(journal.all().some((e) => e.type === 'plan'));
        assert.ok(journal.all().some((e) => e.type === 'progress' && e.text === 'committed'));
        assertCallsSettled(journal.all(), 1);
        // The model saw every earlier result: the last request holds one tool message per earlier call.
        const lastReq = model.requests.at(-1)!.body;
        const callIds = lastReq.messages.flatMap((m) => (m.tool_calls ?? []).map((c: any) => c.id));
        const toolIds = lastReq.messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id);
        assert.deepEqual(toolIds, callIds);
        assert.equal(lastReq.stream, stream);
        journal.close();
      } finally {
        await model.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  it('answers malformed and unknown tool calls with an error the model sees, and goes on', async () => {
    const model = await startScriptedModel(
      script([
        { tool_calls: [{ name: 'write_file', arguments: '{"path": "x.txt", "content": ' }, { name: 'teleport', arguments: {} }, { name: 'read_file', arguments: { path: 'x', offset: 0 } }] },
        { tool_calls: [{ name: 'finish', arguments: { outcome: 'failed', summary: 'gave up' } }] },
      ]),
    );
    try {
      const journal = Journal.open(journalPath(ws, 'malformed'));
      const outcome = await runTurn(config(ws, model), journal, { kind: 'task', text: 'x', from: 'person' }, deps());
      assert.equal(outcome.kind, 'finished');
      const results = journal.all().filter((e) => e.type === 'tool_result') as Array<Extract<AgentEvent, { type: 'tool_result' }>>;
      assert.equal(results.length, 3);
      assert.ok(results.every((r) => !r.ok));
      assert.match(results[0].output, /not valid JSON/);
      assert.match(results[1].output, /no tool named "teleport"/);
      assert.match(results[2].output, /offset must be >= 1/);
      const tools = model.requests[1].body.messages.filter((m) => m.role === 'tool');
      assert.equal(tools.length, 3);
      assert.ok(tools.every((m) => String(m.content).startsWith('ERROR: ')));
      journal.close();
    } finally {
      await model.close();
    }
  });

  it('retries an upstream that fails or answers garbage, then fails the turn with a reason; a spent budget is not retried', async () => {
    const model = await startScriptedModel(
      script([
        { status: 500 },
        { status: 200, body: '<html>oops</html>', contentType: 'text/html' },
        { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'ok' } }] },
        { status: 502 },
        { status: 502 },
        { status: 502 },
        { status: 502 },
        { status: 429, body: JSON.stringify({ error: { message: 'the team has spent its daily budget', type: 'budget_exceeded', param: null, code: 'team_budget_exceeded' } }) },
      ]),
    );
    try {
      const j1 = Journal.open(journalPath(ws, 'retry-1'));
      const slept: number[] = [];
      const ok = await runTurn(config(ws, model), j1, { kind: 'task', text: 'x', from: 'person' }, deps({ sleep: async (ms) => void slept.push(ms) }));
      assert.equal(ok.kind, 'finished');
      assert.deepEqual(slept, [1000, 2000]);
      assert.equal(j1.all().filter((e) => e.type === 'model_error').length, 2);

      const j2 = Journal.open(journalPath(ws, 'retry-2'));
      const failed = await runTurn(config(ws, model), j2, { kind: 'task', text: 'x', from: 'person' }, deps());
      assert.equal(failed.kind, 'failed');
      assert.match((failed as { reason: string }).reason, /answered 502/);
      assert.equal((failed as { cause?: string }).cause, undefined, 'an unreachable model may answer next time');
      assert.equal(j2.all().filter((e) => e.type === 'model_error').length, 4);

      const j3 = Journal.open(journalPath(ws, 'retry-3'));
      const budget = await runTurn(config(ws, model), j3, { kind: 'task', text: 'x', from: 'person' }, deps());
      assert.equal(budget.kind, 'failed');
      assert.match((budget as { reason: string }).reason, /^the budget is spent: the team has spent its daily budget/);
      assert.doesNotMatch((budget as { reason: string }).reason, /could not be reached/, 'a spent budget is not an unreachable model');
      assert.equal((budget as { cause?: string }).cause, 'budget', 'the failure says a retry fails the same way until the budget resets');
      assert.equal(j3.all().filter((e) => e.type === 'model_error').length, 1);
      for (const j of [j1, j2, j3]) j.close();
    } finally {
      await model.close();
    }
  });

  it('asks the person and continues with the answer as the result of the question', async () => {
    const model = await startScriptedModel(
      script([
        { tool_calls: [{ name: 'ask_person', arguments: { question: 'Which colour?', options: ['red', 'blue'] } }, { name: 'read_file', arguments: { path: 'nope.txt' } }] },
        { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'blue it is' } }] },
      ]),
    );
    try {
      const journal = Journal.open(journalPath(ws, 'ask'));
      const c = config(ws, model);
      const q = await runTurn(c, journal, { kind: 'task', text: 'paint', from: 'person' }, deps());
      assert.deepEqual(q, { kind: 'question', question: 'Which colour?', options: ['red', 'blue'] });
      assertCallsSettled(journal.all(), 1);
      const done = await runTurn(c, journal, { kind: 'answer', text: 'blue' }, deps());
      assert.equal(done.kind, 'finished');
      assertCallsSettled(journal.all(), 1);
      const toolMsgs = model.requests[1].body.messages.filter((m) => m.role === 'tool');
      assert.ok(toolMsgs.some((m) => m.content === 'The answer: blue'));
      journal.close();
    } finally {
      await model.close();
    }
  });

  it('confirm_risky stops before a risky call; an approval runs it, a refusal tells the model', async () => {
    const marker = path.join(ws, 'ran.txt');
    const risky: ScriptedAnswer = { tool_calls: [{ name: 'shell', arguments: { command: `echo x >> ${marker}` } }, { name: 'read_file', arguments: { path: marker } }] };
    const model = await startScriptedModel(
      script([
        { tool_calls: [{ name: 'http_request', arguments: { method: 'GET', url: 'http://127.0.0.1:9/' } }] },
        risky,
        { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'done' } }] },
        risky,
        { tool_calls: [{ name: 'finish', arguments: { outcome: 'failed', summary: 'refused' } }] },
      ]),
    );
    try {
      const c = config(ws, model, { confirmation_policy: 'confirm_risky' });
      const journal = Journal.open(journalPath(ws, 'confirm'));
      const first = await runTurn(c, journal, { kind: 'task', text: 'go', from: 'person' }, deps());
      assert.equal(first.kind, 'confirmation');
      assert.match((first as { reason: string }).reason, /^shell command: echo x/);
      // A GET is not risky: it ran without asking (and failed to connect).
      assert.ok(journal.all().some((e) => e.type === 'tool_result' && e.name === 'http_request'));
      assert.equal(fs.existsSync(marker), false);
      const approved = await runTurn(c, journal, { kind: 'confirmation', approved: true }, deps());
      assert.equal(approved.kind, 'finished');
      assert.equal(fs.readFileSync(marker, 'utf8'), 'x\n');
      assertCallsSettled(journal.all(), 1);

      // A new message while a confirmation is open: the open calls are settled, not run.
      const j2 = Journal.open(journalPath(ws, 'confirm-2'));
      assert.equal((await runTurn(c, j2, { kind: 'task', text: 'go', from: 'person' }, deps())).kind, 'confirmation');
      assert.equal((await runTurn(c, j2, { kind: 'task', text: 'never mind', from: 'person' }, deps())).kind, 'finished');
      assert.equal(fs.readFileSync(marker, 'utf8'), 'x\n');
      assertCallsSettled(j2.all(), 1);
      for (const r of model.requests) assertWireOrder(r.body.messages);
      journal.close();
      j2.close();
    } finally {
      await model.close();
    }
  });

  it('a refused confirmation is reported to the model and nothing runs', async () => {
    const marker = path.join(ws, 'refused.txt');
    const model = await startScriptedModel(
      script([
        { tool_calls: [{ name: 'delete_file', arguments: { path: marker } }] },
        { tool_calls: [{ name: 'finish', arguments: { outcome: 'failed', summary: 'the person said no' } }] },
      ]),
    );
    fs.writeFileSync(marker, 'keep');
    try {
      const c = config(ws, model, { confirmation_policy: 'confirm_risky' });
      const journal = Journal.open(journalPath(ws, 'refuse'));
      assert.equal((await runTurn(c, journal, { kind: 'task', text: 'clean', from: 'person' }, deps())).kind, 'confirmation');
      const done = await runTurn(c, journal, { kind: 'confirmation', approved: false, note: 'keep it' }, deps());
      assert.equal(done.kind, 'finished');
      assert.equal(fs.readFileSync(marker, 'utf8'), 'keep');
      const refusal = model.requests[1].body.messages.find((m) => m.role === 'tool');
      assert.match(String(refusal?.content), /refused this action: keep it/);
      journal.close();
    } finally {
      await model.close();
    }
  });

  it('resumes after a kill: a started tool call is reported as interrupted, never run again', async () => {
    const counter = path.join(ws, 'count.txt');
    const model = await startScriptedModel(
      script([
        { tool_calls: [{ name: 'shell', arguments: { command: `echo $$ > ${counter}.pid; echo 1 >> ${counter}; exec sleep 30` } }] },
        { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'resumed' } }] },
      ]),
    );
    try {
      const c = config(ws, model);
      const file = journalPath(ws, 'resume');
      // Run the turn in a child process and kill it while the shell command runs.
      const child = spawn(process.execPath, [path.join(import.meta.dirname, 'main.ts')], { stdio: ['pipe', 'pipe', 'pipe'] });
      child.stdin.end(JSON.stringify({ op: 'turn', conversation: 'resume', config: c, input: { kind: 'task', text: 'count', from: 'person' } }));
      let out = '';
      let err = '';
      child.stderr.on('data', (d) => (err += d));
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (d) => {
          out += d;
          if (out.includes('"tool_started"')) resolve();
        });
        // Says how (a CI run once saw it end with nothing written): its exit code or signal, and what it wrote on stderr.
        child.on('exit', (code, signal) => reject(new Error(`the runtime exited early (${signal ?? `code ${code}`}): ${out} ${err}`)));
      });
      child.removeAllListeners('exit');
      // Kill it once the command has taken effect (it keeps running in its own process group).
      for (let i = 0; i < 200 && !fs.existsSync(counter); i++) await new Promise((r) => setTimeout(r, 25));
      const exited = new Promise((r) => child.on('exit', r));
      child.kill('SIGKILL');
      await exited;
      process.kill(-Number(fs.readFileSync(`${counter}.pid`, 'utf8')), 'SIGKILL');
      // A torn last line, as a kill during a write leaves it.
      fs.appendFileSync(file, '{"seq": 99, "type": "tool_res');
      assert.equal(fs.readFileSync(counter, 'utf8'), '1\n');

      const journal = Journal.open(file);
      assert.equal(journal.all().at(-1)!.type, 'tool_started');
      const done = await runTurn(c, journal, { kind: 'resume' }, deps());
      assert.equal(done.kind, 'finished');
      assert.equal(fs.readFileSync(counter, 'utf8'), '1\n');
      const interrupted = journal.all().find((e) => e.type === 'tool_result');
      assert.ok(interrupted && interrupted.type === 'tool_result' && interrupted.interrupted === true);
      assertCallsSettled(journal.all(), 1);
      // Seqs have no gaps: the torn line was dropped.
      journal.all().forEach((e, i) => assert.equal(e.seq, i + 1));
      journal.close();
    } finally {
      await model.close();
    }
  });

  it('group commit: one fdatasync per effect, each event told once and in order only after it is synced, each tool started only after its start is synced, a model call synced behind its request and its answer acted on only after', async () => {
    const dir = workspace();
    const file = journalPath(dir, 'group');
    const marks = path.join(dir, 'marks');
    // Each tool writes how many journal lines there are as it runs, after the syncs the journal made so far.
    const step = { tool_calls: [{ name: 'shell', arguments: { command: `echo "tool $(wc -l < ${file})" >> ${marks}` } }] };
    const model = await startScriptedModel(script([step, step, { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'done' } }] }]));
    const realSync = fs.fdatasyncSync;
    let synced = 0;
    const mark = () => {
      synced = fs.readFileSync(file, 'utf8').split('\n').length - 1;
      fs.appendFileSync(marks, `sync ${synced}\n`);
    };
    const syncs = mock.method(fs, 'fdatasyncSync', (fd: number) => {
      realSync(fd);
      mark();
    });
    // A model call's sync runs behind its request; made slower here than the model's answer, which must still wait for it.
    const realAsync = fs.fdatasync;
    let behind = 0;
    const asyncSyncs = mock.method(fs, 'fdatasync', (fd: number, cb: (err: NodeJS.ErrnoException | null) => void) => {
      behind++;
      realAsync(fd, (err) => setTimeout(() => (mark(), cb(err)), 150));
    });
    try {
      const journal = Journal.open(file);
      const told: number[] = [];
      journal.onDurable((events) => {
        for (const e of events) {
          assert.ok(e.seq <= synced, `event ${e.seq} (${e.type}) was told before it was synced (synced up to ${synced})`);
          told.push(e.seq);
        }
      });
      const outcome = await runTurn(config(dir, model), journal, { kind: 'task', text: 'two steps', from: 'person' }, deps());
      assert.equal(outcome.kind, 'finished');
      journal.close();
      const types = journal.all().map((e) => e.type);
      assert.deepEqual(types, ['input', 'model_call', 'model_reply', 'tool_started', 'tool_result', 'model_call', 'model_reply', 'tool_started', 'tool_result', 'model_call', 'model_reply', 'turn_end']);
      assert.deepEqual(told, types.map((_, i) => i + 1), 'every event told once, in order');
      const lines = fs.readFileSync(marks, 'utf8').trim().split('\n');
      // The reply is synced with its tool's start, the result with the next model call, the last reply with the turn's end.
      assert.deepEqual(lines, ['sync 1', 'sync 2', 'sync 4', 'tool 4', 'sync 6', 'sync 8', 'tool 8', 'sync 10', 'sync 12']);
      assert.equal(behind, 3, 'each model call synced behind its request');
    } finally {
      syncs.mock.restore();
      asyncSyncs.mock.restore();
      await model.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a cancel kills a running tool and ends the turn cancelled', async () => {
    const model = await startScriptedModel(script([{ tool_calls: [{ name: 'shell', arguments: { command: 'sleep 60' } }] }]));
    try {
      const journal = Journal.open(journalPath(ws, 'cancel'));
      const controller = new AbortController();
      journal.onDurable((events) => {
        if (events.some((e) => e.type === 'tool_started')) setImmediate(() => controller.abort());
      });
      const outcome = await runTurn(config(ws, model), journal, { kind: 'task', text: 'wait', from: 'person' }, deps({ signal: controller.signal }));
      assert.deepEqual(outcome, { kind: 'cancelled' });
      assertCallsSettled(journal.all(), 0);
      journal.close();
    } finally {
      await model.close();
    }
  });

  it('stops at the iteration cap; only the lead may finish; hand_off names a real role', async () => {
    const model = await startScriptedModel((req) =>
      req.system.includes('"coder" role')
        ? req.body.messages.filter((m) => m.role === 'tool').length === 0
          ? { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'x' } }, { name: 'hand_off', arguments: { summary: 's', to_role: 'ghost' } }] }
          : { tool_calls: [{ name: 'hand_off', arguments: { summary: 'coded it', branch: 'b1' } }] }
        : { tool_calls: [{ name: 'list_files', arguments: {} }] },
    );
    try {
      const capped = await runTurn(config(ws, model, { max_iterations: 3 }), Journal.open(journalPath(ws, 'cap')), { kind: 'task', text: 'loop', from: 'person' }, deps());
      assert.deepEqual(capped, { kind: 'iteration_cap', iterations: 3 });
      const coder = config(ws, model, { role: 'coder', lead: false, next_role: 'reviewer' });
      const journal = Journal.open(journalPath(ws, 'coder'));
      const handed = await runTurn(coder, journal, { kind: 'task', text: 'code', from: 'lead' }, deps());
      assert.deepEqual(handed, { kind: 'hand_off', to_role: 'reviewer', summary: 'coded it', branch: 'b1' });
      const errors = journal.all().filter((e) => e.type === 'tool_result' && !e.ok).map((e) => (e as { output: string }).output);
      assert.match(errors[0], /only the lead ends the run/);
      assert.match(errors[1], /no role "ghost"/);
      journal.close();
    } finally {
      await model.close();
    }
  });

  it('keeps a long conversation inside the window: masks old tool output, then summarizes', async () => {
    const big = 'x'.repeat(6000);
    fs.writeFileSync(path.join(ws, 'big.txt'), big);
    let summaries = 0;
    const model = await startScriptedModel((req, n) => {
      if (req.body.tools === undefined) {
        summaries++;
        return { content: 'SUMMARY: read big.txt several times' };
      }
      // Tool output can be masked; the model's own long answers cannot, so later a summary is needed.
      return n < 12
        ? { content: n > 4 ? `thinking ${'y'.repeat(3000)}` : null, tool_calls: [{ name: 'read_file', arguments: { path: 'big.txt' } }] }
        : { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'read' } }] };
    });
    try {
      const journal = Journal.open(journalPath(ws, 'window'));
      const outcome = await runTurn(config(ws, model, { context_tokens: 6000 }), journal, { kind: 'task', text: 'read a lot', from: 'person' }, deps());
      assert.equal(outcome.kind, 'finished');
      assert.ok(journal.all().some((e) => e.type === 'context_masked'));
      assert.ok(summaries >= 1 && journal.all().some((e) => e.type === 'context_summarized'));
      for (const r of model.requests.filter((q) => q.body.tools)) {
        const chars = r.body.messages.reduce((k, m) => k + String(m.content ?? '').length, 0);
        assert.ok(chars / 4 <= 6000, `a request of ${chars / 4} tokens went over the window`);
        const callIds = r.body.messages.flatMap((m) => (m.tool_calls ?? []).map((c: any) => c.id));
        assert.deepEqual(r.body.messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id), callIds);
      }
      journal.close();
    } finally {
      await model.close();
    }
  });

  it('the entry point streams events as JSON lines and replays them from a seq', async () => {
    const model = await startScriptedModel(script([{ tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'quick' } }] }]));
    const run = (request: unknown): Promise<{ code: number | null; lines: any[] }> =>
      new Promise((resolve) => {
        const child = spawn(process.execPath, [path.join(import.meta.dirname, 'main.ts')], { stdio: ['pipe', 'pipe', 'pipe'] });
        let out = '';
        child.stdout.on('data', (d) => (out += d));
        child.on('exit', (code) => resolve({ code, lines: out.split('\n').filter(Boolean).map((l) => JSON.parse(l)) }));
        child.stdin.end(typeof request === 'string' ? request : JSON.stringify(request));
      });
    try {
      const input: AgentInput = { kind: 'task', text: 'hi', from: 'person' };
      const turn = await run({ op: 'turn', conversation: 'entry', config: config(ws, model), input });
      assert.equal(turn.code, 0);
      assert.deepEqual(turn.lines.map((l) => l.type), ['input', 'model_call', 'model_reply', 'turn_end']);
      const replay = await run({ op: 'events', conversation: 'entry', workspace: ws, after: 2 });
      assert.deepEqual(replay.lines, turn.lines.slice(2));
      assert.equal((await run('not json')).code, 2);
      assert.equal((await run({ op: 'events', conversation: '../escape', workspace: ws, after: 0 })).code, 2);
    } finally {
      await model.close();
    }
  });
});
