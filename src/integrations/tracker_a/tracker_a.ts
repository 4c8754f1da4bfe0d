import crypto from 'node:crypto';
import { clip, obj, str } from '../tracker/payload.ts';
import type { MessageNote, ProgressContext, ProgressNote, TaskIntent, TrackerConnection, TrackerIntent, TrackerIssue, TrackerKind, TrackerPerson } from '../tracker/kind.ts';
import type { TrackerWork } from '../tracker/tracker.store.ts';
import { TrackerError, transportReason } from '../tracker/errors.ts';
import { retryAdvice } from '../surface.ts';
import type { ActivityContent, LinearApp } from './client.ts';

/**
 * tracker_a: Linear, as an agent app. Work comes in as the agent-session events an app
 * receives (`AgentSessionEvent` `created` when it is assigned an issue or mentioned, `prompted`
 * when a person writes in the session), and, for workspaces without agent sessions, as an issue
 * assigned to the app (`Issue` `update`) or a comment mentioning it (`Comment` `create`).
 * Progress goes out as agent activities in the session (thought, elicitation for a question,
 * response with the pull request, error), or as comments when there is no session.
 */

/** The client is loaded on first use: a deployment without Linear never holds the SDK in memory. */
const clientModule = () => import('./client.ts');

export interface TrackerASettings {
  enabled: boolean;
  apiUrl: string;
}

function personOf(v: unknown): TrackerPerson | null {
  const p = obj(v);
  const id = str(p.id);
  return id ? { id, name: str(p.name) ?? str(p.displayName) ?? id } : null;
}

function issueOf(v: unknown, extra = ''): TrackerIssue | null {
  const i = obj(v);
  const id = str(i.id);
  const key = str(i.identifier);
  if (!id || !key) return null;
  const description = str(i.description) ?? '';
  return { id, key, url: str(i.url), title: str(i.title) ?? key, text: [description, extra].filter(Boolean).join('\n\n') };
}

/** A mention of the app in a comment: `@<name>` of the app's user, as Linear writes it. */
function mentionPattern(names: string[]): RegExp {
  const alts = names.filter(Boolean).map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`(^|\\s)@(${alts.join('|')})\\b[:,]?`, 'i');
}

/** The pure rule: what an event means, given who the app is. Exported for its test. */
export function linearIntentOf(delivery: { event: string; payload: unknown }, app: { id: string; names: string[] }): TrackerIntent | { kind: 'needs_issue'; issueId: string; comment: { text: string; by: TrackerPerson }; addressed: boolean } {
  const p = obj(delivery.payload);
  const action = str(p.action);
  const what = `${delivery.event}${action ? `.${action}` : ''}`;
  if (delivery.event === 'AgentSessionEvent') {
    const session = obj(p.agentSession);
    const sessionId = str(session.id);
    if (!sessionId) return { kind: 'ignore', reason: 'the agent session event names no session' };
    if (str(p.appUserId) && p.appUserId !== app.id) return { kind: 'ignore', reason: 'the agent session is of another app' };
    if (action === 'created') {
      const by = personOf(session.creator) ?? { id: str(session.creatorId) ?? 'unknown', name: 'someone' };
      const said = str(obj(session.comment).body);
      const asked = said ? said.replace(mentionPattern(app.names), '$1').replace(/[ \t]{2,}/g, ' ').trim() || null : null;
      const issue = issueOf(session.issue, asked ? `${by.name} asked: ${asked}` : '');
      if (!issue) return { kind: 'ignore', reason: 'the agent session is not on an issue' };
      return { kind: 'task', issue, session: sessionId, by, ask: asked };
    }
    if (action === 'prompted') {
      const activity = obj(p.agentActivity);
      const by = personOf(activity.user) ?? { id: str(activity.userId) ?? 'unknown', name: 'someone' };
      if (by.id === app.id) return { kind: 'ignore', reason: 'a prompt written by the app itself' };
      const text = str(obj(activity.content).body);
      const issueId = str(session.issueId) ?? str(obj(session.issue).id);
      // "Send stop request" in Linear: a prompt with the stop signal, never an answer or a follow-up.
      if (activity.signal === 'stop') return issueId ? { kind: 'stop', issueId, session: sessionId, by, how: 'asked the agent to stop' } : { kind: 'ignore', reason: 'the stop request\'s session has no issue' };
      if (!text || !issueId) return { kind: 'ignore', reason: 'the prompt has no text or the session no issue' };
      return { kind: 'reply', issueId, session: sessionId, text, by, addressed: true, orTask: null };
    }
    return { kind: 'ignore', reason: `${what} is not work for the agent` };
  }
  const data = obj(p.data);
  const actor = personOf(p.actor);
  if (delivery.event === 'Issue' && action === 'update') {
    const from = obj(p.updatedFrom);
    const assigneeChanged = Object.prototype.hasOwnProperty.call(from, 'assigneeId');
    // Unassigned from the app by a person: the work stops.
    if (assigneeChanged && from.assigneeId === app.id && data.assigneeId !== app.id) {
      const issueId = str(data.id);
      if (actor?.id === app.id || !issueId) return { kind: 'ignore', reason: 'an issue change other than a person unassigning the app' };
      return { kind: 'stop', issueId, session: null, by: actor ?? { id: 'unknown', name: 'someone' }, how: 'unassigned the agent' };
    }
    const assignedNow = data.assigneeId === app.id && assigneeChanged;
    if (!assignedNow) return { kind: 'ignore', reason: 'an issue change other than its assignment to the app' };
    if (actor?.id === app.id) return { kind: 'ignore', reason: 'the app assigned the issue itself' };
    const issue = issueOf(data);
    if (!issue) return { kind: 'ignore', reason: 'the issue event carries no issue' };
    return { kind: 'task', issue, session: null, by: actor ?? { id: 'unknown', name: 'someone' } };
  }
  if (delivery.event === 'Comment' && action === 'create') {
    const by = personOf(data.user) ?? actor ?? { id: str(data.userId) ?? 'unknown', name: 'someone' };
    if (by.id === app.id || data.userId === app.id || !!data.botActor) return { kind: 'ignore', reason: 'a comment written by the app itself' };
    const body = str(data.body) ?? '';
    const issueId = str(data.issueId) ?? str(obj(data.issue).id);
    if (!issueId) return { kind: 'ignore', reason: 'the comment is not on an issue' };
    const mention = mentionPattern(app.names);
    const addressed = mention.test(body);
    const text = body.replace(mention, '$1').replace(/[ \t]{2,}/g, ' ').trim();
    if (!text) return { kind: 'ignore', reason: 'the comment has no text besides the mention' };
    return { kind: 'needs_issue', issueId, comment: { text, by }, addressed };
  }
  return { kind: 'ignore', reason: `${what} is not work for the agent` };
}

