import crypto from 'node:crypto';
import { clip, obj, str } from '../tracker/payload.ts';
import type { MessageNote, ProgressContext, ProgressNote, TrackerConnection, TrackerIntent, TrackerIssue, TrackerKind, TrackerPerson } from '../tracker/kind.ts';
import { retryAdvice } from '../surface.ts';
import { adf, textOfAdf, type AdfDoc, type Inline } from './adf.ts';
import type { JiraAgent, JiraConfig } from './client.ts';

/**
 * tracker_b: Jira Cloud. Work comes in as an issue assigned to the agent's account
 * (`jira:issue_updated` with an assignee change to it, or `jira:issue_created` assigned to it)
 * in a linked project, or a comment mentioning the account; a comment on the issue of a run
 * answers its open question, and one mentioning the account later is a follow-up. Progress goes
 * out as comments in Atlassian Document Format; a succeeded run optionally moves the issue
 * through the transition named in `done_transition`.
 */

/** jira.js is loaded on first use: a deployment without Jira never holds it in memory. */
const clientModule = () => import('./client.ts');

export interface TrackerBSettings {
  enabled: boolean;
  config: Omit<JiraConfig, 'clientSecret'> | null;
  siteUrl: string | null;
  doneTransition: string | null;
}

/** Jira sends rich text as wiki markup (webhooks) or as ADF (REST v3): plain text either way. */
const textOf = (v: unknown): string => (typeof v === 'string' ? v : v && typeof v === 'object' ? textOfAdf(v) : '');

function personOf(v: unknown): TrackerPerson | null {
  const p = obj(v);
  const id = str(p.accountId);
  return id ? { id, name: str(p.displayName) ?? id } : null;
}

/** The pure rule: what a Jira event means for the agent `accountId`. Exported for its test. */
export function jiraIntentOf(delivery: { event: string; payload: unknown }, accountId: string, siteUrl: string | null): TrackerIntent {
  const p = obj(delivery.payload);
  const i = obj(p.issue);
  const fields = obj(i.fields);
  const id = str(i.id);
  const key = str(i.key);
  if (!id || !key) return { kind: 'ignore', reason: `${delivery.event} carries no issue` };
  const mention = new RegExp(`\\[~accountid:${accountId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\][:,]?`, 'gi');
  const issueWith = (extra: string): TrackerIssue => ({ id, key, url: siteUrl ? `${siteUrl}/browse/${key}` : null, title: str(fields.summary) ?? key, text: [textOf(fields.description).replace(mention, '').trim(), extra].filter(Boolean).join('\n\n') });
  const user = personOf(p.user);
  if (delivery.event === 'jira:issue_updated' || delivery.event === 'jira:issue_created') {
    const items = Array.isArray(obj(p.changelog).items) ? (obj(p.changelog).items as unknown[]).map(obj) : [];
    const assigned = delivery.event === 'jira:issue_created' ? personOf(fields.assignee)?.id === accountId : items.some((x) => x.field === 'assignee' && x.to === accountId);
    // Unassigned from the agent by a person (to someone else or to nobody): the work stops.
    const unassigned = delivery.event === 'jira:issue_updated' && items.some((x) => x.field === 'assignee' && x.from === accountId && x.to !== accountId);
    if (unassigned && user?.id !== accountId) return { kind: 'stop', issueId: id, session: null, by: user ?? { id: 'unknown', name: 'someone' }, how: 'unassigned the agent' };
    if (!assigned) return { kind: 'ignore', reason: 'an issue change other than its assignment to the agent' };
    if (user?.id === accountId) return { kind: 'ignore', reason: 'the agent assigned the issue itself' };
    // The reporter is who the work is for: a question mentions them.
    return { kind: 'task', issue: issueWith(''), session: null, by: personOf(fields.reporter) ?? user ?? { id: 'unknown', name: 'someone' } };
  }
  if (delivery.event === 'comment_created') {
    const c = obj(p.comment);
    const by = personOf(c.author) ?? user;
    if (!by) return { kind: 'ignore', reason: 'the comment has no author' };
    if (by.id === accountId) return { kind: 'ignore', reason: 'a comment written by the agent itself' };
    const body = textOf(c.body);
    // ADF bodies mention with a node whose id is the account; wiki bodies with [~accountid:<id>].
    const addressed = new RegExp(mention.source, 'i').test(body) || JSON.stringify(c.body ?? '').includes(`"id":"${accountId}"`);
    const text = body.replace(mention, '').replace(/[ \t]{2,}/g, ' ').trim();
    if (!text) return { kind: 'ignore', reason: 'the comment has no text besides the mention' };
    return { kind: 'reply', issueId: id, session: null, text, by, addressed, orTask: addressed ? { kind: 'task', issue: issueWith(`${by.name} asked: ${text}`), session: null, by } : null };
  }
  const action = str(p.issue_event_type_name);
  return { kind: 'ignore', reason: `${delivery.event}${action ? ` (${action})` : ''} is not work for the agent` };
}

/** What a person on the issue can expect next, after the team took up work. */
const REPORTS_BACK = 'The team comments here when it finishes or has a question.';

