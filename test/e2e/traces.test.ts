// A run's trace: the run, each role's task, each model and tool call become spans with the GenAI
// semantic conventions, exported over OTLP/HTTP (JSON) from the trace outbox to a collector that
// is down when the run ends and comes up later; every span arrives exactly once, parented right,
// with no prompt, completion or tool content, and the trace route reads them back from Jaeger's
// query API. A run reopened by follow-ups keeps its root span as it was first sent; each reopening
// is a span of its own under it, holding the follow-up's tasks.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { startFakeCollector, type FakeCollector } from '../fakes/otlp-collector.ts';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { lastText, roleOf, startStack, stackSkip, waitFor, type Stack } from './stack.ts';

const SECRET_WORD = 'PINEAPPLE-7731';

describe('run traces over OTLP', { skip: stackSkip }, () => {
  let stack: Stack;
  let collector: FakeCollector;

  // The lead hands off; the dev writes a file holding the task's secret word and hands back; the lead finishes.
  function script(req: ScriptedRequest): ScriptedAnswer {
    const role = roleOf(req);
    const toolResults = req.body.messages.filter((m) => m.role === 'tool').length;
    if (role === 'dev') {
      if (toolResults === 0) return { content: `Writing the word ${SECRET_WORD}.`, tool_calls: [{ name: 'write_file', arguments: { path: 'word.txt', content: `${SECRET_WORD}\n` } }], usage: { prompt_tokens: 120, completion_tokens: 30 } };
      return { tool_calls: [{ name: 'hand_off', arguments: { summary: 'word.txt is written' } }], usage: { prompt_tokens: 150, completion_tokens: 12 } };
    }
    // A follow-up to the ended run: the lead finishes again at once.
    if (role === 'lead' && lastText(req).includes('FOLLOW-UP')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'checked again' } }] };
    if (req.body.messages.some((m) => String(m.content ?? '').includes('word.txt is written'))) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'done' } }] };
    return { content: 'Handing it to the dev.', tool_calls: [{ name: 'hand_off', arguments: { summary: `Write word.txt holding ${SECRET_WORD}.` } }] };
  }

  before(async () => {
    collector = await startFakeCollector();
    stack = await startStack({ script, config: { SERVICE_OTLP_ENDPOINT: collector.url, SERVICE_JAEGER_URL: collector.url } });
  });

  const outboxSize = async () => Number((await sql<{ n: string }>`select count(*) as n from trace_outbox`.execute(stack.t.db)).rows[0].n);

  after(async () => {
    await stack?.stop();
    await collector?.close();
  });

  it('exports each span once after the collector comes back, parented, with GenAI attributes and no content', async () => {
    collector.down = true;
    const team = await stack.makeTeam({ roles: { lead: { tools: ['hand_off', 'finish'] }, dev: { tools: ['write_file', 'hand_off'] } }, pipeline: { lead: 'dev' } });
    const runId = await stack.giveTask(team, `Write word.txt holding the word ${SECRET_WORD}.`);
    const run = await stack.waitForState(runId, 'succeeded');
    assert.deepEqual(run.tasks.map((x: { role: string }) => x.role), ['lead', 'dev', 'lead']);

    // The collector refused while down; the run did not wait for it.
    await waitFor('an export the collector refused', async () => collector.refused > 0);
    assert.equal(collector.spans.length, 0);
    collector.down = false;
    // What was refused waits in the outbox and goes once the collector is back.
    // The exporter's pause after failures is at most 30 s.
    await waitFor('the outbox to be sent', async () => (collector.spans.length > 0 && (await outboxSize()) === 0) || null, 60_000);

    const traceId = (await stack.t.services.runs.traceId(runId))!;
    const spans = collector.spans.filter((s) => s.traceId === traceId);
    assert.equal(spans.length, collector.spans.length, 'every span is in the run\'s trace');
    assert.equal(new Set(spans.map((s) => s.spanId)).size, spans.length, 'no span arrived twice');

    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const roots = spans.filter((s) => s.parentSpanId === null);
    assert.equal(roots.length, 1);
    const root = roots[0];
    assert.equal(root.attributes['crewhouse.run.id'], runId);
    assert.equal(root.attributes['crewhouse.run.state'], 'succeeded');
    assert.equal(root.resource['service.name'], 'crewhouse');

    const tasks = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'invoke_agent');
    assert.deepEqual(tasks.map((s) => s.attributes['gen_ai.agent.name']).sort(), ['dev', 'lead', 'lead']);
    for (const t of tasks) {
      assert.equal(t.parentSpanId, root.spanId, 'a task is a child of the run');
      assert.ok(t.startNs >= root.startNs && t.endNs <= root.endNs, 'a task lies within its run');
    }

    const chats = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'chat');
    assert.ok(chats.length >= 4, `model calls: ${chats.length}`);
    for (const c of chats) {
      const parent = byId.get(c.parentSpanId ?? '');
      assert.equal(parent?.attributes['gen_ai.operation.name'], 'invoke_agent', 'a model call is a child of its task');
      assert.equal(c.attributes['gen_ai.request.model'], 'fast');
      assert.equal(c.kind, 3, 'a model call is a client span');
      assert.ok(Number(c.attributes['gen_ai.usage.input_tokens']) > 0);
      assert.ok(Number(c.attributes['gen_ai.usage.output_tokens']) > 0);
      assert.ok(c.endNs >= c.startNs);
    }
    const devChats = chats.filter((c) => byId.get(c.parentSpanId!)?.attributes['gen_ai.agent.name'] === 'dev');
    assert.deepEqual(devChats.map((c) => c.attributes['gen_ai.usage.input_tokens']).sort(), [120, 150]);

    const tools = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'execute_tool');
    const write = tools.find((s) => s.attributes['gen_ai.tool.name'] === 'write_file');
    assert.ok(write, 'the write_file call has a span');
    assert.equal(byId.get(write.parentSpanId!)?.attributes['gen_ai.agent.name'], 'dev');
    assert.equal(write.name, 'execute_tool write_file');
    assert.ok(typeof write.attributes['gen_ai.tool.call.id'] === 'string');

    // No prompt, completion, argument or output text, and no key, in any span.
    const all = JSON.stringify(spans, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
    assert.ok(!all.includes(SECRET_WORD), 'the task and tool content stay out of the trace');
    assert.ok(!all.includes('Handing it to the dev'), 'model content stays out of the trace');
    const key = await stack.t.services.teamsDirectory.roleModelKey(team, 'lead');
    assert.ok(key && !all.includes(key));

    // The run links to the trace, and the trace route reads it from the Jaeger query API.
    assert.equal(run.jaeger_url, `${collector.url}/trace/${traceId}`);
    const trace = await stack.t.request({ method: 'GET', url: `/api/v1/runs/${runId}/trace`, token: stack.t.adminToken });
    assert.equal(trace.status, 200, trace.text);
    assert.equal(trace.body.trace_id, traceId);
    assert.equal(trace.body.spans.length, spans.length);
    const traced = trace.body.spans.find((s: { span_id: string }) => s.span_id === write.spanId);
    assert.equal(traced.parent_span_id, write.parentSpanId);
    assert.equal(traced.attributes['gen_ai.tool.name'], 'write_file');
  });

  it('a run reopened twice keeps its root span; each reopening is a span of its own under it, holding its tasks', async () => {
    const team = await stack.makeTeam({ roles: { lead: { tools: ['hand_off', 'finish'] }, dev: { tools: ['write_file', 'hand_off'] } }, pipeline: { lead: 'dev' } });
    const runId = await stack.giveTask(team, 'Write word.txt.');
    await stack.waitForState(runId, 'succeeded');
    const followUps: number[] = [];
    for (const n of [1, 2]) {
      const reply = await stack.t.request({ method: 'POST', url: `/api/v1/runs/${runId}/replies`, token: stack.t.adminToken, body: { text: `FOLLOW-UP ${n}: check it again.` } });
      assert.equal(reply.status, 202, reply.text);
      followUps.push(reply.body.seq);
      await stack.waitForState(runId, 'succeeded');
    }
    const run = await stack.run(runId);
    assert.deepEqual(run.tasks.map((x: { role: string }) => x.role), ['lead', 'dev', 'lead', 'lead', 'lead']);

    const traceId = (await stack.t.services.runs.traceId(runId))!;
    const spans = await waitFor('the reopenings\' spans to be exported', async () => {
      const got = collector.spans.filter((s) => s.traceId === traceId);
      return (await outboxSize()) === 0 && got.filter((s) => s.name === `run.resume ${team}`).length === 2 ? got : null;
    });
    assert.equal(new Set(spans.map((s) => s.spanId)).size, spans.length, 'no span id arrived twice (the root is not sent again with a later end)');

    const roots = spans.filter((s) => s.parentSpanId === null);
    assert.equal(roots.length, 1);
    const root = roots[0];
    assert.equal(root.name, `run ${team}`);
    const resumes = spans.filter((s) => s.name === `run.resume ${team}`).sort((a, b) => Number(a.startNs - b.startNs));
    assert.deepEqual(resumes.map((s) => s.attributes['crewhouse.run.follow_up.seq']), followUps);
    assert.ok(resumes[0].startNs >= root.endNs, 'the first reopening begins after the run first ended');
    assert.ok(resumes[1].startNs >= resumes[0].endNs, 'the second after the first ended');
    for (const r of resumes) {
      assert.equal(r.parentSpanId, root.spanId, 'a reopening is a child of the run');
      assert.equal(r.attributes['crewhouse.run.id'], runId);
      assert.equal(r.attributes['crewhouse.run.state'], 'succeeded');
      assert.ok(r.endNs >= r.startNs);
    }

    // The first activation's tasks are the root's children; each follow-up's lead task is its reopening's.
    const tasks = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'invoke_agent');
    assert.equal(tasks.length, 5);
    assert.deepEqual(tasks.filter((t) => t.parentSpanId === root.spanId).map((t) => t.attributes['gen_ai.agent.name']).sort(), ['dev', 'lead', 'lead']);
    for (const r of resumes) {
      const under = tasks.filter((t) => t.parentSpanId === r.spanId);
      assert.deepEqual(under.map((t) => t.attributes['gen_ai.agent.name']), ['lead']);
      assert.ok(under[0].startNs >= r.startNs && under[0].endNs <= r.endNs, 'the follow-up\'s task lies within its reopening');
    }
  });
});
