import { toolNamed } from './tools/catalog.ts';
import type { ChatMessage, ToolSpec } from './model.ts';
import type { AgentConfig, AgentEvent, ToolCall } from './protocol.ts';

/** The instructions every agent gets ahead of its version's own prompt. */
export function systemPromptOf(config: AgentConfig): string {
  const lines = [config.system_prompt.trim(), ''];
  lines.push(`You are the "${config.role}" role of a team of agents${config.lead ? ', and its lead: you alone talk to the person and end the run' : ''}.`);
  lines.push(`Team roles: ${config.roles.join(', ')}.${config.next_role ? ` When your part is done, hand the work to "${config.next_role}" with hand_off.` : ''}`);
  lines.push(`Your workspace is ${config.workspace}.${config.repo_dir ? ` The team's repository is cloned at ${config.repo_dir}.` : ''}${config.branch ? ` Work on the branch "${config.branch}" and push it when the work is ready.` : ''}`);
  lines.push('Act only through your tools. Each answer of yours should call at least one tool.');
  lines.push(config.lead ? 'When the task is done (or cannot be done), call finish.' : 'Do not call finish: hand the work back with hand_off; ask_person sends your question to the lead.');
  if (config.documents.length) {
    lines.push('', 'Context documents (read-only; read them with read_file when relevant):');
    for (const d of config.documents) lines.push(`- ${d.path} (${d.type}, ${d.size} bytes, ${d.scope}): ${d.description}`);
  }
  if (config.skills.length) {
    lines.push('', 'Skills (instructions on disk; read the one that fits before you start such work):');
    for (const s of config.skills) lines.push(`- ${s.name} at ${s.path}: ${s.description}`);
  }
  return lines.join('\n');
}

export function toolSpecsOf(config: AgentConfig): ToolSpec[] {
  return config.tools.flatMap((name) => {
    const t = toolNamed(name);
    return t ? [{ type: 'function' as const, function: { name: t.name, description: t.description, parameters: t.parameters } }] : [];
  });
}

function taskMessage(input: Extract<AgentEvent, { type: 'input' }>['input']): string | null {
  if (input.kind !== 'task') return null;
  const memory = input.memory ? `Team memory (outcomes of earlier work):\n${input.memory}\n\n` : '';
  return `${memory}${input.from === 'person' ? 'Task' : `Message from ${input.from}`}:\n${input.text}`;
}

/** Where the context marks of a journal leave its conversation: the summary and the seqs it and the masking cover. */
interface Marks {
  summarizedUpTo: number;
  summary: string | null;
  maskedUpTo: number;
}

function marksOf(events: readonly AgentEvent[]): Marks {
  const marks: Marks = { summarizedUpTo: 0, summary: null, maskedUpTo: 0 };
  for (const e of events) {
    if (e.type === 'context_summarized') {
      marks.summarizedUpTo = e.up_to_seq;
      marks.summary = e.summary;
    } else if (e.type === 'context_masked') marks.maskedUpTo = Math.max(marks.maskedUpTo, e.up_to_seq);
  }
  return marks;
}

/** The message one event makes in the conversation, if any. */
function messageOf(e: AgentEvent, marks: Marks): ChatMessage | null {
  if (e.seq <= marks.summarizedUpTo) return null;
  if (e.type === 'input') {
    const text = taskMessage(e.input);
    return text ? { role: 'user', content: text } : null;
  }
  if (e.type === 'model_reply') {
    return {
      role: 'assistant',
      content: e.content,
      ...(e.tool_calls.length ? { tool_calls: e.tool_calls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })) } : {}),
    };
  }
  if (e.type === 'tool_result') {
    const content = e.seq <= marks.maskedUpTo && e.output.length > 200 ? `[output of ${e.name} masked to save context: ${e.output.length} characters; run the tool again if you need it]` : e.output;
    return { role: 'tool', tool_call_id: e.call_id, content: e.ok ? content : `ERROR: ${content}` };
  }
  return null;
}

function headOf(config: AgentConfig, marks: Marks): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'system', content: systemPromptOf(config) }];
  if (marks.summary) messages.push({ role: 'user', content: `Summary of the conversation so far (earlier messages were dropped to fit the context window):\n${marks.summary}` });
  return messages;
}

/**
 * The conversation the model sees, derived from the journal: the system prompt, then tasks
 * as user messages, the model's answers, and one tool message per tool call. Tool results
 * up to the last `context_masked` mark are masked; everything up to the last
 * `context_summarized` mark is replaced by its summary.
 */