/** What a person on the issue can expect next, after the team took up work. */
const REPORTS_BACK = 'The team reports back here when it finishes or has a question.';

/**
 * A note as an agent activity, or (`inSession` false) as the text of a comment, for work that
 * came without an agent session: each says what to do next where it is read (a reply in the
 * session, or a comment on the issue mentioning the agent).
 */
export function activityOf(note: ProgressNote, ctx: ProgressContext, inSession = true): Extract<ActivityContent, { body: string }> {
  const run = `[run ${ctx.runId}](${ctx.runUrl})`;
  const write = inSession ? 'reply in this session' : 'comment on this issue mentioning the agent';
  switch (note.kind) {
    case 'started':
      return { type: 'thought', body: `Team \`${ctx.team}\` is on it: ${run}. ${REPORTS_BACK}` };
    case 'resumed':
      return { type: 'thought', body: `${note.by ? `Team \`${ctx.team}\` resumed work on ${note.by}'s follow-up.` : `Team \`${ctx.team}\` resumed work on a follow-up given in ${note.where}.`} ${run}. ${REPORTS_BACK}` };
    case 'question': {
      const how = inSession ? (note.confirmation ? 'Answer here with approve or refuse.' : 'Answer here in the session.') : note.confirmation ? 'Answer with a comment: approve or refuse.' : 'Answer with a comment on this issue.';
      return { type: 'elicitation', body: `${note.role} asks:\n\n${note.text}\n\n${how}` };
    }
    case 'delivered':
      return {
        type: 'response',
        body: [
          note.summary ? clip(note.summary, 2000) : `Team \`${ctx.team}\` finished.`,
          note.pullUrl ? `Pull request: ${note.pullUrl} (review and merge it there).` : note.branch ? `Branch \`${note.branch}\` was pushed.` : 'Nothing was pushed.',
          `${run}. For changes, ${write} with what to change.`,
        ].join('\n\n'),
      };
    case 'failed':
      return { type: 'error', body: `Team \`${ctx.team}\` could not finish: ${note.reason}. ${run}. ${note.cause ? retryAdvice(note.cause, write) : `To have it try again, ${write} with what to do differently.`}` };
    case 'cancelled':
      return { type: 'error', body: `The run was cancelled, and the team stopped working on it. ${run}. For new work, assign the agent a new issue.` };
  }
}

