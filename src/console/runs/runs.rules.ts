/**
 * A run's rules, as pure functions of the run and what happened: which agent events become
 * posts, and where a role's turn outcome takes the run (the pipeline, rework rounds, questions
 * through the lead, the end). The runs module owns them; the run journal applies the answer in
 * one transaction for the engine. Nothing here touches the database or a sandbox, so every rule
 * is tested on its own.
 */
import type { AgentEvent, AgentInput, TurnOutcome } from '../../agent/protocol.ts';
import { TURN_TOOLS } from '../../agent/tools/index.ts';

export type PostKind = 'notice' | 'working' | 'question' | 'answer' | 'completed' | 'failed' | 'canceled' | 'task' | 'reply' | 'artifact' | 'command_result';

export interface PostDraft {
  kind: PostKind;
  role: string | null;
  text: string;
  data?: Record<string, unknown>;
}

/** The run as the rules see it. */
export interface RunView {
  lead: string;
  roles: string[];
  /** role -> next role (the template's pipeline). */
  pipeline: Record<string, string>;
  rework_rounds: number;
  rework_used: number;
  /** Roles whose task waits for the lead's answer to their question. */
  waiting_on_lead: string[];
}

export interface NewTask {
  role: string;
  input: AgentInput;
}

/** What an outcome does to the run. */
export type Transition =
  | { kind: 'continue'; posts: PostDraft[]; tasks: NewTask[]; rework_used: number; task_state: 'done' | 'waiting' }
  | { kind: 'wait'; posts: PostDraft[]; waiting_for: { role: string; kind: 'question' | 'confirmation' }; question: string }
  | { kind: 'succeeded'; posts: PostDraft[]; summary: string; branch: string | null; pull_request_url: string | null }
  | { kind: 'failed'; posts: PostDraft[]; reason: string }
  | { kind: 'cancelled'; posts: PostDraft[] };

