import { Conversation, pendingCalls, settledBoundary, toolSpecsOf } from './conversation.ts';
import type { Journal } from './journal.ts';
import { callModel, ModelError, type ModelReply, type ModelRequest, type ToolSpec } from './model.ts';
import type { AgentConfig, AgentEvent, AgentFailureCause, AgentInput, ToolCall, TurnOutcome } from './protocol.ts';
import type { McpToolbox } from './mcp.ts';
import { NOTE_TOOLS, parseCall, PROPOSAL_TOOLS, proposalOf, riskOf, runWorkTool, TURN_TOOLS, type ToolContext } from './tools/index.ts';

export interface LoopDeps {
  /** The model call; `callModel` in production. */
  model?: (req: ModelRequest) => Promise<ModelReply>;
  /** Waits between retries; a plain timer in production. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Environment of the tools' processes (the sandbox's: proxy variables, CA paths). */
  env: NodeJS.ProcessEnv;
  stream?: boolean;
  /** Attempts of one model call before the turn fails. */
  attempts?: number;
  modelTimeoutMs?: number;
  signal?: AbortSignal;
  /** The role's MCP servers' tools, connected for this turn. */
  mcp?: McpToolbox;
}

const NUDGES = 2;

function defaultSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });
}

/** What a finished turn-ending call means for the worker. */
function outcomeOfTurnTool(config: AgentConfig, call: ToolCall, args: Record<string, any>): TurnOutcome | string {
  switch (call.name) {
    case 'ask_person':
      return { kind: 'question', question: String(args.question), options: Array.isArray(args.options) ? args.options.map(String) : [] };
    case 'hand_off': {
      const to = (args.to_role as string | undefined) ?? config.next_role;
      if (to && !config.roles.includes(to)) return `there is no role "${to}" in this team; the roles are ${config.roles.join(', ')}`;
      if (to === config.role) return 'you cannot hand work to yourself';
      if (!to && config.lead) return 'there is no next role in the pipeline; finish the task instead';
      return { kind: 'hand_off', to_role: to ?? null, summary: String(args.summary), branch: (args.branch as string | undefined) ?? null };
    }
    case 'finish':
      if (!config.lead) return 'only the lead ends the run; hand the work back with hand_off';
      return {
        kind: 'finished',
        outcome: args.outcome === 'failed' ? 'failed' : 'succeeded',
        summary: String(args.summary),
        branch: (args.branch as string | undefined) ?? null,
        pull_request_url: (args.pull_request_url as string | undefined) ?? null,
      };
    default:
      return { kind: 'pull_request', call, title: String(args.title), body: String(args.body ?? ''), head: (args.head as string | undefined) ?? null, base: (args.base as string | undefined) ?? null, draft: Boolean(args.draft) };
  }
}

/**
 * Runs one turn of an agent: records the input, settles the calls the last answer left open,
 * then calls the model and carries out its tool calls until the turn ends (a question, a
 * confirmation, a hand-off, the end of the task, the iteration cap, a failure, a cancel).
 * Every step is in the journal before it happens, so a turn cut short resumes with
 * `{kind: 'resume'}`: a model call is made again, a tool call that had started is reported to
 * the model as interrupted, never run twice.
 */
