/**
 * What a verified code-host delivery means (the rule is in events.ts): a labelled issue becomes
 * a task of the team linked to its repository, an addressed comment answers the run's open
 * question or is a follow-up, a closed pull request is recorded on its run. Each delivery is
 * settled through the webhooks' shared bookkeeping, once.
 */
import { systemActor } from '../../audit/audit.ts';
import type { RunJournal } from '../../console/runs/runs.journal.ts';
import type { RunsService } from '../../console/runs/runs.service.ts';
import type { Db } from '../../db/database.ts';
import { Problem } from '../../errors/problems.ts';
import { settleDelivery } from '../webhooks/webhooks.store.ts';
import type { Surface } from '../surface.ts';
import type { CodeHostApp } from './app.ts';
import * as store from './code_host.store.ts';
import { intentOf, taskTextOf, type CodeHostIntent } from './events.ts';

export interface CodeHostInboundDeps {
  db: Db;
  runs: Pick<RunsService, 'createRun' | 'get' | 'reply'>;
  /** What a pull request's state changes in a run: its delivery and a notice. */
  journal: Pick<RunJournal, 'setPullRequest' | 'notice'>;
  /** The code-host app while the integration is enabled, else null. */
  codeHost(): Promise<CodeHostApp | null>;
  /** The live teams whose repository `<owner>/<repo>` is (a code_host link, or a repo_url that is one of `urls`). */
  teamsOfRepository(repo: string, urls: string[]): Promise<string[]>;
}

/** The code host's way of taking work in (its `Surface.takeIn`). */
export function createCodeHostInbound(deps: CodeHostInboundDeps): Pick<Surface, 'takeIn'> {
  const { db, runs } = deps;

  /** Settles a delivery whose work was a problem a retry cannot mend (the team cannot take work, say). */
  const refusedBy = (err: unknown) => err instanceof Problem && err.status >= 400 && err.status < 500 && err.status !== 429;

  async function task(deliveryRow: string, intent: Extract<CodeHostIntent, { kind: 'task' }>) {
    const teams = await deps.teamsOfRepository(intent.repo, intent.repo_urls);
    let team: string;
    if (intent.team) {
      if (!teams.includes(intent.team)) return settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: `team "${intent.team}" has no link to ${intent.repo}` });
      team = intent.team;
    } else if (teams.length === 1) {
      team = teams[0];
    } else {
      const why = teams.length === 0 ? `no team is linked to ${intent.repo}` : `${intent.repo} is linked to ${teams.length} teams (${teams.join(', ')}): label the issue crewhouse:<team>`;
      return settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: why });
    }
    const claim = `pending:${deliveryRow}`;
    const got = await store.claimIssue(db, claim, team, intent.repo, intent.issue);
    if (!got.claimed) {
      // The claim of a delivery that died half-way is this one's own to finish; another's means the issue is taken.
      if (got.run_id !== claim) {
        const run = got.run_id.startsWith('pending:') ? null : got.run_id;
        return settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: `issue #${intent.issue} is already work of team "${team}"`, run_id: run });
      }
    }
    let accepted;
    try {
      accepted = await runs.createRun(systemActor(`code_host:${intent.author}`), { team, text: taskTextOf(intent), surface: 'code_host' }, (trx, runId) => store.settleClaim(trx, claim, runId));
    } catch (err) {
      await store.dropClaim(db, claim);
      if (!refusedBy(err)) throw err;
      return settleDelivery(db, deliveryRow, { outcome: 'refused', detail: (err as Problem).detail });
    }
    await settleDelivery(db, deliveryRow, { outcome: 'processed', detail: `issue #${intent.issue} became a task of team "${team}"`, run_id: accepted.run_id });
  }

  async function comment(deliveryRow: string, intent: Extract<CodeHostIntent, { kind: 'comment' }>) {
    const work = await store.workOfNumber(db, intent.repo, intent.number);
    if (!work) return settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: `#${intent.number} of ${intent.repo} is not the issue or pull request of a run` });
    const { run } = await runs.get(work.run_id);
    const question = run.open_question;
    const what = question ? `answered question ${question.seq}` : 'became a follow-up task';
    try {
      // Settled with the reply: a job run again after the reply committed (a worker killed) finds the delivery done.
      await runs.reply(systemActor(`code_host:${intent.author}`), run.id, { text: intent.text, in_reply_to: question ? question.seq : null }, (trx) =>
        settleDelivery(trx, deliveryRow, { outcome: 'processed', detail: `the comment on #${intent.number} ${what} of run ${run.id}`, run_id: run.id }),
      );
    } catch (err) {
      if (!refusedBy(err)) throw err;
      return settleDelivery(db, deliveryRow, { outcome: 'refused', detail: (err as Problem).detail, run_id: run.id });
    }
  }

  async function pullClosed(deliveryRow: string, intent: Extract<CodeHostIntent, { kind: 'pull_closed' }>) {
    const work = await store.workOfNumber(db, intent.repo, intent.number);
    if (!work || work.pull_number !== intent.number) return settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: `pull request #${intent.number} of ${intent.repo} was not opened by a run` });
    const state = intent.merged ? 'merged' : 'closed';
    await deps.journal.setPullRequest(work.run_id, { url: work.pull_url ?? intent.url, number: intent.number, state });
    await deps.journal.notice(work.run_id, `pull request #${intent.number} was ${state}`, `code_host:pull:${intent.number}:${state}`, { pull_request: intent.number, state });
    await settleDelivery(db, deliveryRow, { outcome: 'processed', detail: `pull request #${intent.number} ${state}`, run_id: work.run_id });
  }

  return {
    async takeIn(deliveryRow, d) {
      const intent = intentOf(d.event, d.payload);
      if (intent.kind === 'ignore') return settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: intent.reason });
      const app = await deps.codeHost();
      if (!app) return settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: 'the code_host integration is not enabled' });
      if (intent.kind === 'task') return task(deliveryRow, intent);
      if (intent.kind === 'comment') return comment(deliveryRow, intent);
      return pullClosed(deliveryRow, intent);
    },
  };
}
