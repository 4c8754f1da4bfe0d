/**
 * What the host believes of an agent runtime's events. The runtime runs inside the sandbox,
 * where a hostile agent can write anything on its output or into its journal, so every event is
 * checked here, on the host, against what the host itself knows of the conversation: the seq it
 * recorded last, the tool calls it saw the model request, the role's tools, and who leads. The
 * answer is the events accepted (in order) and the first refusal, in words; nothing here touches
 * the database, so each rule is tested on its own (event-checks.test.ts).
 */
import type { AgentEvent, Proposal, ToolCall, TurnOutcome } from '../../agent/protocol.ts';
import { mcpToolName } from '../../agent/mcp.ts';
import { subjectOf } from './runs.rules.ts';

/** Bounds on what an event may carry (characters unless said otherwise); docs/runs.md lists them. */
export const LIMITS = {
  /** A `progress` post: the post_progress tool's own limit (the spec's 4,000 characters). */
  progress: 4000,
  /** The model's text in one reply (a post shows its first 8,000 characters). */
  replyContent: 200_000,
  /** Tool calls in one model reply. */
  toolCalls: 128,
  /** A tool call's id and name. */
  callId: 256,
  toolName: 64,
  /** A tool call's arguments as the model sent them (write_file takes up to 4 MiB of content). */
  callArguments: 10 * 1024 * 1024,
  /** A tool result's output (the runtime itself cuts tool output at 64 KiB). */
  toolOutput: 256 * 1024,
  /** A failure reason (a model error, a failed turn). */
  reason: 8000,
  /** A question to the person (the ask_person tool's limit), its options and each option. */
  question: 4000,
  options: 10,
  option: 200,
  /** A hand-off's or the end's summary (the hand_off and finish tools' limit). */
  summary: 16_000,
  /** A conversation summary the runtime made to fit the model's window. */
  contextSummary: 64_000,
  /** A branch name, a pull request's URL, title and body (the tools' limits). */
  branch: 200,
  url: 2000,
  title: 256,
  body: 65_536,
  /** A confirmation's reason. */
  confirmation: 2000,
  /** A plan's steps and each step. */
  planSteps: 50,
  planStep: 500,
  /** A task, answer or note the runtime echoes as its input (the host wrote it; bounded all the same). */
  input: 1_000_000,
  /** One event as JSON, whatever it is. */
  event: 12 * 1024 * 1024,
  /** The largest seq the database stores. */
  seq: 2_147_483_647,
} as const;

/** A tool call the host saw the model request in this conversation, and what became of it. */
export interface CallState {
  name: string;
  /** open: requested, no result yet; settled: its one result was recorded. */
  state: 'open' | 'settled';
  /** A proposal tool's call already made its one proposal. */
  proposed: boolean;
  /** What the call works on (its file, its command), for its result's post; from the model's own call. */
  subject?: string | null;
}

/** What the host knows of the conversation before the batch. */
export interface ConversationView {
  role: string;
  lead: boolean;
  /** The role's built-in tools (its AgentConfig.tools). */
  tools: readonly string[];
  /** The MCP servers the role may use (their tools are `mcp__<server>__<tool>`). */
  mcpServers: readonly string[];
  /** The team's roles (where a hand-off may go). */
  roles: readonly string[];
  /** The last seq recorded. */
  eventsSeen: number;
  /** The calls of this conversation the host knows, by id (the open ones at least). */
  calls: ReadonlyMap<string, CallState>;
}

export interface CheckAnswer {
  /** The events to record, in order: all of them, or those before the refused one. */
  accepted: AgentEvent[];
  /** Calls whose state the accepted events changed (to store). */
  calls: Map<string, CallState>;
  /** The accepted turn end, if any: the only outcome the host acts on. */
  turnEnd: { seq: number; outcome: TurnOutcome } | null;
  /** The first event refused, and why, in words for the run's failure reason. */
  refusal: { seq: number | null; reason: string } | null;
}