export async function runTurn(config: AgentConfig, journal: Journal, input: AgentInput, deps: LoopDeps): Promise<TurnOutcome> {
  const signal = deps.signal ?? new AbortController().signal;
  const model = deps.model ?? callModel;
  const sleep = deps.sleep ?? defaultSleep;
  const allowed = new Set(config.tools);
  const mcp = deps.mcp;
  /** A call of a built-in tool or of an MCP server's, checked. */
  const parse = (call: ToolCall) => (mcp?.owns(call.name) ? mcp.parse(call.name, call.arguments) : parseCall(call.name, call.arguments, allowed));
  const ctx: ToolContext = { workspace: config.workspace, repoDir: config.repo_dir, branch: config.branch, role: config.role, signal, env: deps.env };
  const end = (outcome: TurnOutcome): TurnOutcome => {
    journal.append({ type: 'turn_end', outcome });
    return outcome;
  };
  // A result is only written: the append that follows it (the next tool's start, the next model call, the turn's end) syncs both at once.
  const result = (call: ToolCall, ok: boolean, output: string, interrupted = false, startedAt?: string) =>
    journal.write({ type: 'tool_result', call_id: call.id, name: call.name, ok, output, ...(interrupted ? { interrupted: true } : {}), ...(startedAt ? { started_at: startedAt } : {}) });

  // Settle what the last answer left open first: a tool message must follow the answer that
  // called it, before any new user message (the wire format requires it).
  const open = pendingCalls(journal.all());
  let queue = open.calls;
  if (queue.length) {
    const [first] = queue;
    if (input.kind === 'answer' && first.name === 'ask_person') {
      result(first, true, `The answer: ${input.text}`);
      queue = queue.slice(1);
    } else if (input.kind === 'tool_result' && first.name === 'open_pull_request') {
      result(first, input.ok, input.output);
      queue = queue.slice(1);
    } else if (input.kind === 'confirmation') {
      const parsed = parse(first);
      if (!input.approved || !parsed.ok) {
        result(first, false, `The person refused this action${input.note ? `: ${input.note}` : ''}. Do not try it again another way; continue without it or ask.`);
      } else {
        const done = await carryOut(first, parsed.args);
        if (done) return done;
      }
      queue = queue.slice(1);
    } else if (input.kind === 'resume') {
      if (open.started.has(first.id)) {
        result(first, false, 'interrupted: the sandbox or its worker restarted while this ran; it may or may not have taken effect. Check before trying again.', true);
        queue = queue.slice(1);
      }
    } else {
      // A new task or answer while calls were open: each gets exactly one result, saying why it ends here.
      for (const c of queue) result(c, TURN_TOOLS.has(c.name), TURN_TOOLS.has(c.name) ? `${c.name} done; a new message follows.` : 'not carried out: the turn ended before this call ran.');
      queue = [];
    }
  }
  journal.append({ type: 'input', input });
  // Said once per turn (after its input, which a resumed turn must find first), so the person knows why a server's tools are missing.
  for (const u of mcp?.unavailable ?? []) journal.append({ type: 'progress', text: `the MCP server "${u.server}" could not be reached, so its tools are left out of this turn: ${u.reason}` });
  if (input.kind === 'answer' && !open.calls.some((c) => c.name === 'ask_person')) {
    journal.append({ type: 'input', input: { kind: 'task', text: input.text, from: 'person' } });
  }

  async function carryOut(call: ToolCall, args: Record<string, unknown>): Promise<TurnOutcome | null> {
    const started = journal.append({ type: 'tool_started', call });
    let answer;
    try {
      answer = mcp?.owns(call.name) ? await mcp.call(call.name, args, signal) : await runWorkTool(call.name, ctx, args);
    } catch (err) {
      answer = { ok: false, output: `${call.name} failed: ${err instanceof Error ? err.message : String(err)}` };
    }
    if (signal.aborted) {
      result(call, false, 'cancelled by the person', true, started.at);
      return end({ kind: 'cancelled' });
    }
    result(call, answer.ok, answer.output, false, started.at);
    return null;
  }

  /** Carries out calls in order; returns the outcome that ends the turn, or null to call the model again. */
  async function handleCalls(calls: ToolCall[]): Promise<TurnOutcome | null> {
    let ending: TurnOutcome | null = null;
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i];
      if (signal.aborted) {
        for (const c of calls.slice(i)) result(c, false, 'cancelled by the person', true);
        return end({ kind: 'cancelled' });
      }
      const parsed = parse(call);
      if (!parsed.ok) {
        result(call, false, parsed.error);
        continue;
      }
      const args = parsed.args;
      if (ending) {
        result(call, false, `not carried out: ${ending.kind === 'question' ? 'a question' : 'an earlier call'} already ends this turn; call it again later if still needed`);
        continue;
      }
      if (NOTE_TOOLS.has(call.name)) {
        if (call.name === 'post_progress') journal.append({ type: 'progress', text: String(args.text) });
        else journal.append({ type: 'plan', steps: (args.steps as Array<{ step: string; status: string }>).map((s) => ({ step: s.step, status: s.status })) });
        result(call, true, 'recorded');
        continue;
      }
      if (PROPOSAL_TOOLS.has(call.name)) {
        journal.append({ type: 'proposal', proposal: proposalOf(call.name, args) });
        result(call, true, 'proposed: it is stored for the team as proposed; a person reviews it, and no role gets it until they accept it. Go on without it.');
        continue;
      }
      const risk = config.confirmation_policy === 'confirm_risky' ? riskOf(parsed.tool, args) : null;
      if (risk) return end({ kind: 'confirmation', call, reason: risk });
      if (TURN_TOOLS.has(call.name)) {
        const outcome = outcomeOfTurnTool(config, call, args);
        if (typeof outcome === 'string') result(call, false, outcome);
        else ending = outcome;
        continue;
      }
      const done = await carryOut(call, args);
      if (done) return done;
    }
    return ending ? end(ending) : null;
  }

  const settled = await handleCalls(queue);
  if (settled) return settled;

  // Kept in step with the journal from call to call; the tools are the same for the whole turn.
  const conversation = new Conversation(config);
  const tools = [...toolSpecsOf(config), ...(mcp?.specs() ?? [])];
  let iterations = 0;
  let nudges = 0;
  for (;;) {
    if (signal.aborted) return end({ kind: 'cancelled' });
    if (iterations >= config.max_iterations) return end({ kind: 'iteration_cap', iterations });
    // The conversation is brought up to date once per call: the events recorded from here on (the call, its errors) are not part of it.
    await fitContext(config, journal, conversation, model, deps);
    // The call (and the result before it) is synced while its request is on the way; its answer is acted on only once both are on disk.
    journal.write({ type: 'model_call', iteration: ++iterations });
    const durable = journal.syncBehind();
    durable.catch(() => {});
    const reply = await callWithRetries(config, journal, conversation, tools, model, sleep, deps, signal);
    await durable;
    if (!reply || 'error' in reply) return signal.aborted || !reply ? end({ kind: 'cancelled' }) : end({ kind: 'failed', ...modelFailure(reply.error) });
    // Synced with what it leads to (a tool's start, a result, the turn's end), by the next append.
    journal.write({ type: 'model_reply', content: reply.content, tool_calls: reply.tool_calls, usage: reply.usage, finish_reason: reply.finish_reason, started_at: reply.started_at });
    if (!reply.tool_calls.length) {
      if (++nudges > NUDGES) return end({ kind: 'failed', reason: `the model stopped calling tools (answered ${NUDGES + 1} times with text only)` });
      journal.append({
        type: 'input',
        input: { kind: 'task', from: 'the runtime', text: config.lead ? 'Answer with a tool call: continue the work, ask_person to ask the person, or finish when done.' : 'Answer with a tool call: continue the work, or hand_off when your part is done.' },
      });
      continue;
    }
    nudges = 0;
    const outcome = await handleCalls(reply.tool_calls);
    if (outcome) return outcome;
  }
}