/** A note as an ADF comment, saying what to do next: a question mentions the person who asked for the work. */
export function commentOf(note: ProgressNote, ctx: ProgressContext, asker: { id: string | null; name: string | null }): AdfDoc {
  const run: Inline = { link: ctx.runUrl, text: `run ${ctx.runId}` };
  const team: Inline = { strong: ctx.team };
  switch (note.kind) {
    case 'started':
      return adf(['Team ', team, ' is on it: ', run, '.'], [REPORTS_BACK]);
    case 'resumed':
      return adf(note.by ? ['Team ', team, ` resumed work on ${note.by}'s follow-up: `, run, '.'] : ['Team ', team, ` resumed work on a follow-up given in ${note.where}: `, run, '.'], [REPORTS_BACK]);
    case 'question':
      return adf(
        [...(asker.id ? [{ mention: asker.id, name: asker.name ?? 'reporter' } as Inline, ' '] : []), `${note.role} of team `, team, ' asks:'],
        [clip(note.text, 4000)],
        [note.confirmation ? 'Answer with a comment on this issue: approve or refuse. ' : 'Answer with a comment on this issue. ', run],
      );
    case 'delivered':
      return adf(
        ['Team ', team, ' finished.'],
        ...(note.summary ? [[clip(note.summary, 4000)]] : []),
        note.pullUrl ? ['Pull request: ', { link: note.pullUrl }, ' (review and merge it there).'] : note.branch ? ['Branch ', { strong: note.branch }, ' was pushed.'] : ['Nothing was pushed.'],
        [run, '. For changes, comment on this issue mentioning the agent with what to change.'],
      );
    case 'failed':
      return adf(['Team ', team, ` could not finish: ${note.reason}. `, run, '.'], [note.cause ? retryAdvice(note.cause, 'comment on this issue mentioning the agent') : 'To have it try again, comment on this issue mentioning the agent with what to do differently.']);
    case 'cancelled':
      return adf(['The run was cancelled, and the team stopped working on it. ', run, '.'], ['For new work, assign the agent a new issue.']);
  }
}

/** What a person's message that was not taken as it came is told, as a comment mentioning them. */
export function answerOf(note: MessageNote): AdfDoc {
  const them: Inline[] = [{ mention: note.by.id, name: note.by.name }, ' '];
  const theirs = note.what === 'task' ? 'this issue' : `your ${note.what}`;
  if (note.kind === 'deferred') {
    const taken = note.what === 'task' ? `the team takes this issue at ${note.at}` : `your follow-up is taken at ${note.at}`;
    return adf([...them, 'Team ', { strong: note.team }, ` has spent its daily budget, so ${taken}, when the budget is whole again.`], ['Nothing more to do: the team comments here then.']);
  }
  return adf([...them, `Crewhouse could not take ${theirs}: ${note.reason.replace(/\.$/, '')}.`], [note.what === 'task' ? 'Assign the agent again once that is mended.' : 'For new work, assign the agent a new issue.']);
}

export function trackerBKind(deps: { settings(): Promise<TrackerBSettings>; reveal(name: string): Promise<string | null>; now?: () => number }): TrackerKind {
  let cached: { key: string; agent: JiraAgent } | null = null;

  return {
    surface: 'tracker_b',
    title: 'Jira',
    async connect(opts = {}) {
      const s = await deps.settings();
      if (!s.enabled && !opts.evenDisabled) return 'the tracker_b integration is not enabled';
      if (!s.config) return 'tracker_b is not configured: the settings client_id, cloud_id and account_id are needed';
      const secret = await deps.reveal('integrations/tracker_b/client_secret');
      if (!secret) return 'tracker_b is not configured: the secret integrations/tracker_b/client_secret has no value';
      const config: JiraConfig = { ...s.config, clientSecret: secret };
      // One agent per settings and secret: its token is cached with it.
      const key = crypto.createHash('sha256').update(JSON.stringify(config)).digest('hex');
      if (cached?.key !== key) {
        const { createJiraAgent } = await clientModule();
        cached = { key, agent: createJiraAgent(config, { now: deps.now }) };
      }
      const agent = cached.agent;
      const conn: TrackerConnection = {
        intentOf: async (delivery) => jiraIntentOf(delivery, config.accountId, s.siteUrl),
        async scopesOf(issue, payload) {
          const project = str(obj(obj(obj(obj(payload).issue).fields).project).key);
          return [project ?? (await agent.issue(issue.key)).projectKey];
        },
        async post(work, key, note, ctx) {
          await agent.comment(work.issue_key, key, commentOf(note, ctx, { id: work.requested_by, name: work.requested_by_name }));
        },
        async answer(place, key, note) {
          await agent.comment(place.issue_key, key, answerOf(note));
        },
        succeeded: s.doneTransition
          ? async (work) => {
              await agent.transition(work.issue_key, s.doneTransition!);
            }
          : undefined,
        check: () => agent.check(),
        findLink: (externalId) => agent.findProject(externalId),
      };
      return conn;
    },
  };
}
