import crypto from 'node:crypto';
import { EventEmitter } from 'node:events';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { AgentConfig, AgentEvent, AgentInput, Proposal, TurnOutcome } from '../../agent/protocol.ts';
import { recordAudit, systemActor, type Actor } from '../../audit/audit.ts';
import type { Database } from '../../db/schema.ts';
import type { HookCaller, RunChange } from '../../hooks.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';
import { problems } from '../../errors/problems.ts';
import type { RunTraces } from '../../telemetry/traces.ts';
import { approvalOf, memoryBlock, outcomeEntry, postOfEvent, transitionOf, type PostDraft, type RunView } from '../../runtime/engine/rules.ts';
import { checkEvents } from './event-checks.ts';
import * as store from './runs.store.ts';
import type { Post, Run } from './runs.schemas.ts';
import type { Delivery, RunState, WaitingFor } from './runs.tables.ts';

type Db = Kysely<Database>;
type Trx = Transaction<Database>;

/** A team's role as a run needs it (from the team's effective role settings). */
export interface RunRole {
  role: string;
  agent: string;
  model: string;
  next_role: string | null;
  /** The team's own setting, or null to follow the agent version. */
  max_iterations: number | null;
  confirmation_policy: 'never_confirm' | 'confirm_risky' | null;
  skills: string[];
  memory: { inject: boolean; max_entries: number; write_outcomes: boolean };
}

/** What the runs module needs of a team. */
export interface RunTeam {
  id: number;
  name: string;
  status: string;
  surface: string;
  lead: string;
  rework_rounds: number;
  repo_url: string | null;
  roles: RunRole[];
}

export interface RunsDeps {
  db: Db;
  /** The team of a name as a run sees it (live, else the last archived one), or null. */
  team(name: string): Promise<RunTeam | null>;
  /** The version a new run of an agent gets. */
  agentVersion(agent: string): Promise<number>;
  isBudgetSpent(team: string): Promise<boolean>;
  /** Null when a live host can take the team's work, else why not. */
  hostProblem(team: string): Promise<string | null>;
  /** Queues the engine's work on a run, in the caller's transaction. */
  advance(trx: Trx, runId: string): Promise<void>;
  /** Price of a model alias, USD per million tokens. */
  price(model: string): { input: number; output: number };
  jaegerUrl: string | null;
  /** Told (inside the transaction) when a run starts, waits for a person or ends. */
  hooks?: HookCaller;
  /** Where recorded events and ended runs become spans (null when no OTLP collector is configured). */
  traces?: RunTraces | null;
  /** Queues the storing of what an agent proposed for its team (a skill, an MCP server), in the recording transaction. */
  propose?(trx: Trx, p: { run_id: string; team: string; team_id: number; role: string; source: string; proposal: Proposal }): Promise<void>;
}

/** What the host set up for a role's conversation, that its events are checked against. */
export type EventHost = Pick<AgentConfig, 'model' | 'lead' | 'tools' | 'roles' | 'mcp_servers'>;

const FINISHED: RunState[] = ['succeeded', 'failed', 'cancelled'];

/** What a team's list entry and detail show of its runs. */
export interface RunActivity {
  running: number;
  waiting: number;
  last_run_at: string | null;
}

const NO_RUNS: RunActivity = { running: 0, waiting: 0, last_run_at: null };

function iso(v: string | Date | null | undefined): string | null {
  return v ? new Date(v).toISOString() : null;
}

function presentPost(p: store.PostRow): Post {
  return { seq: p.seq, kind: p.kind as Post['kind'], role: p.role, text: p.text, data: p.data ?? {}, created_at: iso(p.created_at)! };
}

