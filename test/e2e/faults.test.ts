// Runs under faults, through a real `local` sandbox, the real gateway and the model proxy: a
// risky tool waits for a person's confirmation (approved, refused, answered ambiguously), a
// cancel stops a long tool and the agent loop, and a watcher follows the posts live over SSE
// and resumes with Last-Event-ID.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { lastText, processesWith, startStack, stackSkip, waitFor, type Stack } from './stack.ts';

/** The scenario and token a run's task names ("SCENARIO confirm TOKEN abc"), read from the first user message. */
function scenarioOf(req: ScriptedRequest): { scenario: string; token: string } {
  const first = String(req.body.messages.find((m) => m.role === 'user')?.content ?? '');
  // The team memory block quotes earlier tasks ("Asked: SCENARIO ..."); the task itself is the one not quoted.
  const m = /(?<!Asked: )SCENARIO (\S+) TOKEN (\S+)/.exec(first);
  return { scenario: m?.[1] ?? '?', token: m?.[2] ?? '?' };
}

const toolResults = (req: ScriptedRequest) => req.body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content ?? ''));

/** A file of a sandbox workspace, found under the stack's sandbox directory. */
function workspaceFile(stack: Stack, name: string): string | null {
  const files = fs.readdirSync(stack.sandboxDir, { recursive: true }) as string[];
  const hit = files.find((f) => f.endsWith(`workspace${path.sep}${name}`));
  return hit ? path.join(stack.sandboxDir, hit) : null;
}

