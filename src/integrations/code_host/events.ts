/**
 * What a code-host webhook event means for Crewhouse: the documented rule, as a pure function
 * of the event name and its parsed payload (README, "The code host"):
 *
 * - an issue becomes a task when it is opened carrying the label `crewhouse` or
 *   `crewhouse:<team>`, or when such a label is added to it; `crewhouse:<team>` names one of the
 *   teams of the repository, plain `crewhouse` needs the repository to belong to exactly one team;
 * - a comment (on an issue or a pull request) is addressed to the team when it mentions
 *   `@crewhouse` or `/crewhouse`; on the issue or pull request of a run it answers the run's open
 *   question, or else is a follow-up task in the same run; comments of bots are never addressed;
 * - a pull request closed (merged or not) is recorded on the run that opened it;
 * - everything else is acknowledged and ignored.
 */

export const TASK_LABEL = 'crewhouse';
const MENTION = /(^|[^\w@/])(@crewhouse|\/crewhouse)\b[:,]?/i;

export type CodeHostIntent =
  | { kind: 'task'; repo: string; repo_urls: string[]; issue: number; title: string; body: string; url: string; team: string | null; author: string }
  | { kind: 'comment'; repo: string; number: number; on: 'issue' | 'pull_request'; text: string; author: string; url: string }
  | { kind: 'pull_closed'; repo: string; number: number; merged: boolean; url: string }
  | { kind: 'ignore'; reason: string };

type Obj = Record<string, any>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `crewhouse` (null: any team of the repository) or `crewhouse:<team>` (the team), else undefined. */
export function teamOfLabel(name: unknown): string | null | undefined {
  if (typeof name !== 'string') return undefined;
  const n = name.trim();
  if (n.toLowerCase() === TASK_LABEL) return null;
  const m = /^crewhouse:([a-z0-9][a-z0-9-]{0,62})$/i.exec(n);
  return m ? m[1].toLowerCase() : undefined;
}

/** The text of a comment addressed to the team (the mention taken out), or null when it is not addressed. */
export function addressedText(body: string): string | null {
  if (!MENTION.test(body)) return null;
  const text = body.replace(MENTION, '$1').replace(/[ \t]{2,}/g, ' ').trim();
  return text || null;
}

export function intentOf(event: string, payload: unknown): CodeHostIntent {
  if (!isObj(payload)) return { kind: 'ignore', reason: 'the payload is not a JSON object' };
  const repo = isObj(payload.repository) && typeof payload.repository.full_name === 'string' ? payload.repository.full_name : null;
  const action = typeof payload.action === 'string' ? payload.action : null;
  if (event === 'ping') return { kind: 'ignore', reason: 'ping' };
  if (!repo) return { kind: 'ignore', reason: `${event} names no repository` };
  const sender = isObj(payload.sender) ? payload.sender : {};
  const author = typeof sender.login === 'string' ? sender.login : 'someone';

  if (event === 'issues') {
    const issue = payload.issue;
    if (!isObj(issue) || typeof issue.number !== 'number') return { kind: 'ignore', reason: 'issues event without an issue' };
    let team: string | null | undefined;
    if (action === 'opened') {
      const labels: unknown[] = Array.isArray(issue.labels) ? issue.labels : [];
      for (const l of labels) {
        const t = teamOfLabel(isObj(l) ? l.name : undefined);
        if (t !== undefined && (team === undefined || team === null)) team = t;
      }
      if (team === undefined) return { kind: 'ignore', reason: `issue #${issue.number} was opened without a "${TASK_LABEL}" label` };
    } else if (action === 'labeled') {
      team = teamOfLabel(isObj(payload.label) ? payload.label.name : undefined);
      if (team === undefined) return { kind: 'ignore', reason: `the label added to issue #${issue.number} is not "${TASK_LABEL}"` };
    } else {
      return { kind: 'ignore', reason: `issues.${action ?? '?'} is not consumed` };
    }
    const r = payload.repository as Obj;
    return {
      kind: 'task',
      repo,
      repo_urls: [r.clone_url, r.html_url, r.git_url, r.ssh_url].filter((u): u is string => typeof u === 'string'),
      issue: issue.number,
      title: String(issue.title ?? ''),
      body: typeof issue.body === 'string' ? issue.body : '',
      url: String(issue.html_url ?? ''),
      team,
      author,
    };
  }

  if (event === 'issue_comment') {
    if (action !== 'created') return { kind: 'ignore', reason: `issue_comment.${action ?? '?'} is not consumed` };
    const issue = payload.issue;
    const comment = payload.comment;
    if (!isObj(issue) || typeof issue.number !== 'number' || !isObj(comment)) return { kind: 'ignore', reason: 'issue_comment event without its issue or comment' };
    if (sender.type === 'Bot' || (isObj(comment.user) && comment.user.type === 'Bot')) return { kind: 'ignore', reason: 'comments of bots are not addressed to a team' };
    const text = addressedText(typeof comment.body === 'string' ? comment.body : '');
    if (text === null) return { kind: 'ignore', reason: 'the comment does not mention @crewhouse or /crewhouse' };
    return { kind: 'comment', repo, number: issue.number, on: isObj(issue.pull_request) ? 'pull_request' : 'issue', text, author, url: String(comment.html_url ?? '') };
  }

  if (event === 'pull_request') {
    const pr = payload.pull_request;
    if (!isObj(pr) || typeof pr.number !== 'number') return { kind: 'ignore', reason: 'pull_request event without a pull request' };
    if (action !== 'closed') return { kind: 'ignore', reason: `pull_request.${action ?? '?'} is not consumed` };
    return { kind: 'pull_closed', repo, number: pr.number, merged: pr.merged === true, url: String(pr.html_url ?? '') };
  }

  return { kind: 'ignore', reason: `${event} events are not consumed` };
}

/** The task text the team's lead gets for an issue. */
/** The issue a task's text came from (taskTextOf puts its address on the second line), or null. */
export function issueOfTaskText(text: string): { url: string; number: number } | null {
  const m = /^(https?:\/\/\S+\/issues\/(\d+))$/m.exec(text);
  return m ? { url: m[1], number: Number(m[2]) } : null;
}

export function taskTextOf(intent: Extract<CodeHostIntent, { kind: 'task' }>): string {
  const body = intent.body.trim();
  return [`Issue #${intent.issue} of ${intent.repo}: ${intent.title}`, intent.url, body ? `\n${body}` : ''].filter(Boolean).join('\n').slice(0, 16_000);
}
