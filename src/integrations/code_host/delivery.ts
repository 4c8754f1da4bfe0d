/**
 * What runs send back to the code host: progress comments on the issue a run came from, and the
 * pull request of a run that succeeded with a pushed branch (also when the agent asks for it
 * with `open_pull_request`). Every effect is a job, and each is idempotent: the app answers the
 * open pull request of a head again, and a posted comment carries its key.
 */
import type { Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { RunJournal } from '../../console/runs/runs.journal.ts';
import type { RunsService } from '../../console/runs/runs.service.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import type { RunChange } from '../../hooks.ts';
import type { CodeHostApp } from './app.ts';
import { failureCauseOf, followUpGivenIn, postKey, retryAdvice, type RunProgress } from '../surface.ts';
import * as store from './code_host.store.ts';
import { deliverRunJob } from './deliver-run.job.ts';
import { issueOfTaskText } from './events.ts';
import { postProgressJob } from './post-progress.job.ts';

type Run = Awaited<ReturnType<RunsService['get']>>['run'];
type Post = Awaited<ReturnType<RunsService['posts']>>['items'][number];

export interface CodeHostDeliveryDeps {
  db: Db;
  runs: RunsService;
  /** Where the pull request a run opened is recorded (the run's delivery). */
  journal: Pick<RunJournal, 'setPullRequest'>;
  codeHost(): Promise<CodeHostApp | null>;
  /** The team's code-host repository `<owner>/<repo>` (its code_host link, else its repo_url on the code host), or null. */
  repositoryOfTeam(team: string): Promise<string | null>;
  /** What the gateway refused the team's sandboxes between two times, one line each. */
  refusedEgress(team: string, since: string, until: string | null): Promise<string[]>;
  publicBaseUrl: string;
  logger: Logger;
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** The pull request's title and body, from the run: its summary, what changed, how it was checked, refused egress, a link. */
export function pullRequestText(run: Run, posts: Post[], runUrl: string, refusedEgress: string[] = []): { title: string; body: string } {
  const first = run.text.split('\n')[0].replace(/^Issue #\d+ of \S+: /, '').trim();
  const title = clip(first || `Work of run ${run.id}`, 120);
  const completed = [...posts].reverse().find((p) => p.kind === 'completed');
  const summary = completed?.text ?? 'The team finished the task.';
  const pushes = posts.filter((p) => p.kind === 'artifact').map((p) => `- ${p.text} (${p.role ?? 'team'})`);
  const handoffs = posts.filter((p) => p.kind === 'task' && p.data && (p.data as { from?: string }).from && (p.data as { from?: string }).from !== 'person').map((p) => `- ${p.role ?? 'team'}: ${clip(p.text.split('\n')[0], 200)}`);
  const checks = posts
    .filter((p) => p.kind === 'working' && (p.data as { tool?: string })?.tool && ['shell', 'run_command', 'exec'].includes(String((p.data as { tool?: string }).tool)))
    .map((p) => `- ${clip(p.text, 200)}`);
  // The gateway's own record of the run's time (the run's refusal notices say the same, once each).
  const refused = refusedEgress.map((line) => `- ${clip(line, 200)}`);
  const issue = issueOfTaskText(run.text);
  const body = [
    summary,
    issue ? `\nCloses #${issue.number}` : '',
    '\n### What changed',
    pushes.length ? pushes.join('\n') : `- branch \`${run.delivery?.branch ?? '?'}\``,
    '\n### How it was checked',
    [...handoffs, ...checks].slice(0, 20).join('\n') || '- no checks were recorded in the run',
    refused.length ? `\n### Refused egress\n${refused.slice(0, 20).join('\n')}` : '',
    `\n---\nRun [${run.id}](${runUrl}) of team \`${run.team}\`.`,
  ]
    .filter(Boolean)
    .join('\n');
  return { title, body: clip(body, 60_000) };
}

export function createCodeHostDelivery(deps: CodeHostDeliveryDeps) {
  const { db, runs, logger } = deps;
  const runUrl = (id: string) => `${deps.publicBaseUrl.replace(/\/+$/, '')}/#/runs/${id}`;

  async function repositoryOf(run: Run): Promise<string | null> {
    const work = await store.workOfRun(db, run.id);
    return work?.repository ?? (await deps.repositoryOfTeam(run.team));
  }

  /**
   * Posts a comment on the run's issue once per key: the key rides in the comment as an HTML
   * comment, so a job run again after posting (a lost lease) finds it on the issue.
   */
  async function post(app: CodeHostApp, runId: string, key: string, body: string): Promise<void> {
    const work = await store.workOfRun(db, runId);
    if (!work || work.issue_number === null) return;
    const marker = `<!-- crewhouse:${key} -->`;
    const bot = await app.botLogin();
    const existing = await app.issueComments({ repo: work.repository, number: work.issue_number });
    if (existing.some((c) => c.author === bot && c.body.includes(marker))) return;
    await app.comment({ repo: work.repository, issue: work.issue_number, body: `${body}\n\n${marker}` });
  }

  /** Opens (or finds again) the run's pull request and records it on the run and here. */
  async function open(app: CodeHostApp, run: Run, repo: string, req: { head: string; base: string | null; title: string; body: string }) {
    const pr = await app.openPullRequest({ repo, head: req.head, ...(req.base ? { base: req.base } : {}), title: req.title, body: req.body });
    await deps.journal.setPullRequest(run.id, { url: pr.url, number: pr.number, state: 'open' });
    await store.setPull(db, { run_id: run.id, team_name: run.team, repository: repo, pull_number: pr.number, pull_url: pr.url });
    return pr;
  }

  async function allPosts(runId: string): Promise<Post[]> {
    const out: Post[] = [];
    let after = 0;
    for (let page = 0; page < 50; page++) {
      const got = await runs.posts(runId, after, 200);
      out.push(...got.items);
      if (!got.next_cursor) break;
      after = Number(got.next_cursor);
    }
    return out;
  }

  return {
    /** The reaction to a run's change, inside its transaction: the jobs that tell the code host. */
    async onRunChanged(trx: Transaction<Database>, change: RunChange): Promise<void> {
      if (change.event === 'finished' && change.state === 'succeeded') {
        await deliverRunJob.enqueue(trx, { run_id: change.run_id, seq: change.seq }, { key: `${deliverRunJob.kind}:${change.run_id}:${change.seq}` });
        return;
      }
      const work = await store.workOfRun(trx, change.run_id);
      if (!work || work.issue_number === null) return;
      await postProgressJob.enqueue(trx, { run_id: change.run_id, event: change.event, seq: change.seq }, { key: `${postProgressJob.kind}:${change.run_id}:${change.event}:${change.seq}` });
    },

    /** The job: a progress comment on the run's issue. */
    async progress(runId: string, event: RunProgress, seq: number): Promise<void> {
      const app = await deps.codeHost();
      if (!app) return;
      const { run } = await runs.get(runId);
      // The post at the change: the follow-up that resumed the run, or the failed post with its cause.
      const atSeq = event === 'resumed' || event === 'finished' ? (await runs.posts(runId, seq - 1, 1)).items[0] : undefined;
      const body = progressText(run, event, seq, atSeq, runUrl(run.id));
      if (body !== null) await post(app, runId, postKey(runId, event, seq), body);
    },

    /** The job: a succeeded run with a pushed branch gets its pull request; the issue is told. */
    async deliver(runId: string, seq: number): Promise<void> {
      const app = await deps.codeHost();
      if (!app) return;
      let { run } = await runs.get(runId);
      if (run.state !== 'succeeded') return;
      const repo = await repositoryOf(run);
      if (!repo) return;
      if (run.delivery?.branch && !run.delivery.pull_request) {
        const refused = await deps.refusedEgress(run.team, run.created_at, run.finished_at);
        const text = pullRequestText(run, await allPosts(runId), runUrl(runId), refused);
        await open(app, run, repo, { head: run.delivery.branch, base: null, ...text });
        ({ run } = await runs.get(runId));
      }
      const body = progressText(run, 'finished', seq, undefined, runUrl(run.id));
      if (body !== null) await post(app, runId, postKey(runId, 'finished', seq), body);
    },

    /**
     * The gateway's `code_host_installation_token` for a team's sandbox: a fresh installation
     * token narrowed to the team's repository (the app renews it before it expires).
     */
    async tokenForTeam(team: string): Promise<{ ok: true; token: string } | { ok: false; reason: string }> {
      const app = await deps.codeHost();
      if (!app) return { ok: false, reason: 'the code-host integration is not set up (not enabled): no installation token can be minted for this destination' };
      const repo = await deps.repositoryOfTeam(team);
      if (!repo) return { ok: false, reason: `team "${team}" has no repository on the code host (a code_host link or a repo_url there)` };
      try {
        return { ok: true, token: (await app.installationToken({ repositories: [repo] })).token };
      } catch (err) {
        logger.warn({ err, team, repo }, 'minting an installation token failed');
        return { ok: false, reason: `the code host did not mint a token for ${repo}: ${codeHostReason(err)}` };
      }
    },

    /**
     * The engine's `open_pull_request`: opens the run's pull request through the app. The answer
     * tells the agent what happened (a refusal is a tool error it can act on).
     */
    async openFor(runId: string, req: { title: string; body: string; head: string | null; base: string | null }): Promise<{ ok: true; url: string; number: number } | { ok: false; reason: string }> {
      const app = await deps.codeHost();
      if (!app) return { ok: false, reason: 'no code-host integration is enabled, so no pull request can be opened; push the branch and finish naming it' };
      const { run } = await runs.get(runId);
      const repo = await repositoryOf(run);
      if (!repo) return { ok: false, reason: `team "${run.team}" has no repository on the code host (a code_host link or a repo_url there)` };
      const head = req.head ?? run.delivery?.branch ?? null;
      if (!head) return { ok: false, reason: 'no branch was pushed yet: push the branch first, then open the pull request' };
      try {
        const pr = await open(app, run, repo, { head, base: req.base, title: req.title, body: `${req.body}\n\n---\nRun [${run.id}](${runUrl(run.id)}) of team \`${run.team}\`.` });
        return { ok: true, url: pr.url, number: pr.number };
      } catch (err) {
        logger.warn({ err, run: runId, repo }, 'opening the pull request failed');
        return { ok: false, reason: `the code host refused the pull request: ${codeHostReason(err)}` };
      }
    },
  };
}

export type CodeHostDelivery = ReturnType<typeof createCodeHostDelivery>;

/** What a person on the issue can expect next, after the team took up work. */
const REPORTS_BACK = 'The team comments here when it finishes or has a question.';

/**
 * What the run's issue is told of a change, saying what to do next there (or null when there is
 * nothing, anymore, to say): `atSeq` is the post at `seq` (the follow-up for `resumed`, the
 * failed post for a failed run's `finished`, whose cause chooses the advice). A follow-up is quoted
 * with its author when it was a comment on the code host (it is public there already), else
 * named by where it was given (the console, the team's chat room), not quoted.
 */
export function progressText(run: Run, event: RunProgress, seq: number, atSeq: Post | undefined, runUrl: string): string | null {
  const link = `[Run ${run.id}](${runUrl})`;
  if (event === 'started') return `Team \`${run.team}\` is on it: [run ${run.id}](${runUrl}). ${REPORTS_BACK}`;
  if (event === 'resumed') {
    if (!atSeq || atSeq.seq !== seq || atSeq.kind !== 'reply') return null;
    const by = typeof atSeq.data?.by === 'string' ? atSeq.data.by : null;
    if (by?.startsWith('code_host:')) {
      // An HTML comment in the quote could pose as another comment's key marker: it is shown, not hidden.
      const quoted = clip(atSeq.text.trim(), 500).replaceAll('<!--', '&lt;!--').split('\n').join('\n> ');
      return `Team \`${run.team}\` resumed work on a follow-up from @${by.slice('code_host:'.length)}:\n\n> ${quoted}\n\n${link}. ${REPORTS_BACK}`;
    }
    return `Team \`${run.team}\` resumed work on a follow-up given in ${followUpGivenIn(by)}. ${link}. ${REPORTS_BACK}`;
  }
  if (event === 'waiting') {
    const q = run.open_question;
    if (!q || q.seq !== seq) return null;
    const how = run.waiting_for?.kind === 'confirmation' ? 'Answer with a comment `/crewhouse approve` or `/crewhouse refuse`.' : 'Answer with a comment that mentions `/crewhouse`.';
    return `Team \`${run.team}\` asks (${q.role}):\n\n> ${q.text.split('\n').join('\n> ')}\n\n${how} ${link}`;
  }
  if (run.state === 'failed') {
    const cause = atSeq?.kind === 'failed' ? failureCauseOf(atSeq.data) : null;
    const next = cause ? retryAdvice(cause, 'comment here mentioning `/crewhouse`') : 'To have it try again, comment here mentioning `/crewhouse` with what to do differently.';
    return `Team \`${run.team}\` could not finish: ${run.failure_reason ?? 'the run failed'}. ${link}. ${next}`;
  }
  if (run.state === 'cancelled') return `The run was cancelled, and the team stopped working on it. ${link}. For new work, open an issue with the label \`crewhouse\`.`;
  const pr = run.delivery?.pull_request;
  const what = pr ? `Pull request: ${pr.url} (review and merge it there).` : run.delivery?.branch ? `Branch \`${run.delivery.branch}\` was pushed.` : 'Nothing was pushed.';
  return `Team \`${run.team}\` finished. ${what} ${link}. For changes, comment here mentioning \`/crewhouse\` with what to change.`;
}

/** Why a code-host call failed, for the agent and the run's posts: the code host's own one-line reason, never a raw error of ours (that is in the log). */
function codeHostReason(err: unknown): string {
  // By name: the code-host module is loaded only when an integration is set up.
  return err instanceof Error && err.name === 'CodeHostError' ? err.message : 'the service could not complete the call (the service log has the details)';
}
