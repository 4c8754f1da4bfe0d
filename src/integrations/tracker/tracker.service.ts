import type { Transaction } from 'kysely';
import type { Logger } from 'pino';
import { systemActor } from '../../audit/audit.ts';
import type { RunsService } from '../../console/runs/runs.service.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import type { RunChange } from '../../hooks.ts';
import { integrationCheckProblem, Problem } from '../../errors/problems.ts';
import { failureCauseOf, followUpGivenIn, postKey } from '../surface.ts';
import { processDeliveryJob } from '../webhooks/process-delivery.job.ts';
import { settleDelivery } from '../webhooks/webhooks.store.ts';
import { TrackerError } from './errors.ts';
import type { MessageNote, ProgressNote, TaskIntent, TrackerConnection, TrackerIntent, TrackerKind, TrackerPerson, TrackerPlace } from './kind.ts';
import { postProgressJob } from './post-progress.job.ts';
import * as store from './tracker.store.ts';

type Run = Awaited<ReturnType<RunsService['get']>>['run'];

/** What a tracker link's check says (the `tracker:link` hook). */
export type LinkCheck = { verification: 'verified'; label: string } | { verification: 'unverified' } | { refused: string };

export interface TrackerServiceDeps {
  db: Db;
  runs: RunsService;
  kind: TrackerKind;
  publicBaseUrl: string;
  /** The live teams linked on this surface to one of the ids (a tracker team's key or id, a project). */
  teamsLinkedTo(externalIds: string[]): Promise<string[]>;
  /** Whether a succeeded run's pull request is still to be opened by the code host (its delivery job): the tracker says "delivered" once it is. */
  awaitsPullRequest(run: Run): Promise<boolean>;
  logger: Logger;
}

/** A problem of the work itself (the team cannot take it): the delivery is settled `refused`, not retried. */
const refusedBy = (err: unknown) => err instanceof Problem && err.status >= 400 && err.status < 500 && err.status !== 429;

/** A 429 that says when the work is taken again (the team's daily budget is spent): the seconds until then, or null. */
function takenLaterIn(err: unknown): number | null {
  if (!(err instanceof Problem) || err.status !== 429) return null;
  const seconds = Number(err.headers['retry-after']);
  return Number.isInteger(seconds) && seconds > 0 ? seconds : null;
}

/** A time as people on the issue read it (`00:00 UTC`): a budget's wait ends within the day. */
const inWords = (at: Date) => `${at.toISOString().slice(11, 16)} UTC`;

/**
 * One issue tracker's work in and progress out, the same for both kinds: a verified delivery
 * becomes a run of the team linked to the issue's team or project (one run per issue and team),
 * or the answer to that run's open question, or a follow-up; a run's changes are told back on
 * the issue by jobs, each post once.
 */
