import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { AgentEvent } from '../agent/protocol.ts';
import { PermanentJobError, type JobContext } from '../queue/queue.ts';
import { startFakeCollector, type FakeCollector } from '../../test/fakes/otlp-collector.ts';
import { captureLogger } from '../../test/harness.ts';
import { activationSpan, otlpRequest, resumeSpanId, runSpanId, spansOfEvents, taskSpanId, type TaskContext } from './spans.ts';
import { exportSpansJob } from './export-spans.job.ts';

const ctx: TaskContext = { trace_id: 'a'.repeat(32), run_id: 'run_1', team: 't', task_id: 'task_1', role: 'dev', model: 'fast', conversation: 'run_1.dev', task_started_at: '2026-01-01T00:00:00.000Z', activation: null };
const call = { id: 'call_1', name: 'shell', arguments: '{"command":"echo hidden-argument"}' };
const events: AgentEvent[] = [
  { seq: 1, at: '2026-01-01T00:00:00.000Z', type: 'input', input: { kind: 'task', text: 'hidden-task', from: 'person' } },
  { seq: 2, at: '2026-01-01T00:00:00.100Z', type: 'model_call', iteration: 1 },
  { seq: 3, at: '2026-01-01T00:00:01.000Z', type: 'model_reply', content: 'hidden-content', tool_calls: [call], usage: { prompt_tokens: 10, completion_tokens: 5 }, finish_reason: 'tool_calls', started_at: '2026-01-01T00:00:00.100Z' },
  { seq: 4, at: '2026-01-01T00:00:01.010Z', type: 'tool_started', call },
  { seq: 5, at: '2026-01-01T00:00:03.000Z', type: 'tool_result', call_id: 'call_1', name: 'shell', ok: false, output: 'hidden-output', started_at: '2026-01-01T00:00:01.010Z' },
  { seq: 6, at: '2026-01-01T00:00:03.500Z', type: 'model_error', attempt: 1, reason: 'upstream 502', final: false, started_at: '2026-01-01T00:00:03.100Z' },
  { seq: 7, at: '2026-01-01T00:00:04.000Z', type: 'turn_end', outcome: { kind: 'question', question: 'hidden-question', options: [] } },
];

