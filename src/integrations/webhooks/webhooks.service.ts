import crypto from 'node:crypto';
import { verify } from '@octokit/webhooks-methods';
import type { Logger } from 'pino';
import { systemActor } from '../../audit/audit.ts';
import type { RunJournal } from '../../console/runs/runs.journal.ts';
import type { RunsService } from '../../console/runs/runs.service.ts';
import type { ChatAService } from '../chat_a/chat_a.service.ts';
import type { Db } from '../../db/database.ts';
import { decodeCursor, toPage } from '../../http/pagination.ts';
import { Problem, problems } from '../../http/problems.ts';
import { intentOf, taskTextOf, type CodeHostIntent } from './code-host.events.ts';
import { isWebhookSurface, type CodeHostClient, type WebhookSurface } from './code-host.client.ts';
import { ProcessDelivery } from './webhooks.jobs.ts';
import * as store from './webhooks.store.ts';

export interface WebhooksDeps {
  db: Db;
  runs: RunsService;
  /** What a pull request's state changes in a run: its delivery and a notice. */
  journal: Pick<RunJournal, 'setPullRequest' | 'notice'>;
  /** Whether a surface's integration is enabled, and its webhook secret (null when unset). */
  inbound(surface: WebhookSurface): Promise<{ enabled: boolean; secret: string | null }>;
  /** The code-host app while the integration is enabled, else null. */
  codeHost(): Promise<CodeHostClient | null>;
  /** The chat_a adapter: its slash command arrives here and its jobs run with the webhooks' (optional: tests of this module alone). */
  chatA?: ChatAService;
  /** The live teams whose repository `<owner>/<repo>` is (a code_host link, or a repo_url that is one of `urls`). */
  teamsOfRepository(repo: string, urls: string[]): Promise<string[]>;
  logger: Logger;
}

/** What a delivery's sender needs to know; the route answers it as JSON. */
export interface DeliveryAnswer {
  delivery_id: string;
  /** `accepted` the first time (its work is queued), `duplicate` for a delivery id seen before, `ignored` for a surface not consumed yet. */
  outcome: 'accepted' | 'duplicate' | 'ignored';
}

const DELIVERY_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const EVENT = /^[a-z_]{1,64}$/;

function presentDelivery(r: Awaited<ReturnType<typeof store.listDeliveries>>[number]) {
  return {
    id: r.delivery_id,
    event: r.action ? `${r.event}.${r.action}` : r.event,
    received_at: new Date(r.received_at).toISOString(),
    signature_valid: r.signature_valid,
    times_received: Number(r.times_received),
    outcome: r.outcome as 'accepted' | 'processed' | 'ignored' | 'refused' | 'failed',
    detail: r.detail,
    run_id: r.run_id,
  };
}