export function messagesOf(config: AgentConfig, events: readonly AgentEvent[]): ChatMessage[] {
  const marks = marksOf(events);
  const messages = headOf(config, marks);
  for (const e of events) {
    const m = messageOf(e, marks);
    if (m) messages.push(m);
  }
  return messages;
}

const CLOSE = Buffer.from(']');

/**
 * The conversation of one journal (`messagesOf`), kept in step with it as it grows: each update
 * folds in only the events recorded since the last one, each message with its JSON text and its
 * share of the token estimate, so a model call costs what the step added rather than the whole
 * conversation again (derived, estimated and serialised). A context mark changes earlier
 * messages: the conversation is then derived again in full.
 */
export class Conversation {
  private readonly config: AgentConfig;
  private marks: Marks = { summarizedUpTo: 0, summary: null, maskedUpTo: 0 };
  /** The events folded in so far (the journal's first `upTo`). */
  private upTo = 0;
  private list: ChatMessage[] = [];
  /** Each message's JSON, UTF-8, after a `[` (the first) or a `,` (the others). */
  private pieces: Buffer[] = [];
  private chars = 0;

  constructor(config: AgentConfig) {
    this.config = config;
  }

  /** Brings the conversation up to `events` (the journal's, which only grows). */
  update(events: readonly AgentEvent[]): this {
    let fresh: readonly AgentEvent[] = events.slice(this.upTo);
    if (this.upTo === 0 || events.length < this.upTo || fresh.some((e) => e.type === 'context_masked' || e.type === 'context_summarized')) {
      this.marks = marksOf(events);
      this.list = [];
      this.pieces = [];
      this.chars = 0;
      for (const m of headOf(this.config, this.marks)) this.add(m);
      fresh = events;
    }
    for (const e of fresh) {
      const m = messageOf(e, this.marks);
      if (m) this.add(m);
    }
    this.upTo = events.length;
    return this;
  }

  private add(m: ChatMessage): void {
    this.list.push(m);
    this.pieces.push(Buffer.from(`${this.pieces.length ? ',' : '['}${JSON.stringify(m)}`));
    this.chars += charsOf(m);
  }

  /** The messages (a copy of the list: it grows with the next update). */
  get messages(): ChatMessage[] {
    return this.list.slice();
  }

  /** `estimateTokens(messages)`. */
  get tokens(): number {
    return Math.ceil(this.chars / 4);
  }

  /** `JSON.stringify(messages)` as UTF-8, in pieces (each message's, kept since it was added) that the request puts together. */
  json(): Buffer[] {
    return [...this.pieces, CLOSE];
  }
}

/** The calls of the last model answer that have no result yet, in order. */
export function pendingCalls(events: readonly AgentEvent[]): { calls: ToolCall[]; started: Set<string> } {
  let lastReply = -1;
  for (let i = events.length - 1; i >= 0; i--) {
    if (events[i].type === 'model_reply') {
      lastReply = i;
      break;
    }
  }
  if (lastReply < 0) return { calls: [], started: new Set() };
  const reply = events[lastReply] as Extract<AgentEvent, { type: 'model_reply' }>;
  const done = new Set<string>();
  const started = new Set<string>();
  for (const e of events.slice(lastReply + 1)) {
    if (e.type === 'tool_result') done.add(e.call_id);
    if (e.type === 'tool_started') started.add(e.call.id);
  }
  return { calls: reply.tool_calls.filter((c) => !done.has(c.id)), started };
}

/** Rough token count of a conversation: four characters a token, as the model proxy estimates. */
export function estimateTokens(messages: readonly ChatMessage[]): number {
  let chars = 0;
  for (const m of messages) chars += charsOf(m);
  return Math.ceil(chars / 4);
}

function charsOf(m: ChatMessage): number {
  let chars = (typeof m.content === 'string' ? m.content.length : 0) + 16;
  if (m.role === 'assistant' && m.tool_calls) for (const c of m.tool_calls) chars += c.function.name.length + c.function.arguments.length;
  return chars;
}

/** The seq of the last event before the newest model answer: everything up to it is settled (every call has its result). */
export function settledBoundary(events: readonly AgentEvent[]): number {
  for (let i = events.length - 1; i >= 0; i--) if (events[i].type === 'model_reply') return i > 0 ? events[i - 1].seq : 0;
  return 0;
}