describe('run spans', () => {
  it('are derived from the events alone: the same events give the same ids, parented task under run', () => {
    const a = spansOfEvents(ctx, events);
    assert.deepEqual(spansOfEvents(ctx, events), a);
    assert.deepEqual(a.map((s) => s.name), ['chat fast', 'execute_tool shell', 'chat fast'], 'a question does not end the task');
    assert.equal(new Set(a.map((s) => s.span_id)).size, 3);
    assert.ok(a.every((s) => s.parent_span_id === taskSpanId(ctx.trace_id, 'task_1')));
    const [chat, tool, retry] = a;
    assert.equal(chat.start, '2026-01-01T00:00:00.100Z');
    assert.equal(chat.end, '2026-01-01T00:00:01.000Z');
    assert.deepEqual(chat.attributes['gen_ai.response.finish_reasons'], ['tool_calls']);
    assert.equal(chat.attributes['gen_ai.usage.input_tokens'], 10);
    assert.equal(tool.status, 'error');
    assert.equal(tool.attributes['gen_ai.tool.name'], 'shell');
    assert.equal(retry.attributes['error.type'], 'model_error_retried');
    assert.doesNotMatch(JSON.stringify(a), /hidden/);
    // Another run's trace never shares an id.
    const other = spansOfEvents({ ...ctx, trace_id: 'b'.repeat(32) }, events);
    assert.ok(other.every((s, i) => s.span_id !== a[i].span_id));

    const ended = spansOfEvents(ctx, [{ seq: 8, at: '2026-01-01T00:00:09.000Z', type: 'turn_end', outcome: { kind: 'hand_off', to_role: null, summary: 'hidden', branch: null } }]);
    assert.equal(ended.length, 1);
    assert.equal(ended[0].span_id, taskSpanId(ctx.trace_id, 'task_1'));
    assert.equal(ended[0].parent_span_id, runSpanId(ctx.trace_id));
    assert.equal(ended[0].start, ctx.task_started_at);
  });

  it('give each reopening of the run its own span under the root, and its tasks under it; no id is made twice', () => {
    const run = { trace_id: ctx.trace_id, id: 'run_1', team: 't', created_at: '2026-01-01T00:00:00.000Z' };
    const first = activationSpan({ ...run, state: 'succeeded' }, null, new Date('2026-01-01T00:00:10.000Z'));
    const second = activationSpan({ ...run, state: 'failed' }, { seq: 12, started_at: '2026-01-01T01:00:00.000Z' }, new Date('2026-01-01T01:00:30.000Z'));
    const third = activationSpan({ ...run, state: 'succeeded' }, { seq: 20, started_at: '2026-01-01T02:00:00.000Z' }, new Date('2026-01-01T02:00:30.000Z'));
    assert.equal(first.span_id, runSpanId(ctx.trace_id));
    assert.equal(first.parent_span_id, null);
    assert.equal(first.name, 'run t');
    assert.equal(first.end, '2026-01-01T00:00:10.000Z');
    assert.equal(new Set([first.span_id, second.span_id, third.span_id]).size, 3, 'each activation has its own id');
    for (const [s, seq] of [[second, 12], [third, 20]] as const) {
      assert.equal(s.span_id, resumeSpanId(ctx.trace_id, seq));
      assert.equal(s.parent_span_id, first.span_id);
      assert.equal(s.name, 'run.resume t');
      assert.equal(s.attributes['crewhouse.run.follow_up.seq'], seq);
    }
    assert.equal(second.start, '2026-01-01T01:00:00.000Z');
    assert.equal(second.status, 'error');
    assert.equal(second.attributes['crewhouse.run.state'], 'failed');
    // The same end made again (a retried transaction) is the same span.
    assert.deepEqual(activationSpan({ ...run, state: 'failed' }, { seq: 12, started_at: '2026-01-01T01:00:00.000Z' }, new Date('2026-01-01T01:00:30.000Z')), second);

    const turnEnd: AgentEvent = { seq: 30, at: '2026-01-01T01:00:20.000Z', type: 'turn_end', outcome: { kind: 'finished', outcome: 'succeeded', summary: 'hidden', branch: null, pull_request_url: null } };
    const [task] = spansOfEvents({ ...ctx, task_id: 'task_2', activation: 12 }, [turnEnd]);
    assert.equal(task.parent_span_id, second.span_id, 'a follow-up\'s task is a child of its reopening');
  });

  it('encode as OTLP JSON: hex ids, nanosecond strings, typed values', () => {
    const root = activationSpan({ trace_id: ctx.trace_id, id: 'run_1', team: 't', created_at: '2026-01-01T00:00:00.000Z', state: 'failed' }, null, new Date('2026-01-01T00:00:10.000Z'));
    const body = otlpRequest([root, ...spansOfEvents(ctx, events)], { 'service.name': 'crewhouse' }) as any;
    const spans = body.resourceSpans[0].scopeSpans[0].spans;
    assert.equal(spans[0].parentSpanId, undefined);
    assert.equal(spans[0].startTimeUnixNano, '1767225600000000000');
    assert.equal(spans[0].endTimeUnixNano, '1767225610000000000');
    assert.deepEqual(spans[0].status, { code: 2 });
    assert.deepEqual(spans[1].attributes.find((a: any) => a.key === 'gen_ai.usage.input_tokens').value, { intValue: '10' });
    assert.deepEqual(spans[1].attributes.find((a: any) => a.key === 'gen_ai.response.finish_reasons').value, { arrayValue: { values: [{ stringValue: 'tool_calls' }] } });
  });
});

describe('the trace export job', () => {
  let collector: FakeCollector;
  before(async () => {
    collector = await startFakeCollector();
  });
  after(() => collector.close());
  const jobCtx = { id: 1, kind: exportSpansJob.kind, attempt: 1, maxAttempts: 15, logger: captureLogger().logger, signal: new AbortController().signal } satisfies JobContext;
  const payload = { spans: spansOfEvents(ctx, events) };

  it('retries while the collector is unavailable, gives up on an answer that will not change, sends once it is up', async () => {
    const perform = (endpoint: string | null) => exportSpansJob.handler({ endpoint, logger: jobCtx.logger }).perform(payload, jobCtx);
    collector.down = true;
    await assert.rejects(perform(collector.url), (err: Error) => !(err instanceof PermanentJobError) && /answered 503/.test(err.message));
    await assert.rejects(perform('http://127.0.0.1:1'), (err: Error) => !(err instanceof PermanentJobError) && /could not be reached/.test(err.message));
    collector.down = false;
    await assert.rejects(perform(`${collector.url}/nothing-here`), PermanentJobError);
    assert.equal(collector.spans.length, 0);
    await perform(collector.url);
    assert.deepEqual(collector.spans.map((s) => s.spanId), payload.spans.map((s) => s.span_id));
    // Queued before the collector was configured away: dropped, not failed.
    await perform(null);
    assert.equal(collector.accepted, 1);
  });
});
