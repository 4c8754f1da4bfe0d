import { failureCauseOf, retryAdvice, serviceName } from '../surface.ts';
import type { ChatFormat } from './format.ts';
import type { ChatFile, ChatRunPost, ChatRunView } from './ports.ts';

/**
 * A run's posts as a chat thread says them: when the run starts, which role is working (once per
 * role until another takes over), each hand-off (said by the role taking over), the lead's
 * questions (mentioning the person who gave the task), confirmations, proposals, the delivery,
 * the failure reason and the cost. The person's own words (the task, answers, follow-ups) are
 * already in the thread and are not repeated; a role's every tool step is not posted.
 *
 * Written in the surface's dialect (format.ts): the core's markup is the surface's, and agents'
 * and people's words go through `format.text`. Each surface defuses mass mentions and bounds the
 * length when it posts.
 */

export interface RenderContext {
  /** A mention of the person who gave the task. */
  requester: string;
  /** The role last said to be working in this thread. */
  lastRole: string | null;
  /** The run as it is now (cost, delivery), for the end posts. */
  run: Pick<ChatRunView, 'cost_usd' | 'delivery' | 'id'>;
  /** The surface's dialect. */
  format: ChatFormat;
}

export interface RenderedPost {
  text: string;
  /** The role whose bot says it; null: the surface bot, for the run itself. */
  role: string | null;
  /** A confirmation: posted with approve/refuse buttons. */
  confirmation: boolean;
  /** The role now working, when this post says so. */
  working: string | null;
}

const cost = (usd: number) => `$${usd.toFixed(usd < 1 ? 4 : 2)}`;

/**
 * A person as a run names them (`chat_a:@alice`, `tracker_a:Ada`: the surface, then who there),
 * for people reading a thread: the name alone, without the surface's prefix (an internal word);
 * a name without a prefix (a Console user) as it is. Not a mention: a person from elsewhere may
 * not be in the room.
 */
export const personNamed = (by: string) => by.slice(by.indexOf(':') + 1) || by;

function deliveryLines(run: RenderContext['run'], data: Record<string, unknown>, f: ChatFormat): string[] {
  const branch = (typeof data.branch === 'string' ? data.branch : null) ?? run.delivery?.branch ?? null;
  const pr = (typeof data.pull_request_url === 'string' ? data.pull_request_url : null) ?? run.delivery?.pull_request?.url ?? null;
  return [branch ? `Branch: ${f.code(branch)}` : null, pr ? `Pull request: ${f.text(pr)}` : null].filter((x): x is string => x !== null);
}

/** The thread's root post: the run started, for whom, with what. */
export function renderStart(input: { requester: string; team: string; runId: string; text: string; format: ChatFormat }): string {
  const f = input.format;
  const task = input.text.length > 500 ? `${input.text.slice(0, 500)}…` : input.text;
  return `Run ${f.code(input.runId)} started for ${input.requester}: team ${f.bold(input.team)} is on it. Follow it in this thread; reply here to add to it, ${f.code('cancel')} to stop it.\n> ${f.text(task).replace(/\n/g, '\n> ')}`;
}

/**
 * The root post of a thread opened in a team's home room for work that came from elsewhere (a
 * tracker's issue, the code host): where it came from, with the link back, and who asked there.
 */
export function renderStartFrom(input: { team: string; runId: string; text: string; by: string; origin: { surface: string; place: string; url: string | null } | null; format: ChatFormat }): string {
  const f = input.format;
  const task = input.text.length > 500 ? `${input.text.slice(0, 500)}…` : input.text;
  const o = input.origin;
  const place = o ? `${o.place} on ${serviceName(o.surface)}` : null;
  const from = !o ? 'another surface' : o.url ? f.link(place!, o.url) : f.text(place!);
  return `Run ${f.code(input.runId)} started: team ${f.bold(input.team)} took work from ${from}, asked by ${f.text(input.by)}. Its progress goes there and into this thread; reply here to answer its questions or add to it, ${f.code('cancel')} to stop it.\n> ${f.text(task).replace(/\n/g, '\n> ')}`;
}