class Refused extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function text(v: unknown, what: string, max: number, opts: { min?: number; nullable?: boolean } = {}): void {
  if (v === null && opts.nullable) return;
  if (typeof v !== 'string') throw new Refused(`${what} is not text`);
  if (v.length < (opts.min ?? 0)) throw new Refused(`${what} is empty`);
  if (v.length > max) throw new Refused(`${what} is ${v.length.toLocaleString('en-US')} characters long, more than the ${max.toLocaleString('en-US')} allowed`);
}

function count(v: unknown, what: string, min = 0): void {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) throw new Refused(`${what} is not a whole number of at least ${min}`);
}

function time(v: unknown, what: string): void {
  if (typeof v !== 'string' || v.length > 40 || !Number.isFinite(Date.parse(v))) throw new Refused(`${what} is not a time`);
}

function bool(v: unknown, what: string): void {
  if (typeof v !== 'boolean') throw new Refused(`${what} is not true or false`);
}

function toolCall(v: unknown, what: string): asserts v is ToolCall {
  if (!isObject(v)) throw new Refused(`${what} is not a tool call`);
  text(v.id, `${what}'s id`, LIMITS.callId, { min: 1 });
  text(v.name, `${what}'s tool name`, LIMITS.toolName, { min: 1 });
  text(v.arguments, `${what}'s arguments`, LIMITS.callArguments);
}

function proposal(p: unknown): asserts p is Proposal {
  if (!isObject(p)) throw new Refused('the proposal is not a proposal');
  if (p.kind === 'skill') {
    text(p.name, 'the proposed skill\'s name', 64, { min: 1 });
    text(p.description, 'the proposed skill\'s description', 500, { min: 1 });
    text(p.instructions, 'the proposed skill\'s instructions', 30_000, { min: 1 });
    return;
  }
  if (p.kind !== 'mcp_server') throw new Refused('the proposal is neither a skill nor an MCP server');
  text(p.name, 'the proposed MCP server\'s name', 63, { min: 1 });
  text(p.url, 'the proposed MCP server\'s URL', LIMITS.url, { min: 1 });
  text(p.destination, 'the proposed MCP server\'s destination', 128, { min: 1 });
  if (p.auth !== 'none' && p.auth !== 'bearer' && p.auth !== 'header') throw new Refused('the proposed MCP server\'s authentication is not none, bearer or header');
  text(p.header, 'the proposed MCP server\'s header', 64, { nullable: true });
  if (!Array.isArray(p.roles) || p.roles.length > 32) throw new Refused('the proposed MCP server\'s roles are not a list of at most 32');
  for (const r of p.roles) text(r, 'a role of the proposed MCP server', 32, { min: 1 });
  text(p.reason, 'the proposed MCP server\'s reason', 2000, { nullable: true });
}

/**
 * Checks a batch of events after what the host recorded. Each event must come in order (seq
 * `eventsSeen + 1`, `+ 2`, ...), be of a kind the protocol has, within the bounds above, and
 * make sense against the calls the host saw: a tool's start and result only for a call the model
 * requested, of a tool the role has (a refused call's failed result excepted), one result per
 * call; a proposal only in answer to an open call of the matching proposal tool; a turn's end
 * only for the call that ends it, and the run's end only from the lead.
 */