export function createWebhooksService(deps: WebhooksDeps) {
  const { db, runs, logger } = deps;

  /** Settles a delivery whose work was a problem a retry cannot mend (the team cannot take work, say). */
  const refusedBy = (err: unknown) => err instanceof Problem && err.status >= 400 && err.status < 500 && err.status !== 429;

  async function task(deliveryRow: string, intent: Extract<CodeHostIntent, { kind: 'task' }>) {
    const teams = await deps.teamsOfRepository(intent.repo, intent.repo_urls);
    let team: string;
    if (intent.team) {
      if (!teams.includes(intent.team)) return store.settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: `team "${intent.team}" has no link to ${intent.repo}` });
      team = intent.team;
    } else if (teams.length === 1) {
      team = teams[0];
    } else {
      const why = teams.length === 0 ? `no team is linked to ${intent.repo}` : `${intent.repo} is linked to ${teams.length} teams (${teams.join(', ')}): label the issue crewhouse:<team>`;
      return store.settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: why });
    }
    const claim = `pending:${deliveryRow}`;
    const got = await store.claimIssue(db, claim, team, intent.repo, intent.issue);
    if (!got.claimed) {
      // The claim of a delivery that died half-way is this one's own to finish; another's means the issue is taken.
      if (got.run_id !== claim) {
        const run = got.run_id.startsWith('pending:') ? null : got.run_id;
        return store.settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: `issue #${intent.issue} is already work of team "${team}"`, run_id: run });
      }
    }
    let accepted;
    try {
      accepted = await runs.createRun(systemActor(`code_host:${intent.author}`), { team, text: taskTextOf(intent), surface: 'code_host' }, (trx, runId) => store.settleClaim(trx, claim, runId));
    } catch (err) {
      await store.dropClaim(db, claim);
      if (!refusedBy(err)) throw err;
      return store.settleDelivery(db, deliveryRow, { outcome: 'refused', detail: (err as Problem).detail });
    }
    await store.settleDelivery(db, deliveryRow, { outcome: 'processed', detail: `issue #${intent.issue} became a task of team "${team}"`, run_id: accepted.run_id });
  }

  async function comment(deliveryRow: string, intent: Extract<CodeHostIntent, { kind: 'comment' }>) {
    const work = await store.workOfNumber(db, intent.repo, intent.number);
    if (!work) return store.settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: `#${intent.number} of ${intent.repo} is not the issue or pull request of a run` });
    const { run } = await runs.get(work.run_id);
    const question = run.open_question;
    const what = question ? `answered question ${question.seq}` : 'became a follow-up task';
    try {
      // Settled with the reply: a job run again after the reply committed (a worker killed) finds the delivery done.
      await runs.reply(systemActor(`code_host:${intent.author}`), run.id, { text: intent.text, in_reply_to: question ? question.seq : null }, (trx) =>
        store.settleDelivery(trx, deliveryRow, { outcome: 'processed', detail: `the comment on #${intent.number} ${what} of run ${run.id}`, run_id: run.id }),
      );
    } catch (err) {
      if (!refusedBy(err)) throw err;
      return store.settleDelivery(db, deliveryRow, { outcome: 'refused', detail: (err as Problem).detail, run_id: run.id });
    }
  }

  async function pullClosed(deliveryRow: string, intent: Extract<CodeHostIntent, { kind: 'pull_closed' }>) {
    const work = await store.workOfNumber(db, intent.repo, intent.number);
    if (!work || work.pull_number !== intent.number) return store.settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: `pull request #${intent.number} of ${intent.repo} was not opened by a run` });
    const state = intent.merged ? 'merged' : 'closed';
    await deps.journal.setPullRequest(work.run_id, { url: work.pull_url ?? intent.url, number: intent.number, state });
    await deps.journal.notice(work.run_id, `pull request #${intent.number} was ${state}`, `code_host:pull:${intent.number}:${state}`, { pull_request: intent.number, state });
    await store.settleDelivery(db, deliveryRow, { outcome: 'processed', detail: `pull request #${intent.number} ${state}`, run_id: work.run_id });
  }

  return {
    /** The chat_a adapter, for its jobs (see webhooks.jobs.ts). */
    chatA: deps.chatA,

    /**
     * `POST /webhooks/<surface>`: the signature is checked on the raw body before anything is
     * parsed; every delivery is recorded; a verified delivery id is processed once (its job is
     * keyed by it), however often it arrives. Answers at once: the work is a job.
     */
    async receive(surface: string, headers: Record<string, string | string[] | undefined>, raw: Buffer): Promise<DeliveryAnswer> {
      if (!isWebhookSurface(surface)) throw problems.notFound('webhook surface', surface);
      const header = (name: string) => {
        const v = headers[name];
        return Array.isArray(v) ? v[0] : v;
      };
      const deliveryId = header('x-github-delivery') ?? '';
      const eventName = header('x-github-event') ?? '';
      const signature = header('x-hub-signature-256') ?? '';
      const refuse = async (problem: Problem, signatureValid: boolean) => {
        await store.recordRefused(db, {
          surface,
          // What a refused sender claims is kept only as far as it is printable and short.
          delivery_id: DELIVERY_ID.test(deliveryId) ? deliveryId : `(invalid: ${crypto.randomUUID()})`,
          event: EVENT.test(eventName) ? eventName : '(invalid)',
          action: null,
          signature_valid: signatureValid,
          outcome: 'refused',
          detail: problem.detail,
        });
        logger.warn({ surface, delivery: deliveryId.slice(0, 128), status: problem.status, reason: problem.detail }, 'webhook delivery refused');
        return problem;
      };
      const state = await deps.inbound(surface);
      if (!state.enabled) throw await refuse(problems.conflict(`the ${surface} integration is not enabled: its deliveries are refused`), false);
      if (!state.secret) throw await refuse(problems.conflict(`the ${surface} integration has no webhook secret (integrations/${surface}/webhook_secret)`), false);
      if (!signature) throw await refuse(problems.unauthorized('X-Hub-Signature-256 is missing: the delivery is not signed'), false);
      let valid = false;
      try {
        valid = await verify(state.secret, raw.toString('utf8'), signature);
      } catch {
        valid = false;
      }
      if (!valid) throw await refuse(problems.unauthorized('X-Hub-Signature-256 does not match the body signed with the webhook secret'), false);
      if (!DELIVERY_ID.test(deliveryId)) throw await refuse(problems.badRequest('X-GitHub-Delivery must be 1 to 128 of A-Z a-z 0-9 . _ : -', [{ field: 'X-GitHub-Delivery', message: 'missing or malformed' }]), true);
      if (!EVENT.test(eventName)) throw await refuse(problems.badRequest('X-GitHub-Event must name the event (a-z and _)', [{ field: 'X-GitHub-Event', message: 'missing or malformed' }]), true);
      let payload: unknown;
      try {
        payload = JSON.parse(raw.toString('utf8'));
      } catch {
        throw await refuse(problems.badRequest('the body is not JSON'), true);
      }
      const action = typeof (payload as { action?: unknown })?.action === 'string' ? ((payload as { action: string }).action.slice(0, 64)) : null;
      const consumed = surface === 'code_host';
      const result = await db.transaction().execute(async (trx) => {
        const row = await store.recordVerified(trx, {
          surface,
          delivery_id: deliveryId,
          event: eventName,
          action,
          outcome: consumed ? 'accepted' : 'ignored',
          detail: consumed ? null : `the ${surface} adapter is not built yet: the delivery is recorded, not processed`,
          payload: consumed ? payload : null,
        });
        // The job's key is the delivery too: even a row lost to a restore could not queue it twice.
        if (row.first && consumed) await ProcessDelivery.enqueue(trx, { delivery: row.id }, { key: `webhook:${surface}:${deliveryId}` });
        return row;
      });
      return { delivery_id: deliveryId, outcome: !result.first ? 'duplicate' : consumed ? 'accepted' : 'ignored' };
    },

    /** Records a delivery refused for its size before it was read (the route's body limit). */
    async refusedTooLarge(surface: string, headers: Record<string, string | string[] | undefined>, limit: number) {
      if (!isWebhookSurface(surface)) return;
      const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v) ?? '';
      const id = one(headers['x-github-delivery']);
      const event = one(headers['x-github-event']);
      await store.recordRefused(db, {
        surface,
        delivery_id: DELIVERY_ID.test(id) ? id : `(invalid: ${crypto.randomUUID()})`,
        event: EVENT.test(event) ? event : '(invalid)',
        action: null,
        signature_valid: false,
        outcome: 'refused',
        detail: `the body is larger than ${limit} bytes (SERVICE_BODY_LIMIT); the signature was not checked`,
      });
    },

    /** `GET /integrations/{kind}/deliveries`: newest first. */
    async deliveries(kind: string, query: { limit: number; cursor?: string }) {
      if (!isWebhookSurface(kind) && kind !== 'chat_a') {
        if (kind === 'chat_b') return { items: [], next_cursor: null };
        throw problems.notFound('integration', kind);
      }
      const cursor = decodeCursor(query.cursor, ['string', 'string']);
      const rows = await store.listDeliveries(db, kind, cursor, query.limit);
      return toPage(rows, query.limit, (r) => [new Date(r.received_at).toISOString(), String(r.id)], presentDelivery);
    },

    /** The job: what a verified code-host delivery means, done once. */
    async process(deliveryRow: string): Promise<void> {
      const d = await store.getDelivery(db, deliveryRow);
      if (!d || d.outcome !== 'accepted') return;
      if (d.surface === 'chat_a') {
        if (!deps.chatA) throw new Error('a chat_a command was queued on a process without the chat_a adapter');
        return deps.chatA.commands.process(deliveryRow, d.payload);
      }
      const intent = intentOf(d.event, d.payload);
      if (intent.kind === 'ignore') return store.settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: intent.reason });
      const app = await deps.codeHost();
      if (!app) return store.settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: 'the code_host integration is not enabled' });
      if (intent.kind === 'task') return task(deliveryRow, intent);
      if (intent.kind === 'comment') return comment(deliveryRow, intent);
      return pullClosed(deliveryRow, intent);
    },

    /** Marks a delivery whose job gave up (its last error), so the list says so. */
    async failed(deliveryRow: string, reason: string) {
      await store.settleDelivery(db, deliveryRow, { outcome: 'failed', detail: reason.slice(0, 500) });
    },
  };
}

export type WebhooksService = ReturnType<typeof createWebhooksService>;
