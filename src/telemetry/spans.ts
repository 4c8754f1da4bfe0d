/**
 * A run's spans, derived from what the run log records: the run, each role's task, each model
 * call and each tool call, with the OpenTelemetry GenAI semantic conventions. Ids come from the
 * run's trace id and the recorded events (never from a clock or a random source), so the worker
 * that records an event and one that takes over after it died name the same span the same way.
 *
 * Attributes carry names, counts and ids only: no prompt, completion, tool argument or tool
 * output (the GenAI conventions make content opt-in, and a tool's output may hold anything).
 */
import crypto from 'node:crypto';
import type { AgentEvent, TurnOutcome } from '../agent/protocol.ts';

export type AttributeValue = string | number | boolean | string[];

/** A finished span, as the export job carries it (plain JSON). */
export interface SpanRecord {
  trace_id: string;
  span_id: string;
  parent_span_id: string | null;
  name: string;
  kind: 'internal' | 'client';
  /** ISO 8601 times. */
  start: string;
  end: string;
  status: 'unset' | 'ok' | 'error';
  attributes: Record<string, AttributeValue>;
}

/** 16 hex digits, from the trace and a name unique within it. */
export function spanIdOf(traceId: string, key: string): string {
  return crypto.createHash('sha256').update(`${traceId}\n${key}`).digest('hex').slice(0, 16);
}

export const runSpanId = (traceId: string) => spanIdOf(traceId, 'run');
/** The span of a reopening of the run: the follow-up (its post's seq) to the run's next end. */
export const resumeSpanId = (traceId: string, seq: number) => spanIdOf(traceId, `resume:${seq}`);
/** The span a task's span is a child of: the run's root for its first activation, else the reopening's. */
export const activationSpanId = (traceId: string, activation: number | null) => (activation === null ? runSpanId(traceId) : resumeSpanId(traceId, activation));
export const taskSpanId = (traceId: string, taskId: string) => spanIdOf(traceId, `task:${taskId}`);

/** Outcomes after which a task is over (the others wait for a person or the engine, and the task goes on). */
const TASK_ENDS: ReadonlySet<TurnOutcome['kind']> = new Set(['hand_off', 'finished', 'iteration_cap', 'failed', 'cancelled']);

export interface TaskContext {
  trace_id: string;
  run_id: string;
  team: string;
  task_id: string;
  role: string;
  /** The model alias the role calls. */
  model: string;
  /** The conversation (journal) the events belong to. */
  conversation: string;
  /** When the task's first turn began (falls back to the event's own time). */
  task_started_at: string | null;
  /** The seq of the follow-up that reopened the run before this task was given, or null (the run's first activation). */
  activation: number | null;
}

const iso = (v: string | Date) => new Date(v).toISOString();