/** Whether work on a surface lives in a chat room (answered and cancelled there, not through the routes): chat_a and chat_b only. */
export function isChatSurface(surface: string): boolean {
  return surface === 'chat_a' || surface === 'chat_b';
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** The order of roles along the pipeline from the lead, for telling a send-back from a hand-on. */
export function pipelineOrder(view: Pick<RunView, 'lead' | 'pipeline' | 'roles'>): string[] {
  const order = [view.lead];
  let at = view.lead;
  while (view.pipeline[at] && !order.includes(view.pipeline[at])) {
    at = view.pipeline[at];
    order.push(at);
  }
  for (const r of view.roles) if (!order.includes(r)) order.push(r);
  return order;
}

/**
 * Where a hand-off goes. Forward along the pipeline always; back (a reviewer sending work
 * for rework) while rework rounds remain, after which the work goes on with the reviewer's
 * notes to the role after the sender (or the lead at the end of the chain).
 */
export function routeHandOff(view: RunView, from: string, to: string | null): { to: string; rework: boolean; exhausted: boolean } {
  const target = to ?? view.pipeline[from] ?? view.lead;
  const order = pipelineOrder(view);
  const back = target !== view.lead && order.indexOf(target) < order.indexOf(from);
  if (!back) return { to: target, rework: false, exhausted: false };
  if (view.rework_used < view.rework_rounds) return { to: target, rework: true, exhausted: false };
  return { to: view.pipeline[from] ?? view.lead, rework: false, exhausted: true };
}

/** What the engine does with a role's turn outcome. */
export function transitionOf(view: RunView, role: string, outcome: TurnOutcome): Transition {
  switch (outcome.kind) {
    case 'question': {
      if (role === view.lead) {
        const options = outcome.options.length ? `\n(options: ${outcome.options.join(' / ')})` : '';
        return { kind: 'wait', posts: [{ kind: 'question', role, text: `${outcome.question}${options}`, data: { kind: 'question', options: outcome.options } }], waiting_for: { role, kind: 'question' }, question: outcome.question };
      }
      // Only the lead talks to the person: another role's question goes to the lead.
      return {
        kind: 'continue',
        task_state: 'waiting',
        rework_used: view.rework_used,
        posts: [{ kind: 'task', role: view.lead, text: `${role} asks: ${outcome.question}`, data: { from: role, question: true } }],
        tasks: [{ role: view.lead, input: { kind: 'task', from: role, text: `The ${role} role asks (answer it with hand_off to "${role}", or ask the person): ${outcome.question}` } }],
      };
    }
    case 'confirmation':
      return {
        kind: 'wait',
        posts: [{ kind: 'question', role, text: `${role} wants to ${outcome.reason}. Approve or refuse?`, data: { kind: 'confirmation', tool: outcome.call.name, reason: outcome.reason } }],
        waiting_for: { role, kind: 'confirmation' },
        question: outcome.reason,
      };
    case 'hand_off': {
      if (view.waiting_on_lead.includes(outcome.to_role ?? '') && role === view.lead) {
        // The lead answers a role's question: that role's question gets the answer.
        const to = outcome.to_role!;
        return {
          kind: 'continue',
          task_state: 'done',
          rework_used: view.rework_used,
          posts: [{ kind: 'task', role: to, text: outcome.summary, data: { from: role, answer: true } }],
          tasks: [{ role: to, input: { kind: 'answer', text: outcome.summary } }],
        };
      }
      const route = routeHandOff(view, role, outcome.to_role);
      const note = route.exhausted ? `\n\n(The rework rounds are used up: go on with the ${role}'s notes above.)` : '';
      const branch = outcome.branch ? ` Branch: ${outcome.branch}.` : '';
      return {
        kind: 'continue',
        task_state: 'done',
        rework_used: view.rework_used + (route.rework ? 1 : 0),
        posts: [{ kind: 'task', role: route.to, text: `${outcome.summary}${branch}${note}`, data: { from: role, branch: outcome.branch, rework: route.rework, rework_exhausted: route.exhausted } }],
        tasks: [{ role: route.to, input: { kind: 'task', from: role, text: `${outcome.summary}${branch}${note}` } }],
      };
    }
    case 'finished':
      if (outcome.outcome === 'succeeded') {
        return { kind: 'succeeded', summary: outcome.summary, branch: outcome.branch, pull_request_url: outcome.pull_request_url, posts: [{ kind: 'completed', role, text: outcome.summary, data: { branch: outcome.branch, pull_request_url: outcome.pull_request_url } }] };
      }
      return { kind: 'failed', reason: outcome.summary, posts: [{ kind: 'failed', role, text: outcome.summary }] };
    case 'iteration_cap': {
      const reason = `the ${role} role used its ${outcome.iterations} model calls without finishing its task`;
      return { kind: 'failed', reason, posts: [{ kind: 'failed', role, text: reason }] };
    }
    case 'failed': {
      const reason = `the ${role} role failed: ${outcome.reason}`;
      // The cause rides on the failed post: what each surface advises depends on whether trying again can help.
      return { kind: 'failed', reason, posts: [{ kind: 'failed', role, text: reason, ...(outcome.cause ? { data: { cause: outcome.cause } } : {}) }] };
    }
    case 'cancelled':
      return { kind: 'cancelled', posts: [] };
    case 'pull_request':
      // Handled by the engine (it opens the pull request and answers the call); never a transition.
      throw new Error('pull_request outcomes are carried out by the engine, not routed');
  }
}

/** The post an agent event becomes, if any. Model calls and tool starts stay in the agent's journal only. */
/** Argument names that say what a tool call works on, most telling first. */
const SUBJECT_ARGS = ['path', 'file', 'command', 'cmd', 'pattern', 'query', 'url', 'name'];

/**
 * What a tool call works on, for its post ("write_file src/app.ts: done", "shell npm test:
 * failed"): the first telling argument of the model's call, on one line, clipped; null when none.
 */
export function subjectOf(args: string): string | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch {
    return null;
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return null;
  for (const key of SUBJECT_ARGS) {
    const v = (parsed as Record<string, unknown>)[key];
    const text = Array.isArray(v) && v.every((x) => typeof x === 'string') ? v.join(' ') : v;
    if (typeof text === 'string' && text.trim()) return clip(text.trim().replace(/\s+/g, ' '), 120);
  }
  return null;
}

/** The post an accepted event makes, if any; `subject` is what the result's call worked on (subjectOf). */
export function postOfEvent(role: string, e: AgentEvent, subject: string | null = null): PostDraft | null {
  switch (e.type) {
    case 'model_reply':
      return e.content && e.content.trim() ? { kind: 'working', role, text: clip(e.content.trim(), 8000) } : null;
    case 'tool_result':
      if (e.interrupted) return { kind: 'notice', role, text: `${e.name} was interrupted (the sandbox or the worker restarted while it ran, or it was cancelled); the agent was told.`, data: { tool: e.name } };
      // A turn-ending call already has its post (the task, question, answer or completion); its
      // settling result (a follow-up reopening a finished run settles the lead's `finish`) is not work.
      if (e.ok && TURN_TOOLS.has(e.name)) return null;
      return { kind: 'working', role, text: `${e.name}${subject ? ` ${subject}` : ''}: ${e.ok ? 'done' : 'failed'}`, data: { tool: e.name, ok: e.ok, output: clip(e.output, 2000), ...(subject ? { subject } : {}) } };
    case 'progress':
      return { kind: 'working', role, text: e.text };
    case 'proposal': {
      const p = e.proposal;
      const what = p.kind === 'skill' ? `the skill "${p.name}" (${clip(p.description, 300)})` : `the MCP server "${p.name}" at ${clip(p.url, 300)}${p.reason ? ` (${clip(p.reason, 300)})` : ''}`;
      const where = p.kind === 'skill' ? 'the team\'s skills' : 'the team\'s MCP servers';
      return { kind: 'notice', role, text: `${role} proposes ${what} for the team; it waits in ${where} as proposed until a person accepts it`, data: { proposal: p.kind, name: p.name } };
    }
    case 'plan':
      return { kind: 'working', role, text: `plan:\n${e.steps.map((s) => `- [${s.status === 'done' ? 'x' : s.status === 'in_progress' ? '~' : ' '}] ${s.step}`).join('\n')}`, data: { plan: e.steps } };
    case 'context_masked':
      return { kind: 'notice', role, text: `old tool output (${e.tool_results} results, ${e.chars} characters) was masked to keep the ${role}'s conversation in the model's window`, data: { context: 'masked' } };
    case 'context_summarized':
      return { kind: 'notice', role, text: `the ${role}'s conversation was summarized to fit the model's window`, data: { context: 'summarized' } };
    case 'model_error':
      return e.final ? null : { kind: 'notice', role, text: `a model call failed (attempt ${e.attempt}), retrying: ${clip(e.reason, 500)}` };
    default:
      return null;
  }
}

/** How a person's reply to a confirmation reads: approve or refuse, or null when it says neither. */
export function approvalOf(text: string): boolean | null {
  const word = text.trim().toLowerCase().split(/[\s.,!:;]+/)[0] ?? '';
  if (['approve', 'approved', 'yes', 'y', 'ok', 'okay', 'allow', 'go'].includes(word)) return true;
  if (['refuse', 'refused', 'no', 'n', 'deny', 'denied', 'reject', 'stop'].includes(word)) return false;
  return null;
}

/** The team memory block a conversation's first task gets: newest entries last, at most `max`. */
export function memoryBlock(entries: Array<{ text: string; created_at: string }>, max: number): string | null {
  if (max <= 0 || !entries.length) return null;
  return entries
    .slice(-max)
    .map((e) => `- ${e.created_at.slice(0, 10)}: ${e.text}`)
    .join('\n');
}

/** The outcome entry a completed run leaves in team memory. */
export function outcomeEntry(run: { text: string; state: 'succeeded' | 'failed'; summary: string; branch: string | null; commit: string | null; pull_request_url: string | null }): string {
  const delivery = [run.branch && `branch ${run.branch}`, run.commit && `commit ${run.commit.slice(0, 12)}`, run.pull_request_url && `pull request ${run.pull_request_url}`].filter(Boolean).join(', ');
  return `Asked: ${clip(run.text.replace(/\s+/g, ' '), 300)} | ${run.state === 'succeeded' ? 'Done' : 'Failed'}: ${clip(run.summary.replace(/\s+/g, ' '), 500)}${delivery ? ` | Delivered: ${delivery}` : ''}`;
}