/**
 * Why the model's last call failed the turn, for the person reading the run's failure: a spent
 * budget says so (and when it resets), a refusal that will not change is a refusal, and only
 * what retrying did not mend is "could not be reached".
 */
function modelFailure(err: ModelError): { reason: string; cause?: AgentFailureCause } {
  if (/budget_exceeded$/.test(err.code ?? '')) return { reason: err.message, cause: 'budget' };
  return err.retryable ? { reason: `the model could not be reached: ${err.message}` } : { reason: `the model call was refused: ${err.message}`, cause: 'model_refused' };
}

async function callWithRetries(
  config: AgentConfig,
  journal: Journal,
  conversation: Conversation,
  tools: ToolSpec[],
  model: (req: ModelRequest) => Promise<ModelReply>,
  sleep: (ms: number, signal: AbortSignal) => Promise<void>,
  deps: LoopDeps,
  signal: AbortSignal,
): Promise<(ModelReply & { started_at: string }) | { error: ModelError } | null> {
  const attempts = deps.attempts ?? 4;
  for (let attempt = 1; ; attempt++) {
    const startedAt = new Date().toISOString();
    try {
      const reply = await model({
        baseUrl: config.base_url,
        model: config.model,
        messages: conversation.messages,
        messagesJson: conversation.json(),
        tools,
        stream: deps.stream ?? false,
        temperature: config.temperature,
        timeoutMs: deps.modelTimeoutMs ?? 300_000,
        signal,
        env: deps.env,
      });
      return { ...reply, started_at: startedAt };
    } catch (err) {
      if (signal.aborted) return null;
      const me = err instanceof ModelError ? err : new ModelError(err instanceof Error ? err.message : String(err), { retryable: true });
      const final = !me.retryable || attempt >= attempts;
      journal.append({ type: 'model_error', attempt, reason: me.message, final, started_at: startedAt });
      if (final) return { error: me };
      await sleep(me.retryAfterMs ?? Math.min(30_000, 1000 * 2 ** (attempt - 1)), signal);
    }
  }
}