export function createTrackerService(deps: TrackerServiceDeps) {
  const { db, runs, kind } = deps;
  const surface = kind.surface;
  const runUrl = (id: string) => `${deps.publicBaseUrl.replace(/\/+$/, '')}/#/runs/${id}`;

  async function task(conn: TrackerConnection, row: string, intent: TaskIntent, payload: unknown): Promise<void> {
    const scopes = await conn.scopesOf(intent.issue, payload);
    const teams = await deps.teamsLinkedTo(scopes);
    if (teams.length !== 1) {
      const why = teams.length === 0 ? `no team is linked to ${scopes.join(' or ')} on ${surface}: link one with PUT /teams/{name}/links` : `${intent.issue.key} is linked to ${teams.length} teams (${teams.join(', ')}): keep one link per ${kind.title} team or project`;
      return settleDelivery(db, row, { outcome: 'ignored', detail: why });
    }
    const team = teams[0]!;
    const claim = `pending:${row}`;
    const got = await store.claimIssue(db, { claim, surface, team, issue_id: intent.issue.id, issue_key: intent.issue.key, issue_url: intent.issue.url, session_id: intent.session, requested_by: intent.by.id, requested_by_name: intent.by.name });
    if (!got.claimed && got.run_id !== claim) {
      const run = got.run_id.startsWith('pending:') ? null : got.run_id;
      // A new agent session on an issue that has a run (assigned again, mentioned): its progress goes to the newest session.
      if (run && intent.session) await store.setSession(db, run, intent.session);
      // A mention on an issue that has a run says something to that run: an answer or a follow-up.
      if (run && intent.ask) return reply(conn, row, { kind: 'reply', issueId: intent.issue.id, session: intent.session, text: intent.ask, by: intent.by, addressed: true, orTask: null }, payload);
      return settleDelivery(db, row, { outcome: 'ignored', detail: `${intent.issue.key} is already work of team "${team}"`, run_id: run });
    }
    const text = `${kind.title} ${intent.issue.key}: ${intent.issue.title}${intent.issue.url ? `\n${intent.issue.url}` : ''}\n\n${intent.issue.text}`.trim();
    let accepted;
    try {
      // The run records where it came from: the issue's address (its key where the tracker gives none).
      const ref = intent.issue.url ?? `${surface}:${intent.issue.key}`;
      accepted = await runs.createRun(systemActor(`${surface}:${intent.by.name}`), { team, text, surface, external_ref: ref, requested_by: `${surface}:${intent.by.name}` }, (trx, runId) => store.settleClaim(trx, claim, runId));
    } catch (err) {
      await store.dropClaim(db, claim);
      const place = { issue_id: intent.issue.id, issue_key: intent.issue.key, session_id: intent.session };
      const later = takenLaterIn(err);
      if (later !== null) return takeLater(conn, row, place, { what: 'task', by: intent.by, team }, later, null);
      if (!refusedBy(err)) throw err;
      return refuse(conn, row, place, { what: 'task', by: intent.by }, err as Problem, null);
    }
    await settleDelivery(db, row, { outcome: 'processed', detail: `${intent.issue.key} became a task of team "${team}"`, run_id: accepted.run_id });
  }

  async function reply(conn: TrackerConnection, row: string, intent: Extract<TrackerIntent, { kind: 'reply' }>, payload: unknown): Promise<void> {
    const work = (intent.session ? await store.workOfSession(db, surface, intent.session) : undefined) ?? (await store.workOfIssue(db, surface, intent.issueId));
    if (!work) {
      if (intent.orTask) return task(conn, row, intent.orTask, payload);
      return settleDelivery(db, row, { outcome: 'ignored', detail: `the issue is not the work of a run` });
    }
    const { run } = await runs.get(work.run_id);
    const question = run.open_question;
    if (!question && !intent.addressed) return settleDelivery(db, row, { outcome: 'ignored', detail: `a comment on ${work.issue_key} that does not address the agent, while run ${run.id} asks nothing`, run_id: run.id });
    const what = question ? `answered question ${question.seq}` : 'became a follow-up task';
    try {
      // Settled with the reply: a job run again after the reply committed finds the delivery done.
      await runs.reply(systemActor(`${surface}:${intent.by.name}`), run.id, { text: intent.text, in_reply_to: question ? question.seq : null }, (trx) =>
        settleDelivery(trx, row, { outcome: 'processed', detail: `${intent.by.name} on ${work.issue_key} ${what} of run ${run.id}`, run_id: run.id }),
      );
    } catch (err) {
      // Said where the person wrote: in the session of a prompt, else on the issue.
      const place = { issue_id: work.issue_id, issue_key: work.issue_key, session_id: intent.session };
      const later = question ? null : takenLaterIn(err);
      if (later !== null) return takeLater(conn, row, place, { what: 'follow-up', by: intent.by, team: run.team }, later, run.id);
      if (!refusedBy(err)) throw err;
      return refuse(conn, row, place, { what: question ? 'answer' : 'follow-up', by: intent.by }, err as Problem, run.id);
    }
  }

  /**
   * Says on the issue a person wrote on (or in the session) that their message was refused, and
   * why in words, then settles the delivery `refused`: told before settling, so a job run again
   * after a failed post tells it then (once per delivery: the post's key is the delivery's).
   */
  async function refuse(conn: TrackerConnection, row: string, place: TrackerPlace, m: { what: 'task' | 'follow-up' | 'answer'; by: TrackerPerson }, err: Problem, runId: string | null): Promise<void> {
    const told = await answer(conn, place, `${surface}:refused:${row}`, { kind: 'refused', ...m, reason: err.detail });
    await settleDelivery(db, row, { outcome: 'refused', detail: told ? err.detail : `${err.detail} (not said on ${kind.title}: it refused the post; the service log has the details)`, run_id: runId });
  }

  /**
   * The team's daily budget is spent: the message is taken when it is whole again (the
   * delivery's job again, scheduled for then: it finds the delivery still to do), and the
   * issue says when. Once per delivery and day: a job run again schedules the same job and
   * makes the same post.
   */
  async function takeLater(conn: TrackerConnection, row: string, place: TrackerPlace, m: { what: 'task' | 'follow-up'; by: TrackerPerson; team: string }, seconds: number, runId: string | null): Promise<void> {
    const at = new Date(Date.now() + seconds * 1000);
    const day = at.toISOString().slice(0, 10);
    await db.transaction().execute(async (trx) => {
      await settleDelivery(trx, row, { outcome: 'accepted', detail: `team "${m.team}" has spent its daily budget: the ${m.what} is taken at ${at.toISOString()}`, run_id: runId });
      await processDeliveryJob.enqueue(trx, { delivery: row }, { key: `webhook:${surface}:later:${row}:${day}`, runAt: at });
    });
    await answer(conn, place, `${surface}:later:${row}:${day}`, { kind: 'deferred', ...m, at: inWords(at) });
  }

  /** Posts an answer to a person's message: false when the tracker refused it for good (logged: the delivery's outcome stands). */
  async function answer(conn: TrackerConnection, place: TrackerPlace, key: string, note: MessageNote): Promise<boolean> {
    try {
      await conn.answer(place, key, note);
      return true;
    } catch (err) {
      if (!(err instanceof TrackerError) || err.transient) throw err;
      deps.logger.warn({ surface, issue: place.issue_key, reason: err.message }, 'the answer to a message could not be posted on the issue');
      return false;
    }
  }

  /** A person told the agent to stop (Linear's stop request, unassigning it): the issue's open run is cancelled, once. */
  async function stop(row: string, intent: Extract<TrackerIntent, { kind: 'stop' }>): Promise<void> {
    const work = (intent.session ? await store.workOfSession(db, surface, intent.session) : undefined) ?? (await store.workOfIssue(db, surface, intent.issueId));
    if (!work) return settleDelivery(db, row, { outcome: 'ignored', detail: `${intent.by.name} ${intent.how}, and the issue is not the work of a run` });
    const { run } = await runs.get(work.run_id);
    if (run.state !== 'running' && run.state !== 'waiting') return settleDelivery(db, row, { outcome: 'ignored', detail: `${intent.by.name} ${intent.how} on ${work.issue_key}, whose run ${run.id} is already ${run.state}`, run_id: run.id });
    try {
      // Settled with the cancel: a job run again after it committed finds the delivery done.
      await runs.cancel(systemActor(`${surface}:${intent.by.name}`), run.id, surface, (trx) => settleDelivery(trx, row, { outcome: 'processed', detail: `${intent.by.name} ${intent.how} on ${work.issue_key}: run ${run.id} is cancelled`, run_id: run.id }));
    } catch (err) {
      if (!refusedBy(err)) throw err;
      return settleDelivery(db, row, { outcome: 'refused', detail: (err as Problem).detail, run_id: run.id });
    }
  }

  /** What the run's change tells the issue, or null when there is nothing (anymore) to say. */
  async function noteOf(run: Run, event: RunChange['event'], seq: number): Promise<ProgressNote | null> {
    if (event === 'started') return { kind: 'started' };
    if (event === 'resumed') {
      const followUp = (await runs.posts(run.id, seq - 1, 1)).items[0];
      if (!followUp || followUp.seq !== seq || followUp.kind !== 'reply') return null;
      const by = typeof followUp.data?.by === 'string' ? followUp.data.by : null;
      // A follow-up written on the tracker is quoted there already; one from the console or the team's chat room (a chat actor: `chat_a:@alice`) is not quoted.
      if (by?.startsWith(`${surface}:`)) return { kind: 'resumed', text: followUp.text, by: by.slice(surface.length + 1), where: kind.title };
      return { kind: 'resumed', text: '', by: null, where: followUpGivenIn(by) };
    }
    if (event === 'waiting') {
      const q = run.open_question;
      if (!q || q.seq !== seq) return null;
      return { kind: 'question', role: q.role, text: q.text, confirmation: run.waiting_for?.kind === 'confirmation' };
    }
    if (run.state === 'failed') {
      const failed = (await runs.posts(run.id, Math.max(0, seq - 1), 1)).items[0];
      return { kind: 'failed', reason: run.failure_reason ?? 'the run failed', cause: failed?.kind === 'failed' ? failureCauseOf(failed.data) : null };
    }
    if (run.state === 'cancelled') return { kind: 'cancelled' };
    const completed = (await runs.posts(run.id, Math.max(0, seq - 1), 1)).items[0];
    return { kind: 'delivered', summary: completed?.kind === 'completed' ? completed.text : null, pullUrl: run.delivery?.pull_request?.url ?? null, branch: run.delivery?.branch ?? null };
  }

  /** A surface adapter (src/integrations/surface.ts), with what the trackers offer besides: the connection test and a link's check. */
  const service = {
    surface,

    kind: surface,

    /** Takes work in (the job `webhooks.process-delivery` for this surface): what a verified delivery means, done once, settling its row. */
    async takeIn(row: string, delivery: { event: string; payload: unknown }): Promise<void> {
      const conn = await kind.connect();
      if (typeof conn === 'string') return settleDelivery(db, row, { outcome: 'ignored', detail: conn });
      let intent: TrackerIntent;
      try {
        intent = await conn.intentOf(delivery);
      } catch (err) {
        // The tracker refused to show what the event is about (an issue the agent cannot see): nothing to do.
        if (err instanceof TrackerError && !err.transient) return settleDelivery(db, row, { outcome: 'ignored', detail: err.message });
        throw err;
      }
      if (intent.kind === 'ignore') return settleDelivery(db, row, { outcome: 'ignored', detail: intent.reason });
      if (intent.kind === 'task') return task(conn, row, intent, delivery.payload);
      if (intent.kind === 'stop') return stop(row, intent);
      return reply(conn, row, intent, delivery.payload);
    },

    /** The reaction to a run's change, inside its transaction: a job tells the issue it came from. */
    async onRunChanged(trx: Transaction<Database>, change: RunChange): Promise<void> {
      const work = await store.workOfRun(trx, change.run_id);
      if (!work || work.surface !== surface) return;
      await postProgressJob.enqueue(trx, { surface, run_id: change.run_id, event: change.event, seq: change.seq }, { key: `${surface}.post-progress:${postKey(change.run_id, change.event, change.seq)}` });
    },

    /**
     * The job: one note on the run's issue, once per run, change and post. A succeeded run's
     * waits (the job is retried) while the code host is still to open its pull request, except on
     * the `lastAttempt`.
     */
    async progress(runId: string, event: RunChange['event'], seq: number, opts: { lastAttempt?: boolean } = {}): Promise<void> {
      const work = await store.workOfRun(db, runId);
      if (!work) return;
      const conn = await kind.connect();
      if (typeof conn === 'string') return;
      const { run } = await runs.get(runId);
      if (event === 'finished' && run.state === 'succeeded' && !opts.lastAttempt && (await deps.awaitsPullRequest(run))) {
        throw new Error(`run ${runId} succeeded and its pull request is not opened yet: ${kind.title} is told once it is`);
      }
      const note = await noteOf(run, event, seq);
      if (!note) return;
      await conn.post(work, postKey(runId, event, seq), note, { team: run.team, runId, runUrl: runUrl(runId) });
      if (note.kind === 'delivered' && conn.succeeded) await conn.succeeded(work);
    },

    /** `POST /integrations/{kind}/test`: a real call with the stored settings (enabled or not). */
    async test(): Promise<{ state: 'ok' | 'error'; detail: string }> {
      const conn = await kind.connect({ evenDisabled: true });
      if (typeof conn === 'string') return { state: 'error', detail: conn };
      return conn.check();
    },

    /** The link back: the issue a run came from on this tracker (its key and address), or null. */
    async originOf(runId: string): Promise<{ surface: typeof surface; place: string; url: string | null } | null> {
      const work = await store.workOfRun(db, runId);
      return work && work.surface === surface ? { surface, place: work.issue_key, url: work.issue_url } : null;
    },

    /**
     * A team's link to a tracker team or project: `verified` with its label when the agent can
     * see it; `refused` with the reason when it cannot (or the tracker refused the question);
     * `unverified` while the integration is not configured (there is nothing to ask yet). 503
     * when the tracker refuses the integration's credentials (401, 403: not the link's fault, an
     * admin mends it), 502 when it cannot be asked now (unreachable, rate-limiting or failing).
     */
    async checkLink(externalId: string): Promise<LinkCheck> {
      const conn = await kind.connect({ evenDisabled: true });
      if (typeof conn === 'string') return { verification: 'unverified' };
      try {
        const found = await conn.findLink(externalId);
        return found.found ? { verification: 'verified', label: found.label } : { refused: found.reason };
      } catch (err) {
        if (err instanceof TrackerError && (err.transient || err.status === 401 || err.status === 403)) {
          const check = { what: `${externalId} with ${kind.title}`, service: kind.title, integration: surface, said: err.message };
          throw integrationCheckProblem(err.transient ? 'failed' : 'credentials', check);
        }
        if (!(err instanceof TrackerError)) deps.logger.warn({ err, surface }, 'checking a tracker link failed');
        return { refused: `could not check ${externalId} with ${kind.title}: ${err instanceof TrackerError ? err.message : 'the tracker could not be asked (the service log has the details)'}` };
      }
    },
  };
  return service;
}

export type TrackerService = ReturnType<typeof createTrackerService>;