/** What a person's message that was not taken as it came is told: in the session it was written in, or as a comment mentioning them. */
export function answerOf(note: MessageNote, inSession: boolean): Extract<ActivityContent, { body: string }> {
  const theirs = note.what === 'task' ? 'this issue' : `${note.by.name}'s ${note.what}`;
  if (note.kind === 'deferred') {
    const taken = note.what === 'task' ? `the team takes this issue at ${note.at}` : `${theirs} is taken at ${note.at}`;
    return { type: 'thought', body: `Team \`${note.team}\` has spent its daily budget, so ${taken}, when the budget is whole again. Nothing more to do: the team reports back here then.` };
  }
  const next = note.what === 'task' ? 'Assign the agent again once that is mended.' : 'For new work, assign the agent a new issue.';
  const body = `Crewhouse could not take ${theirs}: ${note.reason.replace(/\.$/, '')}. ${next}`;
  return { type: 'error', body: inSession ? body : `@${note.by.name} ${body}` };
}

/** The same note as a comment, for work that came without an agent session. */
function commentOf(note: ProgressNote, ctx: ProgressContext, work: TrackerWork): string {
  const a = activityOf(note, ctx, false);
  const body = 'body' in a ? a.body : '';
  if (note.kind === 'question') return `${work.requested_by_name ? `@${work.requested_by_name} ` : ''}${body}`;
  return body;
}

export function trackerAKind(deps: { settings(): Promise<TrackerASettings>; reveal(name: string): Promise<string | null> }): TrackerKind {
  let cached: { key: string; app: LinearApp; self: Promise<{ id: string; name: string }> | null } | null = null;

  async function appOf(evenDisabled: boolean): Promise<{ app: LinearApp; self: () => Promise<{ id: string; name: string }> } | string> {
    const s = await deps.settings();
    if (!s.enabled && !evenDisabled) return 'the tracker_a integration is not enabled';
    const token = await deps.reveal('integrations/tracker_a/access_token');
    if (!token) return 'tracker_a is not configured: the secret integrations/tracker_a/access_token has no value';
    const key = crypto.createHash('sha256').update(`${s.apiUrl}\n${token}`).digest('hex');
    if (cached?.key !== key) {
      const { createLinearApp } = await clientModule();
      try {
        cached = { key, app: createLinearApp({ apiUrl: s.apiUrl, accessToken: token }), self: null };
      } catch {
        return `tracker_a's api_url cannot be used by the Linear SDK: set it to the GraphQL endpoint's https address (http only on localhost)`;
      }
    }
    const c = cached;
    return {
      app: c.app,
      // Who the app is, asked once per client (a failure is asked again next time).
      self: () => (c.self ??= c.app.viewer().catch((err) => ((c.self = null), Promise.reject(err)))),
    };
  }

  return {
    surface: 'tracker_a',
    title: 'Linear',
    async connect(opts = {}) {
      const got = await appOf(opts.evenDisabled === true);
      if (typeof got === 'string') return got;
      const { app, self } = got;
      const conn: TrackerConnection = {
        async intentOf(delivery) {
          const me = await self();
          const intent = linearIntentOf(delivery, { id: me.id, names: [me.name, 'crewhouse'] });
          if (intent.kind !== 'needs_issue') return intent;
          const issue = await app.issue(intent.issueId);
          const task: TaskIntent = { kind: 'task', issue: { id: issue.id, key: issue.identifier, url: issue.url, title: issue.title, text: [issue.description ?? '', `${intent.comment.by.name} asked: ${intent.comment.text}`].filter(Boolean).join('\n\n') }, session: null, by: intent.comment.by };
          return { kind: 'reply', issueId: issue.id, session: null, text: intent.comment.text, by: intent.comment.by, addressed: intent.addressed, orTask: intent.addressed ? task : null };
        },
        async scopesOf(issue) {
          const full = await app.issue(issue.id);
          return [full.teamKey, full.teamId, ...(full.projectId ? [full.projectId] : [])];
        },
        async post(work, key, note, ctx) {
          if (work.session_id) await app.activity(work.session_id, key, activityOf(note, ctx));
          else await app.comment(work.issue_id, key, commentOf(note, ctx, work));
        },
        async answer(place, key, note) {
          if (place.session_id) await app.activity(place.session_id, key, answerOf(note, true));
          else await app.comment(place.issue_id, key, answerOf(note, false).body);
        },
        async check() {
          try {
            const me = await app.viewer();
            return { state: 'ok', detail: `signed in to Linear as the app ${me.name} (user ${me.id})` };
          } catch (err) {
            // The client's calls fail with a TrackerError; anything else is said in words, not quoted.
            return { state: 'error', detail: (err instanceof TrackerError ? err : transportReason(err, 'Linear', 'reading who the app is')).message };
          }
        },
        findLink: (externalId) => app.findTeamOrProject(externalId),
      };
      return conn;
    },
  };
}