export function checkEvents(view: ConversationView, events: readonly AgentEvent[]): CheckAnswer {
  const calls = new Map<string, CallState>();
  const callOf = (id: string): CallState | undefined => calls.get(id) ?? view.calls.get(id);
  const mcpPrefixes = view.mcpServers.map((s) => mcpToolName(s, ''));
  const hasTool = (name: string) => view.tools.includes(name) || mcpPrefixes.some((p) => name.startsWith(p) && name.length > p.length);
  const accepted: AgentEvent[] = [];
  let turnEnd: CheckAnswer['turnEnd'] = null;
  let expected = view.eventsSeen + 1;

  /** Whether a call of `name` is open, as the batch so far left the calls. */
  const anyOpen = (name: string) => [...new Map([...view.calls, ...calls]).values()].some((c) => c.name === name && c.state === 'open');
  /** The open call `id` of a tool among `names`, which the role has. */
  const openCall = (id: unknown, names: readonly string[], what: string): CallState => {
    const c = typeof id === 'string' ? callOf(id) : undefined;
    if (!c || !names.includes(c.name)) throw new Refused(`${what}, but the model never asked for it`);
    if (c.state !== 'open') throw new Refused(`${what}, but that call was already answered`);
    if (!hasTool(c.name)) throw new Refused(`${what}, a tool the ${view.role} role does not have`);
    return c;
  };

  const outcome = (o: unknown): TurnOutcome => {
    if (!isObject(o)) throw new Refused('the turn ended without saying how');
    switch (o.kind) {
      case 'question': {
        text(o.question, 'the question', LIMITS.question, { min: 1 });
        if (!Array.isArray(o.options)) throw new Refused('the question\'s options are not a list');
        if (o.options.length > LIMITS.options) throw new Refused(`the question has ${o.options.length} options, more than the ${LIMITS.options} allowed`);
        for (const opt of o.options) text(opt, 'an option of the question', LIMITS.option, { min: 1 });
        if (!anyOpen('ask_person') || !hasTool('ask_person')) throw new Refused('the turn ended with a question, but the model never called ask_person');
        break;
      }
      case 'confirmation':
        toolCall(o.call, 'the call to confirm');
        text(o.reason, 'the confirmation\'s reason', LIMITS.confirmation, { min: 1 });
        openCall(o.call.id, [o.call.name], `the turn asked to confirm a call of ${o.call.name}`);
        break;
      case 'hand_off':
        text(o.summary, 'the hand-off\'s summary', LIMITS.summary, { min: 1 });
        text(o.to_role, 'the role handed to', 63, { min: 1, nullable: true });
        text(o.branch, 'the hand-off\'s branch', LIMITS.branch, { min: 1, nullable: true });
        if (o.to_role !== null && !view.roles.includes(o.to_role as string)) throw new Refused(`the turn handed the work to "${o.to_role as string}", which is not a role of the team`);
        if (o.to_role === view.role) throw new Refused('the turn handed the work to its own role');
        if (!anyOpen('hand_off') || !hasTool('hand_off')) throw new Refused('the turn handed the work on, but the model never called hand_off');
        break;
      case 'finished':
        if (!view.lead) throw new Refused(`the ${view.role} role tried to end the run, which only the lead may do`);
        if (o.outcome !== 'succeeded' && o.outcome !== 'failed') throw new Refused('the run\'s end is neither succeeded nor failed');
        text(o.summary, 'the summary', LIMITS.summary, { min: 1 });
        text(o.branch, 'the branch', LIMITS.branch, { min: 1, nullable: true });
        text(o.pull_request_url, 'the pull request\'s URL', LIMITS.url, { min: 1, nullable: true });
        if (!anyOpen('finish') || !hasTool('finish')) throw new Refused('the turn ended the run, but the model never called finish');
        break;
      case 'pull_request':
        toolCall(o.call, 'the pull request call');
        text(o.title, 'the pull request\'s title', LIMITS.title, { min: 1 });
        text(o.body, 'the pull request\'s body', LIMITS.body);
        text(o.head, 'the pull request\'s head', LIMITS.branch, { min: 1, nullable: true });
        text(o.base, 'the pull request\'s base', LIMITS.branch, { min: 1, nullable: true });
        bool(o.draft, 'the pull request\'s draft flag');
        openCall(o.call.id, ['open_pull_request'], 'the turn asked to open a pull request');
        break;
      case 'iteration_cap':
        count(o.iterations, 'the number of model calls', 0);
        break;
      case 'failed':
        text(o.reason, 'the failure reason', LIMITS.reason);
        if (o.cause !== undefined && o.cause !== 'budget' && o.cause !== 'model_refused') throw new Refused('the failure\'s cause is neither budget nor model_refused');
        break;
      case 'cancelled':
        break;
      default:
        throw new Refused(`the turn ended in a way the protocol does not have ("${String(o.kind).slice(0, 40)}")`);
    }
    return o as unknown as TurnOutcome;
  };

  const check = (e: AgentEvent): void => {
    const raw = e as unknown as Record<string, unknown>;
    switch (raw.type) {
      case 'input': {
        const input = raw.input;
        if (!isObject(input) || !['task', 'answer', 'confirmation', 'tool_result', 'resume'].includes(input.kind as string)) throw new Refused('its input is of no kind the protocol has');
        if (JSON.stringify(input).length > LIMITS.input) throw new Refused(`its input is longer than the ${LIMITS.input.toLocaleString('en-US')} characters allowed`);
        return;
      }
      case 'model_call':
        count(raw.iteration, 'the model call\'s iteration', 1);
        return;
      case 'model_reply': {
        text(raw.content, 'the model\'s reply', LIMITS.replyContent, { nullable: true });
        text(raw.finish_reason, 'the model\'s finish reason', 64, { nullable: true });
        if (raw.started_at !== undefined) time(raw.started_at, 'the model call\'s start');
        if (raw.usage !== null) {
          if (!isObject(raw.usage)) throw new Refused('the model reply\'s usage is not token counts');
          count(raw.usage.prompt_tokens, 'the prompt tokens');
          count(raw.usage.completion_tokens, 'the completion tokens');
        }
        if (!Array.isArray(raw.tool_calls)) throw new Refused('the model reply\'s tool calls are not a list');
        if (raw.tool_calls.length > LIMITS.toolCalls) throw new Refused(`the model reply has ${raw.tool_calls.length} tool calls, more than the ${LIMITS.toolCalls} allowed`);
        const ids = new Set<string>();
        for (const c of raw.tool_calls) {
          toolCall(c, 'a tool call of the model');
          if (ids.has(c.id)) throw new Refused(`the model reply names the call ${c.id.slice(0, 60)} twice`);
          ids.add(c.id);
        }
        for (const c of raw.tool_calls as ToolCall[]) calls.set(c.id, { name: c.name, state: 'open', proposed: false, subject: subjectOf(c.arguments) });
        return;
      }
      case 'model_error':
        count(raw.attempt, 'the model error\'s attempt', 1);
        text(raw.reason, 'the model error\'s reason', LIMITS.reason);
        bool(raw.final, 'the model error\'s final flag');
        if (raw.started_at !== undefined) time(raw.started_at, 'the model call\'s start');
        return;
      case 'tool_started': {
        toolCall(raw.call, 'the started call');
        const c = openCall(raw.call.id, [raw.call.name], `it started ${raw.call.name}`);
        if (c.name !== raw.call.name) throw new Refused('it started a call under another tool\'s name');
        return;
      }
      case 'tool_result': {
        text(raw.call_id, 'the result\'s call id', LIMITS.callId, { min: 1 });
        text(raw.name, 'the result\'s tool name', LIMITS.toolName, { min: 1 });
        bool(raw.ok, 'the result\'s ok flag');
        text(raw.output, 'the tool\'s output', LIMITS.toolOutput);
        if (raw.interrupted !== undefined) bool(raw.interrupted, 'the result\'s interrupted flag');
        if (raw.started_at !== undefined) time(raw.started_at, 'the tool\'s start');
        const id = raw.call_id as string;
        const name = raw.name as string;
        const c = callOf(id);
        if (!c || c.name !== name) throw new Refused(`it reported a result of ${name} for a call the model never made, or one already answered`);
        if (c.state !== 'open') throw new Refused(`it reported a second result of the same ${name} call`);
        // A call of a tool the role lacks gets the runtime's refusal (a failed result), never a success.
        if (raw.ok === true && !hasTool(name)) throw new Refused(`it reported a successful result of ${name}, a tool the ${view.role} role does not have`);
        calls.set(id, { ...c, state: 'settled' });
        return;
      }
      case 'progress':
        text(raw.text, 'the progress note', LIMITS.progress, { min: 1 });
        return;
      case 'proposal': {
        proposal(raw.proposal);
        const tool = raw.proposal.kind === 'skill' ? 'propose_skill' : 'propose_mcp_server';
        const open = [...new Map([...view.calls, ...calls]).entries()].find(([, c]) => c.name === tool && c.state === 'open' && !c.proposed);
        if (!open || !hasTool(tool)) throw new Refused(`it proposed ${raw.proposal.kind === 'skill' ? 'a skill' : 'an MCP server'} without a call of ${tool} by a role that has it`);
        calls.set(open[0], { ...open[1], proposed: true });
        return;
      }
      case 'plan': {
        if (!Array.isArray(raw.steps) || raw.steps.length > LIMITS.planSteps) throw new Refused(`the plan is not a list of at most ${LIMITS.planSteps} steps`);
        for (const s of raw.steps) {
          if (!isObject(s)) throw new Refused('a step of the plan is not a step');
          text(s.step, 'a step of the plan', LIMITS.planStep, { min: 1 });
          if (!['pending', 'in_progress', 'done'].includes(s.status as string)) throw new Refused('a step of the plan has no known status');
        }
        return;
      }
      case 'context_masked':
        count(raw.up_to_seq, 'the masked seq');
        count(raw.tool_results, 'the masked results');
        count(raw.chars, 'the masked characters');
        return;
      case 'context_summarized':
        count(raw.up_to_seq, 'the summarized seq');
        text(raw.summary, 'the conversation summary', LIMITS.contextSummary);
        return;
      case 'turn_end':
        turnEnd = { seq: e.seq, outcome: outcome(raw.outcome) };
        return;
      default:
        throw new Refused(`it is of a kind the protocol does not have ("${String(raw.type).slice(0, 40)}")`);
    }
  };

  for (const e of events) {
    const raw = e as unknown as Record<string, unknown>;
    const seq = typeof raw?.seq === 'number' && Number.isSafeInteger(raw.seq) ? raw.seq : null;
    // A refused event changes nothing: what it did to the calls and the turn's end is undone.
    const callsBefore = new Map(calls);
    try {
      if (!isObject(raw)) throw new Refused('an event is not an object');
      if (seq === null || seq !== expected) {
        throw new Refused(seq === null ? `an event has no usable sequence number (event ${expected} was next)` : `the events skipped from ${expected - 1} to ${seq.toLocaleString('en-US')} (each event must follow the one before)`);
      }
      if (seq > LIMITS.seq) throw new Refused(`an event's sequence number ${seq.toLocaleString('en-US')} is beyond what a conversation can hold`);
      time(raw.at, 'the event\'s time');
      if (turnEnd) throw new Refused('an event came after the turn had ended');
      check(e);
      // What the kind allows is checked first (its words are clearer); then the whole, extra fields and all.
      const size = JSON.stringify(raw).length;
      if (size > LIMITS.event) throw new Refused(`an event of ${size.toLocaleString('en-US')} characters is larger than the ${LIMITS.event.toLocaleString('en-US')} allowed`);
    } catch (err) {
      if (!(err instanceof Refused)) throw err;
      calls.clear();
      for (const [id, c] of callsBefore) calls.set(id, c);
      if (turnEnd && (turnEnd as { seq: number }).seq === seq) turnEnd = null;
      const kind = isObject(raw) && typeof raw.type === 'string' ? raw.type.slice(0, 40) : 'an event';
      return { accepted, calls, turnEnd, refusal: { seq, reason: `${kind}${seq !== null && seq === expected ? ` ${seq}` : ''}: ${err.message}` } };
    }
    accepted.push(e);
    expected++;
  }
  return { accepted, calls, turnEnd, refusal: null };
}