/** Every event of a conversation's journal in its sandbox. */
function journalOf(stack: Stack, conversation: string): Array<Record<string, any>> {
  const file = workspaceFile(stack, path.join('.crewhouse', 'conversations', `${conversation}.jsonl`));
  if (!file) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/** Every tool call the model made has exactly one result in the journal (`finish` ends the conversation and gets none). */
function assertEveryCallSettled(events: Array<Record<string, any>>) {
  const calls = events.filter((e) => e.type === 'model_reply').flatMap((e) => e.tool_calls.filter((c: { name: string }) => c.name !== 'finish').map((c: { id: string }) => c.id));
  const results = events.filter((e) => e.type === 'tool_result').map((e) => e.call_id);
  assert.ok(calls.length > 0);
  for (const id of calls) assert.equal(results.filter((r) => r === id).length, 1, `call ${id} has one result: ${JSON.stringify(events.map((e) => e.type))}`);
  assert.equal(results.length, calls.length);
}


describe('runs under faults', { skip: stackSkip }, () => {
  let stack: Stack;
  // Model answers the SSE test releases one at a time, so posts arrive while it watches.
  const gates = new Map<string, Array<() => void>>();
  const gate = (token: string) => new Promise<void>((resolve) => (gates.get(token) ?? gates.set(token, []).get(token)!).push(resolve));

  async function script(req: ScriptedRequest): Promise<ScriptedAnswer> {
    const { scenario, token } = scenarioOf(req);
    const results = toolResults(req);
    const last = lastText(req);
    switch (scenario) {
      case 'confirm':
        if (!results.length) return { tool_calls: [{ name: 'shell', arguments: { command: `echo ran > effect-${token}.txt` } }] };
        if (last.includes('refused')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'the person refused; nothing was written' } }] };
        return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'the file is written' } }] };
      case 'cancel':
        if (!results.length) return { tool_calls: [{ name: 'shell', arguments: { command: `echo started > started-${token}.txt; sleep 600.${token}; echo finished > finished-${token}.txt` } }] };
        return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'should not get here' } }] };
      case 'sse': {
        const n = results.length;
        if (n > 0) await gate(token);
        if (n < 3) return { tool_calls: [{ name: 'post_progress', arguments: { text: `step ${n + 1} of ${token}` } }] };
        return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `done ${token}` } }] };
      }
      case 'egress': {
        // Two requests the gateway refuses for one reason, a question, then one more after the answer.
        const n = results.length;
        if (n < 2) return { tool_calls: [{ name: 'http_request', arguments: { method: 'GET', url: `http://nowhere-${token}.invalid/${n}` } }] };
        if (n === 2) return { tool_calls: [{ name: 'ask_person', arguments: { question: `go on with ${token}?` } }] };
        if (n === 3) return { tool_calls: [{ name: 'http_request', arguments: { method: 'GET', url: `http://nowhere-${token}.invalid/after` } }] };
        return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `egress ${token} seen` } }] };
      }
      default:
        return { tool_calls: [{ name: 'finish', arguments: { outcome: 'failed', summary: `unknown scenario in ${last.slice(0, 100)}` } }] };
    }
  }

  before(async () => {
    stack = await startStack({ script, config: { SERVICE_LOG_LEVEL: 'info' } });
  });

  after(async () => {
    await stack?.stop();
  });

  const api = (method: string, url: string, body?: unknown) => stack.t.request({ method, url, token: stack.t.adminToken, body });
  const tools = ['shell', 'write_file', 'read_file', 'post_progress', 'ask_person', 'finish'];

  // One team for every scenario: its one sandbox goes from run to run as each ends and lets it go.
  let shared: string | null = null;
  async function confirmTeam() {
    shared ??= await stack.makeTeam({ roles: { lead: { tools, system_prompt: 'You lead.', role: { confirmation_policy: 'confirm_risky' } } } });
    return shared;
  }

  it('confirm_risky: a risky call waits for the person; "approve" runs it; an ambiguous answer is a 422', async () => {
    const team = await confirmTeam();
    const token = crypto.randomBytes(4).toString('hex');
    const id = await stack.giveTask(team, `SCENARIO confirm TOKEN ${token}`);
    const waiting = await stack.waitForState(id, 'waiting');
    assert.equal(waiting.waiting_for.role, 'lead');
    assert.equal(waiting.waiting_for.kind, 'confirmation');
    assert.ok(!Number.isNaN(Date.parse(waiting.waiting_for.since)));
    assert.match(waiting.open_question.text, new RegExp(`shell command: echo ran > effect-${token}\\.txt`));
    assert.equal(workspaceFile(stack, `effect-${token}.txt`), null, 'nothing ran before the person answered');

    const ambiguous = await api('POST', `/api/v1/runs/${id}/replies`, { text: 'hmm, maybe later', in_reply_to: waiting.open_question.seq });
    assert.equal(ambiguous.status, 422, ambiguous.text);
    assert.match(ambiguous.text, /approve.*refuse/);
    assert.equal((await stack.run(id)).state, 'waiting', 'an ambiguous answer leaves the question open');

    const ok = await api('POST', `/api/v1/runs/${id}/replies`, { text: 'approve', in_reply_to: waiting.open_question.seq });
    assert.equal(ok.status, 202, ok.text);
    const done = await stack.waitForState(id, 'succeeded');
    assert.equal(done.open_question, null);
    const effect = workspaceFile(stack, `effect-${token}.txt`);
    assert.ok(effect, 'the approved command ran');
    assert.equal(fs.readFileSync(effect!, 'utf8'), 'ran\n');
    const posts = await stack.posts(id);
    assert.ok(posts.some((p) => p.kind === 'answer' && p.data?.approved === true));
    assertEveryCallSettled(journalOf(stack, `${id}.lead`));
  });

  it('confirm_risky: a refusal reaches the agent and the tool never runs', async () => {
    const team = await confirmTeam();
    const token = crypto.randomBytes(4).toString('hex');
    const id = await stack.giveTask(team, `SCENARIO confirm TOKEN ${token}`);
    const waiting = await stack.waitForState(id, 'waiting');
    assert.equal(waiting.waiting_for.kind, 'confirmation');
    const no = await api('POST', `/api/v1/runs/${id}/replies`, { text: 'refuse: not on this machine', in_reply_to: waiting.open_question.seq });
    assert.equal(no.status, 202, no.text);
    const done = await stack.waitForState(id, 'succeeded');
    assert.equal((done.tasks as Array<{ state: string }>).at(-1)!.state, 'done');
    const events = journalOf(stack, `${id}.lead`);
    const result = events.find((e) => e.type === 'tool_result' && e.name === 'shell');
    assert.ok(result && result.ok === false && /refused this action: refuse: not on this machine/.test(result.output), JSON.stringify(result));
    assert.ok(!events.some((e) => e.type === 'tool_started'), 'the refused call never started');
    assert.equal(workspaceFile(stack, `effect-${token}.txt`), null, 'the refused command never ran');
    assert.ok((await stack.posts(id)).some((p) => p.kind === 'completed' && /refused/.test(p.text)));
    assertEveryCallSettled(events);
  });

  it('a cancel during a long tool stops the tool and the agent loop; a second cancel is 409', async () => {
    const team = await confirmTeam();
    const token = String(crypto.randomInt(100000, 999999));
    const sleeper = ['sleep', `600.${token}`];
    const id = await stack.giveTask(team, `SCENARIO cancel TOKEN ${token}`);
    const waiting = await stack.waitForState(id, 'waiting');
    assert.equal((await api('POST', `/api/v1/runs/${id}/replies`, { text: 'yes', in_reply_to: waiting.open_question.seq })).status, 202);
    await waitFor('the long tool to run in the sandbox', async () => {
      const run = await stack.run(id);
      assert.equal(run.state, 'running', JSON.stringify([run, journalOf(stack, `${id}.lead`)]));
      return workspaceFile(stack, `started-${token}.txt`) !== null && processesWith(sleeper).length > 0;
    });

    const cancel = await api('POST', `/api/v1/runs/${id}/cancel`);
    assert.equal(cancel.status, 200, cancel.text);
    assert.equal(cancel.body.state, 'cancelled');
    const again = await api('POST', `/api/v1/runs/${id}/cancel`);
    assert.equal(again.status, 409, again.text);
    assert.match(again.body.detail, /already cancelled/);

    await waitFor('the long tool to be gone from the sandbox', async () => processesWith(sleeper).length === 0);
    // The first turn ended at the confirmation; wait for the turn the cancel ends.
    const events = await waitFor('the agent loop to end cancelled', async () => {
      const j = journalOf(stack, `${id}.lead`);
      return j.filter((e) => e.type === 'turn_end').length >= 2 ? j : null;
    });
    assert.deepEqual(events.at(-1)!.outcome, { kind: 'cancelled' });
    assertEveryCallSettled(events);
    const shell = events.find((e) => e.type === 'tool_result' && e.name === 'shell')!;
    assert.equal(shell.ok, false);
    assert.equal(shell.interrupted, true);
    assert.equal(workspaceFile(stack, `finished-${token}.txt`), null, 'the command after the sleep never ran');

    const run = await stack.run(id);
    assert.equal(run.state, 'cancelled');
    assert.deepEqual(run.tasks.map((x: { state: string }) => x.state), ['cancelled']);
    const posts = await stack.posts(id);
    assert.equal(posts.filter((p) => p.kind === 'canceled').length, 1);
    assert.equal(posts.at(-1)!.kind, 'canceled', 'nothing is posted after the cancel');
  });

  it('a watcher gets posts live over SSE (id = seq) and resumes with Last-Event-ID without loss or repeat', async () => {
    const team = await confirmTeam();
    const token = crypto.randomBytes(4).toString('hex');
    await stack.t.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (stack.t.app.server.address() as AddressInfo).port;
    const id = await stack.giveTask(team, `SCENARIO sse TOKEN ${token}`);
    const release = async (n: number) => {
      await waitFor(`the model to wait at step ${n}`, async () => {
        const run = await stack.run(id);
        assert.equal(run.state, 'running', JSON.stringify(run));
        return (gates.get(token)?.length ?? 0) > 0;
      });
      gates.get(token)!.shift()!();
    };

    /** Opens the stream; collects events until `until` says enough, then closes it. */
    const watch = (headers: Record<string, string>, until: (events: Array<{ id: number; event: string; data: any }>) => boolean) =>
      new Promise<Array<{ id: number; event: string; data: any }>>((resolve, reject) => {
        const req = http.get({ host: '127.0.0.1', port, path: `/api/v1/runs/${id}/posts`, headers: { accept: 'text/event-stream', authorization: `Bearer ${stack.t.adminToken}`, ...headers } }, (res) => {
          if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
          assert.match(String(res.headers['content-type']), /^text\/event-stream/);
          const events: Array<{ id: number; event: string; data: any }> = [];
          let buf = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            buf += c;
            let end;
            while ((end = buf.indexOf('\n\n')) >= 0) {
              const block = buf.slice(0, end);
              buf = buf.slice(end + 2);
              const fields = Object.fromEntries(block.split('\n').filter((l) => !l.startsWith(':') && l.includes(':')).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
              if (fields.id === undefined) continue;
              events.push({ id: Number(fields.id), event: fields.event, data: JSON.parse(fields.data) });
              if (until(events)) {
                req.destroy();
                resolve(events);
              }
            }
          });
          res.on('error', () => {});
        });
        req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
      });

    // The first watcher sees the task and step 1, then goes away.
    const progress = (events: Array<{ data: any }>) => events.filter((e) => e.data.kind === 'working' && /^step \d/.test(e.data.text)).length;
    const first = await watch({}, (events) => progress(events) >= 1);
    assert.equal(first[0].data.kind, 'task');
    first.forEach((e) => assert.equal(e.id, e.data.seq, 'the event id is the seq'));
    // While nobody watches, step 2 is posted; a watcher that resumes gets it, then step 3 live, and the end.
    await release(2);
    const resumed = watch({ 'last-event-id': String(first.at(-1)!.id) }, (events) => events.some((e) => ['completed', 'failed', 'canceled'].includes(e.data.kind)));
    await waitFor('step 2 to be posted', async () => (await stack.posts(id)).some((p) => p.text === `step 2 of ${token}`));
    await release(3);
    await release(4);
    const second = await resumed;
    const seqs = [...first, ...second].map((e) => e.id);
    const all = await stack.posts(id);
    assert.deepEqual(seqs.filter((s) => s <= all.at(-1)!.seq), all.map((p) => p.seq).slice(0, seqs.length), 'every post exactly once, in order');
    assert.equal(second[0].id, first.at(-1)!.id + 1, 'the resume starts right after the last event seen');
    assert.deepEqual(
      [...first, ...second].filter((e) => e.data.kind === 'working' && /^step/.test(e.data.text)).map((e) => e.data.text),
      [1, 2, 3].map((n) => `step ${n} of ${token}`),
    );
    assert.equal(second.at(-1)!.event, 'completed');
    await stack.waitForState(id, 'succeeded');
  });

  it("gateway refusals become notices once each, under the policy of the run's pinned agent version", async () => {
    const team = await stack.makeTeam({ roles: { lead: { tools: ['http_request', 'ask_person', 'finish'], system_prompt: 'You lead.' } } });
    const agent = (await api('GET', `/api/v1/teams/${team}`)).body.role_settings.find((r: { role: string }) => r.role === 'lead').agent as string;
    const version = async (egress: unknown) => {
      const etag = String((await api('GET', `/api/v1/agents/${agent}`)).headers.etag);
      const r = await stack.t.request({ method: 'POST', url: `/api/v1/agents/${agent}/versions`, token: stack.t.adminToken, headers: { 'if-match': etag }, body: { from_version: 1, egress, note: 'egress' } });
      assert.equal(r.status, 201, r.text);
      return r.body.version as number;
    };
    const strict = await version({ mode: 'allowlist', destinations: [] });
    // What the gateway recorded for the requests to a token's host: the rule of each refusal.
    const refusalsOf = async (tok: string) =>
      (await sql<{ rule: string }>`select rule from egress_events where host = ${`nowhere-${tok}.invalid:80`} order by id`.execute(stack.t.db)).rows.map((r) => r.rule);
    const notices = async (id: string) => (await stack.posts(id)).filter((p) => p.kind === 'notice' && /gateway refused/.test(p.text));

    const token = crypto.randomBytes(4).toString('hex');
    const id = await stack.giveTask(team, `SCENARIO egress TOKEN ${token}`);
    const waiting = await stack.waitForState(id, 'waiting');
    assert.equal(waiting.agent_versions.lead, strict);
    const before = await notices(id);
    assert.equal(before.length, 1, `two refusals for one reason are one notice: ${JSON.stringify(await stack.posts(id))}`);
    assert.equal(before[0].data?.role, 'lead');
    assert.equal(before[0].data?.host, `nowhere-${token}.invalid:80`);
    assert.equal(before[0].data?.rule, 'no_destination');
    assert.ok(before[0].text.includes(`lead role to nowhere-${token}.invalid:80: no destination of the role's allowlist matches nowhere-${token}.invalid:80`), before[0].text);

    // A newer version allows everything public; the waiting run keeps the version it started with.
    const open = await version({ mode: 'allow_all' });
    assert.ok(open > strict);
    assert.equal((await api('POST', `/api/v1/runs/${id}/replies`, { text: 'go on', in_reply_to: waiting.open_question.seq })).status, 202);
    await stack.waitForState(id, 'succeeded');
    assert.equal(journalOf(stack, `${id}.lead`).filter((e) => e.type === 'tool_result' && e.name === 'http_request').length, 3);
    assert.deepEqual(await refusalsOf(token), ['no_destination', 'no_destination', 'no_destination'], 'the pinned allowlist refused every request, the one after the new version too');
    assert.deepEqual((await notices(id)).map((p) => p.data?.rule), ['no_destination']);

    // A new run gets the newer version: allow_all lets the gateway try the name (which does not resolve) instead of refusing it.
    const token2 = crypto.randomBytes(4).toString('hex');
    const id2 = await stack.giveTask(team, `SCENARIO egress TOKEN ${token2}`);
    const waiting2 = await stack.waitForState(id2, 'waiting');
    assert.equal(waiting2.agent_versions.lead, open);
    assert.equal(journalOf(stack, `${id2}.lead`).filter((e) => e.type === 'tool_result' && e.name === 'http_request').length, 2);
    assert.ok(!(await refusalsOf(token2)).includes('no_destination'));
    const second = await notices(id2);
    assert.ok(!second.some((p) => p.data?.rule === 'no_destination'), JSON.stringify(second));
    assert.equal((await api('POST', `/api/v1/runs/${id2}/cancel`)).status, 200);

    // No secret in any notice: the role's model key never appears.
    const key = await stack.t.services.teamsDirectory.roleModelKey(team, 'lead');
    assert.ok(key);
    for (const p of [...(await notices(id)), ...second]) assert.ok(!JSON.stringify(p).includes(key!));
  });
});