/** The spans that the newly recorded events complete (an event is recorded once, so each span is made once). */
export function spansOfEvents(ctx: TaskContext, events: readonly AgentEvent[]): SpanRecord[] {
  const parent = taskSpanId(ctx.trace_id, ctx.task_id);
  const out: SpanRecord[] = [];
  const common = { 'crewhouse.run.id': ctx.run_id, 'crewhouse.role': ctx.role };
  for (const e of events) {
    const key = `${ctx.conversation}:${e.seq}`;
    switch (e.type) {
      case 'model_reply':
      case 'model_error': {
        const attrs: Record<string, AttributeValue> = { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': ctx.model, ...common };
        if (e.type === 'model_reply') {
          if (e.usage) {
            attrs['gen_ai.usage.input_tokens'] = e.usage.prompt_tokens;
            attrs['gen_ai.usage.output_tokens'] = e.usage.completion_tokens;
          }
          if (e.finish_reason) attrs['gen_ai.response.finish_reasons'] = [e.finish_reason];
        } else {
          attrs['error.type'] = e.final ? 'model_error' : 'model_error_retried';
          attrs['crewhouse.model.attempt'] = e.attempt;
        }
        out.push({
          trace_id: ctx.trace_id,
          span_id: spanIdOf(ctx.trace_id, key),
          parent_span_id: parent,
          name: `chat ${ctx.model}`,
          kind: 'client',
          start: iso(e.started_at ?? e.at),
          end: iso(e.at),
          status: e.type === 'model_error' ? 'error' : 'unset',
          attributes: attrs,
        });
        break;
      }
      case 'tool_result': {
        const attrs: Record<string, AttributeValue> = { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': e.name, 'gen_ai.tool.call.id': e.call_id, 'gen_ai.tool.type': 'function', ...common };
        if (!e.ok) attrs['error.type'] = e.interrupted ? 'interrupted' : 'tool_error';
        out.push({
          trace_id: ctx.trace_id,
          span_id: spanIdOf(ctx.trace_id, key),
          parent_span_id: parent,
          name: `execute_tool ${e.name}`,
          kind: 'internal',
          start: iso(e.started_at ?? e.at),
          end: iso(e.at),
          status: e.ok ? 'unset' : 'error',
          attributes: attrs,
        });
        break;
      }
      case 'turn_end': {
        if (!TASK_ENDS.has(e.outcome.kind)) break;
        const failed = e.outcome.kind === 'failed' || e.outcome.kind === 'iteration_cap' || (e.outcome.kind === 'finished' && e.outcome.outcome === 'failed');
        out.push({
          trace_id: ctx.trace_id,
          span_id: taskSpanId(ctx.trace_id, ctx.task_id),
          parent_span_id: activationSpanId(ctx.trace_id, ctx.activation),
          name: `invoke_agent ${ctx.role}`,
          kind: 'internal',
          start: iso(ctx.task_started_at ?? e.at),
          end: iso(e.at),
          status: failed ? 'error' : 'unset',
          attributes: {
            'gen_ai.operation.name': 'invoke_agent',
            'gen_ai.agent.name': ctx.role,
            'gen_ai.request.model': ctx.model,
            'crewhouse.task.id': ctx.task_id,
            'crewhouse.task.outcome': e.outcome.kind,
            ...common,
            ...(failed ? { 'error.type': e.outcome.kind } : {}),
          },
        });
        break;
      }
      default:
        break;
    }
  }
  return out;
}

export interface RunOfSpan {
  trace_id: string;
  id: string;
  team: string;
  created_at: string | Date;
  /** The state the run ended in. */
  state: string;
}

/** What a reopened run's activation began with: the follow-up's post. */
export interface Reopening {
  seq: number;
  /** ISO 8601. */
  started_at: string;
}

const endAttributes = (run: RunOfSpan): Record<string, AttributeValue> => ({
  'crewhouse.run.id': run.id,
  'crewhouse.team': run.team,
  'crewhouse.run.state': run.state,
  ...(run.state === 'failed' ? { 'error.type': 'run_failed' } : {}),
});

/**
 * The span of the run's activation that just ended. Each span id is made once, so a collector
 * never gets one id with two end times:
 *
 * - the first end makes the root span `run <team>`, from the run's creation to that end;
 * - each end after a follow-up reopened the run makes a `run.resume <team>` span, a child of the
 *   root named by the follow-up's seq, from the follow-up to that end. The follow-up's tasks are
 *   its children, so a trace viewer shows the work of each (re)opening under its own bar.
 */
export function activationSpan(run: RunOfSpan, reopening: Reopening | null, end: Date): SpanRecord {
  const failed = run.state === 'failed';
  if (!reopening) {
    return {
      trace_id: run.trace_id,
      span_id: runSpanId(run.trace_id),
      parent_span_id: null,
      name: `run ${run.team}`,
      kind: 'internal',
      start: iso(run.created_at),
      end: end.toISOString(),
      status: failed ? 'error' : 'unset',
      attributes: endAttributes(run),
    };
  }
  return {
    trace_id: run.trace_id,
    span_id: resumeSpanId(run.trace_id, reopening.seq),
    parent_span_id: runSpanId(run.trace_id),
    name: `run.resume ${run.team}`,
    kind: 'internal',
    start: iso(reopening.started_at),
    end: end.toISOString(),
    status: failed ? 'error' : 'unset',
    attributes: { ...endAttributes(run), 'crewhouse.run.follow_up.seq': reopening.seq },
  };
}

// ---- OTLP/HTTP JSON encoding (opentelemetry-proto's JSON mapping: ids are hex, times nanosecond strings). ----

const KIND = { internal: 1, client: 3 } as const;
const STATUS = { unset: 0, ok: 1, error: 2 } as const;

function anyValue(v: AttributeValue): Record<string, unknown> {
  if (Array.isArray(v)) return { arrayValue: { values: v.map((x) => ({ stringValue: x })) } };
  if (typeof v === 'boolean') return { boolValue: v };
  if (typeof v === 'number') return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  return { stringValue: v };
}

const nanos = (t: string) => (BigInt(new Date(t).getTime()) * 1_000_000n).toString();

/** An `ExportTraceServiceRequest` in its JSON form, for `POST {endpoint}/v1/traces`. */
export function otlpRequest(spans: readonly SpanRecord[], resource: Record<string, string>): Record<string, unknown> {
  return {
    resourceSpans: [
      {
        resource: { attributes: Object.entries(resource).map(([key, value]) => ({ key, value: { stringValue: value } })) },
        scopeSpans: [
          {
            scope: { name: 'crewhouse' },
            spans: spans.map((s) => ({
              traceId: s.trace_id,
              spanId: s.span_id,
              ...(s.parent_span_id ? { parentSpanId: s.parent_span_id } : {}),
              name: s.name,
              kind: KIND[s.kind],
              startTimeUnixNano: nanos(s.start),
              endTimeUnixNano: nanos(s.end),
              attributes: Object.entries(s.attributes).map(([key, value]) => ({ key, value: anyValue(value) })),
              status: { code: STATUS[s.status] },
            })),
          },
        ],
      },
    ],
  };
}