/**
 * Keeps the conversation inside the model's window: first old tool output is masked (the
 * newest answer's results stay), then, if that is not enough, everything settled is replaced
 * by a summary the model writes. Each step is recorded as an event. Leaves `conversation` up to
 * date with the journal, as the model is called with it.
 */
async function fitContext(config: AgentConfig, journal: Journal, conversation: Conversation, model: (req: ModelRequest) => Promise<ModelReply>, deps: LoopDeps): Promise<void> {
  const budget = config.context_tokens;
  if (conversation.update(journal.all()).tokens <= budget * 0.7) return;
  const boundary = settledBoundary(journal.all());
  const toMask = journal.all().filter((e) => e.type === 'tool_result' && e.seq <= boundary && e.output.length > 200);
  const alreadyMasked = Math.max(0, ...journal.all().flatMap((e) => (e.type === 'context_masked' ? [e.up_to_seq] : [])));
  if (boundary > alreadyMasked && toMask.some((e) => e.seq > alreadyMasked)) {
    const fresh = toMask.filter((e) => e.seq > alreadyMasked) as Array<Extract<AgentEvent, { type: 'tool_result' }>>;
    journal.append({ type: 'context_masked', up_to_seq: boundary, tool_results: fresh.length, chars: fresh.reduce((n, e) => n + e.output.length, 0) });
    if (conversation.update(journal.all()).tokens <= budget * 0.85) return;
  }
  if (boundary === 0) return;
  const messages = conversation.messages;
  const transcript = messages
    .slice(1)
    .map((m) => `${m.role}: ${typeof m.content === 'string' ? m.content : ''}${m.role === 'assistant' && m.tool_calls ? ` [calls ${m.tool_calls.map((c) => `${c.function.name}(${c.function.arguments.slice(0, 300)})`).join(', ')}]` : ''}`)
    .join('\n')
    .slice(-budget * 2);
  let summary: string;
  // Nothing leaves the runtime while an event is only written.
  journal.sync();
  try {
    const reply = await model({
      baseUrl: config.base_url,
      model: config.model,
      messages: [
        { role: 'system', content: 'Summarize this agent conversation for the agent itself: the task, decisions, what was done (files, branches, commits), what is left, and open questions. Be concise and specific.' },
        { role: 'user', content: transcript },
      ],
      tools: [],
      stream: false,
      timeoutMs: deps.modelTimeoutMs ?? 300_000,
      signal: deps.signal,
      env: deps.env,
    });
    summary = reply.content?.trim() || '';
  } catch {
    summary = '';
  }
  // Without a model summary, the transcript's tail is the summary: the window must hold.
  if (!summary) summary = transcript.slice(-Math.floor(budget * 1.5));
  journal.append({ type: 'context_summarized', up_to_seq: boundary, summary });
  conversation.update(journal.all());
}