export function createRunsService(deps: RunsDeps) {
  const { db } = deps;
  const posted = new EventEmitter();
  posted.setMaxListeners(0);
  const published = (runId: string) => posted.emit(runId);
  const changed = async (trx: Trx, change: RunChange) => {
    if (deps.hooks) await deps.hooks.react('runChanged', trx, systemActor('runs'), change);
  };

  async function mustGet(id: string) {
    const run = await store.getRun(db, id);
    if (!run) throw problems.notFound('run', id);
    return run;
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
      cost_usd: Number(run.cost_usd),
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
        cost_usd: Number(t.cost_usd),
        created_at: iso(t.created_at)!,
        started_at: iso(t.started_at),
        finished_at: iso(t.finished_at),
      })),
      delivery: run.delivery,
      agent_versions: run.agent_versions ?? {},
      chat_thread_url: null,
      jaeger_url: deps.jaegerUrl && run.trace_id ? `${deps.jaegerUrl.replace(/\/+$/, '')}/trace/${run.trace_id}` : null,
    };
  }

  /** A new task of a role: the first of its conversation in this run gets the team memory block. */
  async function addTask(trx: Trx, run: store.RunRow, team: RunTeam, role: string, postSeq: number, input: AgentInput) {
    const seen = await store.conversationSeen(trx, run.id, role);
    const r = team.roles.find((x) => x.role === role);
    if (seen === null && input.kind === 'task' && r?.memory.inject && r.memory.max_entries > 0) {
      const entries = (await store.memoryOf(trx, team.name, r.memory.max_entries)).reverse().map((e) => ({ text: e.text, created_at: iso(e.created_at)! }));
      input = { ...input, memory: memoryBlock(entries, r.memory.max_entries) };
    }
    await store.insertTask(trx, {
      id: `task_${crypto.randomBytes(9).toString('base64url')}`,
      run_id: run.id,
      role,
      post_seq: postSeq,
      input,
      agent_version: run.agent_versions?.[role] ?? null,
      conversation: `${run.id}.${role}`,
      events_seen: seen ?? 0,
    });
  }

  function viewOf(team: RunTeam, run: store.RunRow, waitingOnLead: string[]): RunView {
    return {
      lead: team.lead,
      roles: team.roles.map((r) => r.role),
      pipeline: Object.fromEntries(team.roles.filter((r) => r.next_role).map((r) => [r.role, r.next_role!])),
      rework_rounds: team.rework_rounds,
      rework_used: run.rework_used,
      waiting_on_lead: waitingOnLead,
    };
  }

  async function teamOfRun(run: store.RunRow): Promise<RunTeam> {
    const team = await deps.team(run.team_name);
    if (!team || team.id !== run.team_id) throw problems.conflict(`the team of run ${run.id} was archived`);
    return team;
  }

  /** Ends a run: its state, its open tasks, and (when the lead's memory says so) an outcome entry. */
  async function finish(trx: Trx, run: store.RunRow, team: RunTeam, state: 'succeeded' | 'failed' | 'cancelled', fields: { failure_reason?: string | null; summary?: string; delivery?: Delivery | null }) {
    await trx
      .updateTable('runs')
      .set({
        state,
        finished_at: sql`now()`,
        updated_at: sql`now()`,
        waiting_for: null,
        open_question_seq: null,
        failure_reason: fields.failure_reason ?? null,
        ...(fields.delivery !== undefined ? { delivery: fields.delivery ? JSON.stringify(fields.delivery) : null } : {}),
        row_version: sql`nextval('row_version_seq')`,
      })
      .where('id', '=', run.id)
      .execute();
    await store.endOpenTasks(trx, run.id, 'cancelled');
    const { last_seq } = await trx.selectFrom('runs').select('last_seq').where('id', '=', run.id).executeTakeFirstOrThrow();
    await changed(trx, { run_id: run.id, team: run.team_name, event: 'finished', state, seq: last_seq });
    if (deps.traces && run.trace_id) {
      // This end closes the run's latest activation: its first (the root span) or the follow-up that last reopened it.
      const reopening = await store.reopeningAt(trx, run.id, last_seq);
      await deps.traces.ended(trx, { trace_id: run.trace_id, id: run.id, team: run.team_name, created_at: run.created_at, state }, reopening ? { seq: reopening.seq, started_at: iso(reopening.created_at)! } : null);
    }
    const lead = team.roles.find((r) => r.role === team.lead);
    if (state !== 'cancelled' && lead?.memory.write_outcomes && fields.summary !== undefined) {
      const d = fields.delivery ?? run.delivery;
      await store.writeMemory(
        trx,
        team.name,
        run.id,
        outcomeEntry({ text: run.text, state, summary: fields.summary, branch: d?.branch ?? null, commit: d?.commit ?? null, pull_request_url: d?.pull_request?.url ?? null }),
      );
    }
  }

  /**
   * Fails a run with a failed post and the reason. A run failed for what its agent sent (`refused`)
   * leaves its summary empty, so no team-memory entry carries the agent's words into later prompts.
   */
  async function failWith(runId: string, reason: string, refused: boolean) {
    const before = await store.getRun(db, runId);
    if (!before) return;
    const team = (await deps.team(before.team_name)) ?? { id: before.team_id, name: before.team_name, status: 'archived', surface: 'console', lead: before.lead, rework_rounds: 0, repo_url: null, roles: [] };
    const done = await db.transaction().execute(async (trx) => {
      const run = await store.lockRun(trx, runId);
      if (!run || FINISHED.includes(run.state)) return false;
      await store.appendPost(trx, runId, { kind: 'failed', role: null, text: reason, ...(refused ? { data: { refused: true } } : {}) });
      await finish(trx, run, team, 'failed', refused ? { failure_reason: reason } : { failure_reason: reason, summary: reason });
      return true;
    });
    if (done) published(runId);
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
        await trx.updateTable('runs').set({ cancel_requested_at: sql`now()` }).where('id', '=', id).execute();
        await finish(trx, run, { id: run.team_id, name: run.team_name, status: 'archived', surface: run.surface, lead: run.lead, rework_rounds: 0, repo_url: null, roles: [] }, 'cancelled', {});
        await store.appendPost(trx, id, { kind: 'canceled', role: null, text: 'cancelled: the team was archived', data: { archived: true } });
      }
      return ids.length;
    },

    /** In-process signal that a run has new posts (the SSE stream also polls, for other processes). */
    onPosts(runId: string, listener: () => void): () => void {
      posted.on(runId, listener);
      return () => posted.off(runId, listener);
    },

    /** `POST /teams/{name}/tasks` (and work arriving from an integration): a new run whose lead gets the text. */
    async createTask(actor: Actor, teamName: string, text: string, within?: (trx: Trx, runId: string) => Promise<void>) {
      const team = await deps.team(teamName);
      if (!team) throw problems.notFound('team', teamName);
      if (!text.trim()) throw problems.validation([{ field: 'text', message: 'is blank: say what the team should do' }]);
      if (team.status === 'archived') throw problems.conflict(`team "${teamName}" is archived`);
      if (team.status !== 'active') throw problems.conflict(`team "${teamName}" is ${team.status}; try again when it is active`);
      if (team.surface === 'chat_a' || team.surface === 'chat_b') throw problems.conflict(`team "${teamName}" lives on ${team.surface}: give it work in its chat room`);
      if (await deps.isBudgetSpent(teamName)) {
        // Retry-After: the seconds until the UTC day turns, when the budget is whole again.
        const now = new Date();
        const untilMidnight = Math.max(1, Math.ceil((Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000));
        throw problems.tooManyRequests(`team "${teamName}" has spent its daily budget; new tasks are accepted again after 00:00 UTC`, untilMidnight);
      }
      const hostProblem = await deps.hostProblem(teamName);
      if (hostProblem) throw problems.unavailable(hostProblem);
      const versions: Record<string, number> = {};
      for (const r of team.roles) versions[r.role] = await deps.agentVersion(r.agent);
      const id = `run_${crypto.randomBytes(12).toString('base64url').replace(/[^A-Za-z0-9]/g, 'x')}`;
      const run = await db.transaction().execute(async (trx) => {
        await trx
          .insertInto('runs')
          .values({ id, team_id: team.id, team_name: team.name, state: 'running', text, created_by: actor.name, lead: team.lead, agent_versions: JSON.stringify(versions), trace_id: crypto.randomBytes(16).toString('hex') })
          .execute();
        const row = (await store.lockRun(trx, id))!;
        const seq = await store.appendPost(trx, id, { kind: 'task', role: team.lead, text, data: { from: 'person', by: actor.name } });
        await addTask(trx, row, team, team.lead, seq, { kind: 'task', from: 'person', text });
        await deps.advance(trx, id);
        // What the caller keeps of the run's origin (an issue) commits with the run, before anyone is told it started.
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
      return this.list({ ...query, teamId: found.id });
    },

    async list(query: { limit: number; cursor?: string; state?: RunState; team?: string; teamId?: number }) {
      const cursor = decodeCursor(query.cursor, ['string', 'string']);
      const rows = await store.listRuns(db, { state: query.state, team: query.team, teamId: query.teamId }, cursor, query.limit);
      const page = toPage(rows, query.limit, (r) => [iso(r.created_at)!, r.id], (r) => r);
      const items = [];
      for (const r of page.items) items.push(summary(r, await openQuestion(r)));
      return { items, next_cursor: page.next_cursor };
    },

    async get(id: string): Promise<{ run: Run; version: number }> {
      const run = await mustGet(id);
      return { run: await present(run), version: Number(run.row_version) };
    },

    /** A team's memory, newest first: the outcome entries its finished runs left (the spec has no route for it yet). */
    async memory(team: string, limit = 10): Promise<Array<{ run_id: string; text: string; created_at: string }>> {
      const rows = await store.memoryOf(db, team, limit);
      return rows.map((r) => ({ run_id: r.run_id, text: r.text, created_at: iso(r.created_at)! }));
    },

    /** The run's trace id (spans are exported under it when tracing is on). */
    async traceId(id: string): Promise<string | null> {
      return (await mustGet(id)).trace_id;
    },

    async posts(id: string, after: number, limit: number) {
      await mustGet(id);
      const rows = await store.postsAfter(db, id, after, limit + 1);
      const more = rows.length > limit;
      const items = rows.slice(0, limit).map(presentPost);
      return { items, next_cursor: more ? String(items[items.length - 1].seq) : null };
    },

    /**
     * `POST /runs/{id}/replies`: an answer to the open question, or a follow-up task. `within`
     * runs in the reply's transaction (an integration records there that its delivery was done,
     * so a retried delivery job cannot reply twice).
     */
    async reply(actor: Actor, id: string, input: { text: string; in_reply_to?: number | null; approve?: boolean }, within?: (trx: Trx) => Promise<void>) {
      if (!input.text.trim()) throw problems.validation([{ field: 'text', message: 'is blank: write the answer or the follow-up' }]);
      // The team is read before the transaction: on the embedded database a read outside it would wait for its one connection.
      const team = await teamOfRun(await mustGet(id));
      const result = await db.transaction().execute(async (trx) => {
        const run = await store.lockRun(trx, id);
        if (!run) throw problems.notFound('run', id);
        if (run.surface !== 'console') throw problems.conflict(`run ${id} lives on ${run.surface}: answer it there`);
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
          } else answer = { kind: 'answer', text: input.text };
          const seq = await store.appendPost(trx, id, { kind: 'answer', role: null, text: input.text, data: { in_reply_to: input.in_reply_to, by: actor.name, ...(approved !== null ? { approved } : {}) } });
          await trx.updateTable('runs').set({ state: 'running', waiting_for: null, open_question_seq: null, row_version: sql`nextval('row_version_seq')` }).where('id', '=', id).execute();
          const task = await trx.selectFrom('run_tasks').select('id').where('run_id', '=', id).where('role', '=', waiting.role).where('state', '=', 'waiting').orderBy('created_at', 'desc').executeTakeFirst();
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
          await trx.updateTable('runs').set({ state: 'running', finished_at: null, failure_reason: null, row_version: sql`nextval('row_version_seq')` }).where('id', '=', id).execute();
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

    /** `POST /runs/{id}/cancel`: the run is cancelled at once; the worker stops its tools and agent loop. */
    async cancel(actor: Actor, id: string) {
      const before = await mustGet(id);
      const team = (await deps.team(before.team_name)) ?? { id: before.team_id, name: before.team_name, status: 'archived', surface: 'console', lead: before.lead, rework_rounds: 0, repo_url: null, roles: [] };
      await db.transaction().execute(async (trx) => {
        const run = await store.lockRun(trx, id);
        if (!run) throw problems.notFound('run', id);
        if (run.surface !== 'console') throw problems.conflict(`run ${id} lives on ${run.surface}: cancel it there`);
        if (FINISHED.includes(run.state)) throw problems.conflict(`run ${id} is already ${run.state}`);
        await trx.updateTable('runs').set({ cancel_requested_at: sql`now()` }).where('id', '=', id).execute();
        await finish(trx, run, team, 'cancelled', {});
        await store.appendPost(trx, id, { kind: 'canceled', role: null, text: `cancelled by ${actor.name}`, data: { by: actor.name } });
        // The engine lets the run's sandboxes go; a run cancelled while it waited has no job of its own running.
        await deps.advance(trx, id);
        await recordAudit(trx, actor, 'run.cancel', { type: 'run', id }, {});
      });
      published(id);
      return this.get(id);
    },

    // ---- For the engine (the worker), not for routes. ----

    /**
     * Takes (or renews) the lease on driving a run: null while another worker holds an unexpired
     * one. The generation grows with each new owner, so a stale owner can tell it was replaced.
     */
    async claim(runId: string, owner: string, leaseSeconds: number): Promise<number | null> {
      const row = await db
        .updateTable('runs')
        .set({
          owner,
          owner_until: sql`now() + make_interval(secs => ${leaseSeconds})`,
          owner_generation: sql`case when owner is distinct from ${owner} then owner_generation + 1 else owner_generation end`,
        })
        .where('id', '=', runId)
        .where((eb) => eb.or([eb('owner', 'is', null), eb('owner', '=', owner), eb('owner_until', '<', sql<string>`now()`)]))
        .returning('owner_generation')
        .executeTakeFirst();
      return row ? Number(row.owner_generation) : null;
    },

    /** Gives the lease up (only the owner of that generation can). */
    async release(runId: string, owner: string, generation: number): Promise<void> {
      await db.updateTable('runs').set({ owner: null, owner_until: null }).where('id', '=', runId).where('owner', '=', owner).where('owner_generation', '=', generation).execute();
    },

    /** The run and the task the engine works on next, or null when there is nothing to do. */
    async nextWork(runId: string) {
      const run = await store.getRun(db, runId);
      if (!run || run.state !== 'running') return null;
      const task = await store.nextTask(db, runId);
      if (!task) return null;
      const team = await deps.team(run.team_name);
      if (!team || team.id !== run.team_id) return null;
      return { run, task, team };
    },

    /** The roles that worked on an ended run (their sandboxes can be let go), or null while it goes on. */
    async endedRoles(runId: string): Promise<string[] | null> {
      const run = await store.getRun(db, runId);
      if (!run || !FINISHED.includes(run.state)) return null;
      return [...new Set((await store.tasksOf(db, [runId])).map((t) => t.role))];
    },

    /** Queues the engine on the team's other running runs: one that waited for a sandbox of its role may have one now. */
    async wakeTeamRuns(runId: string): Promise<void> {
      const run = await store.getRun(db, runId);
      if (!run) return;
      await db.transaction().execute(async (trx) => {
        for (const id of await store.openRunsOf(trx, run.team_id)) {
          if (id !== runId && (await store.getRun(trx, id))?.state === 'running') await deps.advance(trx, id);
        }
      });
    },
    /** For the gateway: the agent version the open run in a sandbox pinned for its role (its egress), or null. */
    pinnedVersionInSandbox: (sandboxId: string, role: string) => store.pinnedVersionInSandbox(db, sandboxId, role),

    isActive: async (runId: string) => (await store.getRun(db, runId))?.state === 'running',

    /** Marks a task's turn as begun from the conversation's seq `from` (kept across a takeover). */
    async beginTurn(taskId: string, from: number, sandboxId: string | null) {
      await db.transaction().execute(async (trx) => {
        const t = await store.getTask(trx, taskId);
        if (!t || (t.state !== 'queued' && t.state !== 'running')) return;
        await store.setTask(trx, taskId, { state: 'running', started: true, sandbox_id: sandboxId, ...(t.state === 'queued' || t.turn_from === null ? { turn_from: from } : {}) });
      });
      return store.getTask(db, taskId);
    },

    /**
     * Records a task's agent events after those already seen, once each, after checking them
     * against what the host knows (event-checks.ts): each accepted event becomes at most one post
     * (once, by its source), a proposal is queued. A refused event fails the turn and the run,
     * saying what the agent tried; nothing of it, nor of what follows it, is recorded. Cost and
     * deliveries are not the agent's to say: they come from the model proxy's ledger
     * (chargeSpend) and the gateway's record of pushes (recordPush). Safe to call again with the
     * same events. Answers the refusal, if any, and the turn end the host accepted last.
     */
    async recordEvents(taskId: string, host: EventHost, events: AgentEvent[]): Promise<{ refused: string | null; turnEnd: { seq: number; outcome: TurnOutcome } | null; seen: number }> {
      const answer = await db.transaction().execute(async (trx) => {
        const task = await store.getTask(trx, taskId);
        if (!task) return null;
        const run = await store.lockRun(trx, task.run_id);
        if (!run) return null;
        const recorded = task.turn_end_seq !== null && task.turn_end !== null ? { seq: task.turn_end_seq, outcome: task.turn_end as TurnOutcome } : null;
        // What the host recorded stays as recorded: a journal rewritten below events_seen changes nothing.
        const fresh = events.filter((e) => !(Number.isSafeInteger(e?.seq) && e.seq <= task.events_seen));
        if (!fresh.length) return { run, task, refused: null, turnEnd: recorded, published: false, seen: task.events_seen };
        const known = await store.openCalls(trx, task.conversation);
        const checked = checkEvents(
          { role: task.role, lead: host.lead, tools: host.tools, mcpServers: (host.mcp_servers ?? []).map((m) => m.name), roles: host.roles, eventsSeen: task.events_seen, calls: known },
          fresh,
        );
        const accepted = checked.accepted;
        if (accepted.length) {
          if (deps.traces && run.trace_id) {
            // Only a task's own span (made at its last turn's end) names the activation it belongs to: looked up only then.
            const activation = checked.turnEnd ? ((await store.reopeningAt(trx, run.id, task.post_seq))?.seq ?? null) : null;
            const context = { trace_id: run.trace_id, run_id: run.id, team: run.team_name, task_id: task.id, role: task.role, model: host.model, conversation: task.conversation, task_started_at: iso(task.started_at ?? task.created_at), activation };
            await deps.traces.recorded(trx, context, accepted);
          }
          let iterations = 0;
          for (const e of accepted) {
            const source = `${task.conversation}:${e.seq}`;
            if (e.type === 'model_call') iterations++;
            if (e.type === 'proposal' && deps.propose) await deps.propose(trx, { run_id: run.id, team: run.team_name, team_id: run.team_id, role: task.role, source, proposal: e.proposal });
            const draft = postOfEvent(task.role, e, e.type === 'tool_result' ? ((checked.calls.get(e.call_id) ?? known.get(e.call_id))?.subject ?? null) : null);
            if (draft && run.state !== 'cancelled') await store.appendPost(trx, run.id, draft, source);
          }
          await store.saveCalls(trx, task.conversation, checked.calls);
          await trx
            .updateTable('run_tasks')
            .set({
              events_seen: accepted[accepted.length - 1].seq,
              iterations: sql`iterations + ${iterations}`,
              ...(checked.turnEnd ? { turn_end_seq: checked.turnEnd.seq, turn_end: JSON.stringify(checked.turnEnd.outcome) } : {}),
            })
            .where('id', '=', taskId)
            .execute();
        }
        return { run, task, refused: checked.refusal, turnEnd: checked.turnEnd ?? recorded, published: accepted.length > 0, seen: accepted.length ? accepted[accepted.length - 1].seq : task.events_seen };
      });
      if (!answer) return { refused: null, turnEnd: null, seen: 0 };
      if (answer.published) published(answer.run.id);
      if (!answer.refused) return { refused: null, turnEnd: answer.turnEnd, seen: answer.seen };
      const reason = `the ${answer.task.role} role's agent runtime sent something the host does not accept, so its turn failed (${answer.refused.reason})`;
      // Its own step: a worker killed before it replays the same events, refused the same way.
      await failWith(answer.run.id, reason, true);
      return { refused: reason, turnEnd: null, seen: answer.seen };
    },

    /**
     * Charges a task for model-proxy ledger lines of its sandbox's calls (what the proxy really
     * spent), each line once ever: the task's and the run's cost grow by what is new.
     */
    async chargeSpend(taskId: string, sandboxId: string, lines: Array<{ id: string; cost_usd: number }>): Promise<void> {
      if (!lines.length) return;
      const runId = await db.transaction().execute(async (trx) => {
        const task = await store.getTask(trx, taskId);
        if (!task) return null;
        const run = await store.lockRun(trx, task.run_id);
        if (!run) return null;
        const cost = await store.chargeSpend(trx, { run_id: run.id, task_id: task.id, sandbox_id: sandboxId }, lines);
        if (cost === 0) return null;
        await trx.updateTable('run_tasks').set({ cost_usd: sql`cost_usd + ${cost}` }).where('id', '=', taskId).execute();
        await trx.updateTable('runs').set({ cost_usd: sql`cost_usd + ${cost}` }).where('id', '=', run.id).execute();
        return run.id;
      });
      if (runId) published(runId);
    },

    /** The newest ledger line already charged for a sandbox's calls: where reading the ledger goes on from. */
    spendCursor: (sandboxId: string) => store.spendCursor(db, sandboxId),

    /**
     * A push the gateway saw a code host accept from the task's sandbox: an artifact post (once
     * per push) and the run's delivery (the branch and the commit it now points at).
     */
    async recordPush(taskId: string, push: { id: string; ref: string; new_commit: string }): Promise<void> {
      if (!push.ref.startsWith('refs/heads/')) return;
      const branch = push.ref.slice('refs/heads/'.length);
      const runId = await db.transaction().execute(async (trx) => {
        const task = await store.getTask(trx, taskId);
        if (!task) return null;
        const run = await store.lockRun(trx, task.run_id);
        if (!run) return null;
        const source = `push:${push.id}`;
        if (await trx.selectFrom('run_posts').select('seq').where('run_id', '=', run.id).where('source', '=', source).executeTakeFirst()) return null;
        await store.appendPost(trx, run.id, { kind: 'artifact', role: task.role, text: `pushed ${branch} at ${push.new_commit}`, data: { branch, commit: push.new_commit } }, source);
        const delivery: Delivery = { branch, commit: push.new_commit, pull_request: run.delivery?.pull_request ?? null };
        await trx.updateTable('runs').set({ delivery: JSON.stringify(delivery), row_version: sql`nextval('row_version_seq')` }).where('id', '=', run.id).execute();
        return run.id;
      });
      if (runId) published(runId);
    },

    /** Applies a task's turn outcome: the pipeline's next task, a wait for a person, or the run's end. Once per turn. */
    async applyOutcome(taskId: string, outcome: TurnOutcome) {
      const first = await store.getTask(db, taskId);
      const owner = first ? await store.getRun(db, first.run_id) : undefined;
      if (!first || !owner) return;
      const team = await teamOfRun(owner);
      const runId = await db.transaction().execute(async (trx) => {
        const task = await store.getTask(trx, taskId);
        if (!task) return null;
        const run = await store.lockRun(trx, task.run_id);
        if (!run || run.state !== 'running') return null;
        const fresh = await store.getTask(trx, taskId);
        if (!fresh || fresh.state !== 'running') return null;
        const waitingOnLead = (await store.tasksOf(trx, [run.id])).filter((t) => t.state === 'waiting' && t.role !== team.lead).map((t) => t.role);
        const t = transitionOf(viewOf(team, run, waitingOnLead), task.role, outcome);
        const source = (i: number) => `outcome:${taskId}:${fresh.turn_from ?? 0}:${i}`;
        const seqs: number[] = [];
        for (const [i, p] of t.posts.entries()) seqs.push(await store.appendPost(trx, run.id, p as PostDraft, source(i)));
        switch (t.kind) {
          case 'continue': {
            await store.setTask(trx, taskId, { state: t.task_state, outcome, ...(t.task_state === 'done' ? { finished: true } : {}) });
            await trx.updateTable('runs').set({ rework_used: t.rework_used }).where('id', '=', run.id).execute();
            for (const [i, nt] of t.tasks.entries()) {
              const waiting = nt.input.kind === 'answer' ? await trx.selectFrom('run_tasks').select('id').where('run_id', '=', run.id).where('role', '=', nt.role).where('state', '=', 'waiting').executeTakeFirst() : undefined;
              if (waiting) await store.setTask(trx, waiting.id, { state: 'queued', input: nt.input });
              else await addTask(trx, run, team, nt.role, seqs[i] ?? seqs[0], nt.input);
            }
            await deps.advance(trx, run.id);
            break;
          }
          case 'wait':
            await store.setTask(trx, taskId, { state: 'waiting', outcome });
            await trx
              .updateTable('runs')
              .set({ state: 'waiting', waiting_for: JSON.stringify({ role: t.waiting_for.role, kind: t.waiting_for.kind, since: new Date().toISOString() }), open_question_seq: seqs[0], row_version: sql`nextval('row_version_seq')` })
              .where('id', '=', run.id)
              .execute();
            await changed(trx, { run_id: run.id, team: run.team_name, event: 'waiting', state: 'waiting', seq: seqs[0] });
            break;
          case 'succeeded': {
            await store.setTask(trx, taskId, { state: 'done', outcome, finished: true });
            // The delivery is what the host recorded (the gateway's pushes, the pull request the engine
            // opened): a branch or pull request the lead only names is not believed.
            await finish(trx, run, team, 'succeeded', { summary: t.summary, delivery: run.delivery });
            break;
          }
          case 'failed':
            await store.setTask(trx, taskId, { state: 'failed', outcome, finished: true });
            await finish(trx, run, team, 'failed', { failure_reason: t.reason, summary: t.reason });
            break;
          case 'cancelled':
            await store.setTask(trx, taskId, { state: 'cancelled', outcome, finished: true });
            break;
        }
        return run.id;
      });
      if (runId) published(runId);
    },

    /** Fails a run for a reason outside the agents (a sandbox that cannot be had, a runtime that keeps dying). */
    async failRun(runId: string, reason: string) {
      await failWith(runId, reason, false);
    },

    /** A notice in the run's conversation (a cold boot, a refused request), once per source. */
    async notice(runId: string, text: string, source: string, data: Record<string, unknown> = {}) {
      await db.transaction().execute(async (trx) => {
        const run = await store.lockRun(trx, runId);
        // Nothing is posted after a cancel.
        if (run && run.state !== 'cancelled') await store.appendPost(trx, runId, { kind: 'notice', role: null, text, data }, source);
      });
      published(runId);
    },

    /** Names the pull request of a run's delivery (opened, then merged or closed), keeping its branch and commit. */
    async setPullRequest(runId: string, pr: { url: string; number: number | null; state: string | null }) {
      await db.transaction().execute(async (trx) => {
        const run = await store.lockRun(trx, runId);
        if (!run) return;
        const d = run.delivery;
        const delivery: Delivery = { branch: d?.branch ?? null, commit: d?.commit ?? null, pull_request: pr };
        await trx.updateTable('runs').set({ delivery: JSON.stringify(delivery), row_version: sql`nextval('row_version_seq')` }).where('id', '=', runId).execute();
      });
      published(runId);
    },

    /** Puts a question-answering input on a task (the engine answering open_pull_request), queued again. */
    async requeueTask(taskId: string, input: AgentInput) {
      await db.transaction().execute(async (trx) => {
        const t = await store.getTask(trx, taskId);
        if (!t || t.state !== 'running') return;
        await store.setTask(trx, taskId, { state: 'queued', input });
      });
    },
  };
}

export type RunsService = ReturnType<typeof createRunsService>;