/** A run post as the thread says it, or null when the thread does not show it. */
export function renderPost(p: ChatRunPost, ctx: RenderContext): RenderedPost | null {
  const f = ctx.format;
  const none = { confirmation: false, working: null };
  const said = f.text(p.text);
  switch (p.kind) {
    case 'working':
      if (!p.role || p.role === ctx.lastRole) return null;
      return { text: `${f.bold(p.role)} is working.`, role: p.role, ...none, working: p.role };
    case 'task': {
      const from = typeof p.data.from === 'string' ? p.data.from : null;
      if (!from || from === 'person' || !p.role) return null;
      if (p.data.question) return { text: `${f.bold(from)} asks ${f.bold(p.role)}: ${said}`, role: from, ...none };
      const rework = p.data.rework ? ' (rework)' : '';
      return { text: `${f.bold(p.role)} takes over from ${f.bold(from)}${rework}:\n${said}`, role: p.role, confirmation: false, working: p.role };
    }
    case 'question':
      if (p.data.kind === 'confirmation') {
        return { text: `${ctx.requester} ${f.bold(p.role ?? 'the lead')} asks for a confirmation: ${said}\nApprove or refuse with the buttons, or reply ${f.code('approve')} or ${f.code('refuse')} in this thread.`, role: p.role, confirmation: true, working: null };
      }
      return { text: `${ctx.requester} ${f.bold(p.role ?? 'the lead')} asks: ${said}\nReply in this thread to answer.`, role: p.role, ...none };
    case 'notice':
      if (p.data.proposal && p.data.stored === false) return { text: said, role: p.role, ...none };
      if (p.data.proposal === 'skill') return { text: `${said}. Say ${f.code('skills')} to see it, ${f.code(`skills accept ${String(p.data.name ?? '<name>')}`)} to accept it.`, role: p.role, ...none };
      if (p.data.proposal) return { text: `${said}. A person accepts it in the Crewhouse console.`, role: p.role, ...none };
      return null;
    case 'completed':
      return { text: [`Done: ${said}`, ...deliveryLines(ctx.run, p.data, f), `Cost: ${cost(ctx.run.cost_usd)}`, 'Reply in this thread to ask for changes or more.'].join('\n'), role: p.role, ...none };
    case 'failed': {
      // Whether trying again can help is the failure's cause (on the post): a spent budget, an archived team, a model that refuses.
      const cause = failureCauseOf(p.data);
      const next = cause ? retryAdvice(cause, 'reply in this thread') : 'Reply in this thread to have the team try again, with what to do differently.';
      return { text: `The run failed: ${said}\nCost: ${cost(ctx.run.cost_usd)}\n${next}`, role: null, ...none };
    }
    case 'canceled': {
      const by = typeof p.data.by === 'string' && p.data.by ? p.data.by : null;
      const what = by ? `cancelled by ${f.text(personNamed(by))}` : p.text.startsWith('cancelled') ? said : `cancelled: ${said}`;
      return { text: `The run was ${what}.\nCost: ${cost(ctx.run.cost_usd)}\nFor new work, give the team a new task in the room.`, role: null, ...none };
    }
    default:
      // task from the person, answers and follow-ups (the person's own words), artifacts, command results.
      return null;
  }
}

/** One line of a run for `status`. */
export function statusLine(r: ChatRunView, f: ChatFormat): string {
  const what = r.text.split('\n')[0]!.slice(0, 80);
  const waiting = r.waiting_for ? ` (waiting for an answer to the ${r.waiting_for.role}'s ${r.waiting_for.kind})` : '';
  return `- ${f.code(r.id)} ${r.state}${waiting}, ${cost(r.cost_usd)}: ${f.text(what)}`;
}

/** A post longer than this (characters or lines) goes as a short summary and a file. */
export const LONG_POST = { chars: 3000, lines: 40 };
/** How much of a long post the summary keeps. */
const SUMMARY = { chars: 600, lines: 8 };

const FENCED = /```(diff|patch|log|console|text)?\n([\s\S]*?)```/;

/**
 * Long output never goes as a wall of text: a post longer than `LONG_POST`, or one holding a
 * diff or a log (a fenced ```diff/```log block, or a `diff --git` header), becomes its first
 * lines and the whole as a file named `<stem>.diff`, `.log` or `.md`. Null when the post is
 * fine as it is.
 */
export function longOutput(text: string, stem: string): { text: string; file: ChatFile } | null {
  const fenced = FENCED.exec(text);
  const kind = fenced?.[1] === 'diff' || fenced?.[1] === 'patch' || /^diff --git /m.test(text) ? 'diff' : fenced?.[1] === 'log' || fenced?.[1] === 'console' ? 'log' : null;
  const lines = text.split('\n');
  if (!kind && text.length <= LONG_POST.chars && lines.length <= LONG_POST.lines) return null;
  const name = `${stem}.${kind ?? 'md'}`;
  // The summary: what comes before the block (or the first lines), never a half-open block.
  const before = fenced ? text.slice(0, fenced.index).trimEnd() : lines.slice(0, SUMMARY.lines).join('\n');
  let head = before.length > SUMMARY.chars ? `${before.slice(0, SUMMARY.chars)}…` : before;
  if ((head.match(/```/g) ?? []).length % 2 === 1) head = head.slice(0, head.lastIndexOf('```')).trimEnd();
  const what = kind === 'diff' ? 'The diff' : kind === 'log' ? 'The log' : `The whole text (${lines.length} lines)`;
  return {
    text: `${head}${head ? '\n' : ''}_${what} is attached as \`${name}\`._`,
    file: { name, content: text, type: kind === 'diff' ? 'text/x-diff' : kind === 'log' ? 'text/plain' : 'text/markdown' },
  };
}
