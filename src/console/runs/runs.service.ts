/**
 * The runs service: what the routes (and the integrations that bring work in) do with runs:
 * give a team a task, list and read runs and their posts, reply, cancel. What the engine
 * writes while it drives a run is the run journal (runs.journal.ts); the steps both take are
 * in runs.steps.ts.
 */
import crypto from 'node:crypto';
import type { Transaction } from 'kysely';
import type { AgentInput } from '../../agent/protocol.ts';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Database } from '../../db/schema.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';
import { toUsd } from '../../db/parsers.ts';
import { problems } from '../../errors/problems.ts';
import { actorForPeople, serviceName } from '../integrations/kinds.ts';
import { approvalOf, isChatSurface } from './runs.rules.ts';
import type { Run } from './runs.schemas.ts';
import { FINISHED, archivedTeamOf, iso, presentPost, type RunsDeps, type RunSteps } from './runs.steps.ts';
import * as store from './runs.store.ts';
import type { RunState, RunSurface, WaitingFor } from './runs.tables.ts';

export type { RunRole, RunTeam, RunsDeps } from './runs.steps.ts';

type Trx = Transaction<Database>;

/** What a team's list entry and detail show of its runs. */
export interface RunActivity {
  running: number;
  waiting: number;
  last_run_at: string | null;
}

/** What starts a run: the team, the text for its lead, and where the work came from. */
export interface NewRun {
  team: string;
  text: string;
  surface: RunSurface;
  /** On a chat or tracker surface, the thread or issue the work came from (progress and questions go back there). */
  external_ref?: string | null;
  /** Who asked, as the run shows it (`created_by`); the actor's name when not given. */
  requested_by?: string;
}

/** The surfaces whose work names where it came from. */
const NEEDS_REF: RunSurface[] = ['chat_a', 'chat_b', 'tracker_a', 'tracker_b'];

const NO_RUNS: RunActivity = { running: 0, waiting: 0, last_run_at: null };

export function createRunsService(deps: RunsDeps, steps: RunSteps) {
  const { db } = deps;
  const { published, changed, mustGet, teamOfRun, teamToEnd, addTask, finish } = steps;

  /** A page of a run's posts after a seq. */
  async function postsAfter(id: string, after: number, limit: number) {
    const rows = await store.postsAfter(db, id, after, limit + 1);
    const more = rows.length > limit;
    const items = rows.slice(0, limit).map(presentPost);
    return { items, next_cursor: more ? String(items[items.length - 1].seq) : null };
  }

  /** 429 while the team's daily budget is spent, with Retry-After: the seconds until the UTC day turns, when it is whole again. */
  async function refuseWhileBudgetSpent(teamName: string, what: string): Promise<void> {
    if (!(await deps.isBudgetSpent(teamName))) return;
    const now = new Date();
    const untilMidnight = Math.max(1, Math.ceil((Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000));
    throw problems.tooManyRequests(`team "${teamName}" has spent its daily budget; ${what} are accepted again after 00:00 UTC, or sooner when an admin raises the team's daily budget`, untilMidnight);
  }

  async function openQuestion(run: store.RunRow) {
    if (run.open_question_seq === null) return null;
    const p = await store.getPost(db, run.id, run.open_question_seq);
    return p ? { seq: p.seq, role: p.role ?? run.lead, text: p.text } : null;
  }

  function summary(run: store.RunRow, question: { seq: number; role: string; text: string } | null) {
    return {
      id: run.id,
      team: run.team_name,
      work_item_id: run.work_item_id,
      state: run.state,
      surface: run.surface,
      text: run.text,
      lead: run.lead,
      cost_usd: toUsd(run.cost_usd),
      waiting_for: run.waiting_for,
      open_question: question,
      failure_reason: run.failure_reason,
      created_by: run.created_by,
      created_at: iso(run.created_at)!,
      updated_at: iso(run.updated_at)!,
      finished_at: iso(run.finished_at),
    };
  }

  async function present(run: store.RunRow): Promise<Run> {
    const tasks = await store.tasksOf(db, [run.id]);
    return {
      ...summary(run, await openQuestion(run)),
      tasks: tasks.map((t) => ({
        id: t.id,
        role: t.role,
        state: t.state,
        agent_version: t.agent_version,
        iterations: t.iterations,
        cost_usd: toUsd(t.cost_usd),
        created_at: iso(t.created_at)!,
        started_at: iso(t.started_at),
        finished_at: iso(t.finished_at),
      })),
      delivery: run.delivery,
      agent_versions: run.agent_versions ?? {},
      // A chat run's thread, or the home-room thread of a chat-homed team's run from a tracker or the code host.
      chat_thread_url: deps.threadUrl ? await deps.threadUrl(run.id) : null,
      origin_url: deps.originUrl && !isChatSurface(run.surface) && run.surface !== 'console' ? await deps.originUrl(run.id) : null,
      jaeger_url: deps.jaegerUrl && run.trace_id ? `${deps.jaegerUrl.replace(/\/+$/, '')}/trace/${run.trace_id}` : null,
    };
  }

  /** Runs, newest first; `team` keeps the runs of the teams of that name: 404 when no team ever had it, as for a team's runs. */
  async function list(query: { limit: number; cursor?: string; state?: RunState; team?: string; teamId?: number }) {
    if (query.team !== undefined && !(await deps.team(query.team))) throw problems.notFound('team', query.team);
    const cursor = decodeCursor(query.cursor, ['time', 'string']);
    const rows = await store.listRuns(db, { state: query.state, team: query.team, teamId: query.teamId }, cursor, query.limit);
    const page = toPage(rows, query.limit, (r) => [iso(r.created_at)!, r.id], (r) => r);
    const items = [];
    for (const r of page.items) items.push(summary(r, await openQuestion(r)));
    return { items, next_cursor: page.next_cursor };
  }

  async function get(id: string): Promise<{ run: Run; version: number }> {
    const run = await mustGet(id);
    return { run: await present(run), version: Number(run.row_version) };
  }

  return {
    /** Each team's runs in progress and waiting, and when its last run started; one query for all. */
    async activityOf(teamIds: number[]): Promise<Map<number, RunActivity>> {
      const out = new Map<number, RunActivity>(teamIds.map((id) => [id, NO_RUNS]));
      if (teamIds.length === 0) return out;
      for (const r of await store.activityOf(db, teamIds)) {
        out.set(r.team_id, { running: Number(r.running), waiting: Number(r.waiting), last_run_at: iso(r.last_run_at) });
      }
      return out;
    },

    /** Cancels a team's open runs inside the caller's transaction (the team is being archived): their tasks end, each says why. */
    async cancelOpenRuns(trx: Trx, teamId: number): Promise<number> {
      const ids = await store.openRunsOf(trx, teamId);
      for (const id of ids) {
        const run = await store.lockRun(trx, id);
        if (!run || FINISHED.includes(run.state)) continue;
        await store.markCancelRequested(trx, id);
        await finish(trx, run, archivedTeamOf(run), 'cancelled', {});
        await store.appendPost(trx, id, { kind: 'canceled', role: null, text: 'cancelled: the team was archived', data: { archived: true } });
      }
      return ids.length;
    },

    /** In-process signal that a run has new posts (the SSE stream also polls, for other processes). */
    onPosts: steps.onPosts,

    /**
     * A new run whose lead gets the text: `POST /teams/{name}/tasks` (surface console), and work
     * arriving on a surface (the code host's issues; a chat thread or a tracker issue, named by
     * `external_ref`). `within` runs in the run's transaction: what the caller keeps of the
     * run's origin commits with the run, before anyone is told it started.
     */
    async createRun(actor: Actor, input: NewRun, within?: (trx: Trx, runId: string) => Promise<void>) {
      const { team: teamName, text, surface } = input;
      const externalRef = input.external_ref ?? null;
      if (NEEDS_REF.includes(surface) && !externalRef?.trim()) throw problems.validation([{ field: 'external_ref', message: `is missing: work from ${surface} names the thread or issue it came from` }]);
      const requestedBy = input.requested_by ?? actor.name;
      const team = await deps.team(teamName);
      if (!team) throw problems.notFound('team', teamName);
      if (!text.trim()) throw problems.validation([{ field: 'text', message: 'is blank: say what the team should do' }]);
      if (team.status === 'archived') throw problems.conflict(`team "${teamName}" is archived`);
      if (team.status !== 'active') throw problems.conflict(`team "${teamName}" is ${team.status}; try again when it is active`);
      // A team homed in a chat room takes work from its room and from its linked surfaces (a tracker, the code host: the chat core opens a thread in the room for that work too), not from the Console or another chat.
      if (isChatSurface(team.surface) && surface !== team.surface && (surface === 'console' || isChatSurface(surface))) throw problems.conflict(`team "${teamName}" lives on ${serviceName(team.surface)}: give it work in its chat room`);
      await refuseWhileBudgetSpent(teamName, 'new tasks');
      const hostProblem = await deps.hostProblem(teamName);
      if (hostProblem) throw problems.unavailable(hostProblem);
      const versions: Record<string, number> = {};
      for (const r of team.roles) versions[r.role] = await deps.agentVersion(r.agent);
      const id = `run_${crypto.randomBytes(12).toString('base64url').replace(/[^A-Za-z0-9]/g, 'x')}`;
      const run = await db.transaction().execute(async (trx) => {
        await store.insertRun(trx, { id, team_id: team.id, team_name: team.name, surface, external_ref: externalRef, text, created_by: requestedBy, lead: team.lead, agent_versions: versions, trace_id: crypto.randomBytes(16).toString('hex') });
        const row = (await store.lockRun(trx, id))!;
        const seq = await store.appendPost(trx, id, { kind: 'task', role: team.lead, text, data: { from: 'person', by: requestedBy } });
        await addTask(trx, row, team, team.lead, seq, { kind: 'task', from: 'person', text });
        await deps.advance(trx, id);
        if (within) await within(trx, id);
        await changed(trx, { run_id: id, team: team.name, event: 'started', state: 'running', seq });
        await recordAudit(trx, actor, 'run.create', { type: 'run', id }, { team: team.name });
        return row;
      });
      published(id);
      return { run_id: run.id, work_item_id: run.work_item_id, state: run.state };
    },

    /** A team's runs: 404 for a team that never was. Runs belong to the team that ran them, not to its name (a name an archived team had can be taken again). */
    async listOfTeam(team: string, query: { limit: number; cursor?: string; state?: RunState }) {
      const found = await deps.team(team);
      if (!found) throw problems.notFound('team', team);
      return list({ ...query, teamId: found.id });
    },

    list,

    get,

    /**
     * A surface's runs that may still take work from where they came from: open (running,
     * waiting) or ended within `endedWithinSeconds` (a follow-up reopens a finished run), most
     * recently changed first, at most `limit`.
     */
    /** A surface's runs still open or lately ended (a chat listener's catch-up), with every run of `teams` (the teams homed there, whose runs from elsewhere have a thread there too). */
    liveOnSurface: (surface: RunSurface, endedWithinSeconds: number, limit: number, teams: string[] = []) => store.liveOnSurface(db, surface, endedWithinSeconds, limit, teams),

    /** A team's memory, newest first: the outcome entries its finished runs left (the spec has no route for it yet). */
    async memory(team: string, limit = 10): Promise<Array<{ run_id: string; text: string; created_at: string }>> {
      const rows = await store.memoryOf(db, team, limit);
      return rows.map((r) => ({ run_id: r.run_id, text: r.text, created_at: iso(r.created_at)! }));
    },

    /** The run's task text as given, without presenting the run (what a surface reads to link back to its work). */
    async textOf(id: string): Promise<string> {
      return (await mustGet(id)).text;
    },

    /** The run's trace id (spans are exported under it when tracing is on). */
    async traceId(id: string): Promise<string | null> {
      return (await mustGet(id)).trace_id;
    },

    async posts(id: string, after: number, limit: number) {
      await mustGet(id);
      return postsAfter(id, after, limit);
    },

    /**
     * A run's posts after a seq, without looking the run up first: for a post stream, which
     * answered an unknown run's 404 before it started. One statement instead of two per read
     * matters there: on the embedded database each read waits for, and holds up, the run's own
     * writes on its one connection.
     */
    postsAfter,

    /**
     * `POST /runs/{id}/replies`: an answer to the open question, or a follow-up task. `within`
     * runs in the reply's transaction (an integration records there that its delivery was done,
     * so a retried delivery job cannot reply twice).
     */
    async reply(actor: Actor, id: string, input: { text: string; in_reply_to?: number | null; approve?: boolean }, within?: (trx: Trx) => Promise<void>, from: RunSurface = 'console') {
      if (!input.text.trim()) throw problems.validation([{ field: 'text', message: 'is blank: write the answer or the follow-up' }]);
      // The team is read before the transaction: on the embedded database a read outside it would wait for its one connection.
      const found = await mustGet(id);
      const team = await teamOfRun(found);
      // An archived team has no roles left to work: a follow-up would reopen its run only to fail it (a question of its runs was closed by the archive's cancel).
      if (team.status === 'archived') throw problems.conflict(`the team ${team.name} of run ${id} was archived, so the run takes no more replies: give a live team a new task instead`);
      // A follow-up reopens a finished run: refused as a new task is while the budget is spent (its first model call would fail it again).
      if (FINISHED.includes(found.state) && found.state !== 'cancelled' && (input.in_reply_to === undefined || input.in_reply_to === null)) await refuseWhileBudgetSpent(found.team_name, 'follow-ups');
      const result = await db.transaction().execute(async (trx) => {
        const run = await store.lockRun(trx, id);
        if (!run) throw problems.notFound('run', id);
        // A run on a chat surface is answered there: only its own surface's adapter replies to it.
        if (isChatSurface(run.surface) && from !== run.surface) throw problems.conflict(`run ${id} lives on ${serviceName(run.surface)}: answer it in its ${serviceName(run.surface)} thread`);
        if (input.approve !== undefined && (input.in_reply_to === undefined || input.in_reply_to === null)) throw problems.validation([{ field: 'approve', message: 'decides a confirmation, so it goes with in_reply_to (the confirmation\'s seq): leave it out of a follow-up' }]);
        if (input.in_reply_to !== undefined && input.in_reply_to !== null) {
          const target = await store.getPost(trx, id, input.in_reply_to);
          if (!target || target.kind !== 'question') {
            throw problems.validation([{ field: 'in_reply_to', message: `post ${input.in_reply_to} of run ${id} is not a question` }]);
          }
          if (run.state !== 'waiting' || run.open_question_seq !== input.in_reply_to) {
            const now = run.open_question_seq !== null ? `; the open question is ${run.open_question_seq}` : '; the run has no open question';
            throw problems.conflict(`question ${input.in_reply_to} is no longer open${now}`, [{ field: 'in_reply_to', message: 'is not the open question' }]);
          }
          const waiting = run.waiting_for as WaitingFor;
          let answer: AgentInput;
          let approved: boolean | null = null;
          if (waiting.kind === 'confirmation') {
            approved = input.approve ?? approvalOf(input.text);
            if (approved === null) throw problems.validation([{ field: 'text', message: 'a confirmation is answered with "approve" or "refuse" (or approve: true/false)' }]);
            answer = { kind: 'confirmation', approved, note: input.text };
          } else if (input.approve !== undefined) {
            throw problems.validation([{ field: 'approve', message: `decides a confirmation, and post ${input.in_reply_to} is a question: answer it in text and leave approve out` }]);
          } else answer = { kind: 'answer', text: input.text };
          const seq = await store.appendPost(trx, id, { kind: 'answer', role: null, text: input.text, data: { in_reply_to: input.in_reply_to, by: actor.name, ...(approved !== null ? { approved } : {}) } });
          await store.resumeWaiting(trx, id);
          const task = await store.waitingTaskOf(trx, id, waiting.role);
          if (task) await store.setTask(trx, task.id, { state: 'queued', input: answer });
          await deps.advance(trx, id);
          if (within) await within(trx);
          await recordAudit(trx, actor, 'run.reply', { type: 'run', id }, { in_reply_to: input.in_reply_to });
          return { run_id: id, seq, state: 'running' as const };
        }
        if (run.state === 'cancelled') throw problems.conflict(`run ${id} was cancelled; give the team a new task instead`);
        if (run.state === 'waiting') throw problems.conflict(`run ${id} waits for an answer to question ${run.open_question_seq}: reply with in_reply_to ${run.open_question_seq}`);
        const seq = await store.appendPost(trx, id, { kind: 'reply', role: team.lead, text: input.text, data: { by: actor.name, reopened: FINISHED.includes(run.state) } });
        const reopened = FINISHED.includes(run.state);
        if (reopened) {
          await store.reopenRun(trx, id);
        }
        await addTask(trx, run, team, team.lead, seq, { kind: 'task', from: 'person', text: input.text });
        await deps.advance(trx, id);
        // Told once per reopening: the follow-up's post is the change's seq, and this transaction makes it once.
        if (within) await within(trx);
        if (reopened) await changed(trx, { run_id: id, team: run.team_name, event: 'resumed', state: 'running', seq });
        await recordAudit(trx, actor, 'run.reply', { type: 'run', id }, { follow_up: true });
        return { run_id: id, seq, state: 'running' as const };
      });
      published(id);
      return result;
    },

    /**
     * `POST /runs/{id}/cancel`: the run is cancelled at once; the worker stops its tools and agent
     * loop. `within` runs in the cancel's transaction (a surface settles what asked for it there).
     */
    async cancel(actor: Actor, id: string, from: RunSurface = 'console', within?: (trx: Trx) => Promise<void>) {
      const team = await teamToEnd(await mustGet(id));
      await db.transaction().execute(async (trx) => {
        const run = await store.lockRun(trx, id);
        if (!run) throw problems.notFound('run', id);
        if (isChatSurface(run.surface) && from !== run.surface) throw problems.conflict(`run ${id} lives on ${serviceName(run.surface)}: cancel it in its ${serviceName(run.surface)} thread (/cancel)`);
        if (FINISHED.includes(run.state)) throw problems.conflict(`run ${id} is already ${run.state}`);
        await store.markCancelRequested(trx, id);
        await finish(trx, run, team, 'cancelled', {});
        await store.appendPost(trx, id, { kind: 'canceled', role: null, text: `cancelled by ${actorForPeople(actor.name)}`, data: { by: actor.name } });
        // The engine lets the run's sandboxes go; a run cancelled while it waited has no job of its own running.
        await deps.advance(trx, id);
        if (within) await within(trx);
        await recordAudit(trx, actor, 'run.cancel', { type: 'run', id }, {});
      });
      published(id);
      return get(id);
    },

  };
}

export type RunsService = ReturnType<typeof createRunsService>;
