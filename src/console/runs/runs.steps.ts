/**
 * What both audiences of the runs module do to a run inside a transaction: the service the
 * routes use (a task, a reply, a cancel) and the journal the engine writes (an outcome, a
 * failure). A new task of a role, a run's end, the team a run belongs to, and the in-process
 * signal that a run has new posts are each written once, here.
 */
import crypto from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Kysely, Transaction } from 'kysely';
import type { AgentInput, Proposal } from '../../agent/protocol.ts';
import { systemActor } from '../../audit/audit.ts';
import type { Database } from '../../db/schema.ts';
import type { HookCaller, RunChange } from '../../hooks.ts';
import { problems } from '../../errors/problems.ts';
import type { RunTraces } from '../../telemetry/traces.ts';
import { memoryBlock, outcomeEntry } from './runs.rules.ts';
import * as store from './runs.store.ts';
import type { Post } from './runs.schemas.ts';
import type { Delivery, RunState } from './runs.tables.ts';

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
  /** The link to a run's chat thread (`chat_thread_url`: a chat run's, or the home-room thread of a chat-homed team's run from elsewhere), null until its root is posted. */
  threadUrl?(runId: string): Promise<string | null>;
  /** The link back to the issue a run from a tracker or the code host came from (`origin_url`), or null. */
  originUrl?(runId: string): Promise<string | null>;
  /** Queues the storing of what an agent proposed for its team (a skill, an MCP server), in the recording transaction. */
  propose?(trx: Trx, p: { run_id: string; team: string; team_id: number; role: string; source: string; proposal: Proposal }): Promise<void>;
}

export const FINISHED: RunState[] = ['succeeded', 'failed', 'cancelled'];

export function iso(v: string | Date | null | undefined): string | null {
  return v ? new Date(v).toISOString() : null;
}

/** A post as the API shows it. */
export function presentPost(p: store.AddedPost): Post {
  return { seq: p.seq, kind: p.kind as Post['kind'], role: p.role, text: p.text, data: p.data ?? {}, created_at: iso(p.created_at)! };
}

/**
 * The stand-in for the team of a run whose team was archived: no roles (so no memory entry is
 * written), nothing to place. A run's end still needs a team to end it with.
 */
export function archivedTeamOf(run: store.RunRow): RunTeam {
  return { id: run.team_id, name: run.team_name, status: 'archived', surface: 'none', lead: run.lead, rework_rounds: 0, repo_url: null, roles: [] };
}

export function createRunSteps(deps: RunsDeps) {
  const { db } = deps;
  const posted = new EventEmitter();
  posted.setMaxListeners(0);

  const changed = async (trx: Trx, change: RunChange) => {
    if (deps.hooks) await deps.hooks.react('runChanged', trx, systemActor('runs'), change);
  };
  /** The run's agents added posts up to `seq` (inside the transaction that added them). */
  const postsAdded = async (trx: Trx, runId: string, seq: number) => {
    if (deps.hooks) await deps.hooks.react('runPosted', trx, systemActor('runs'), { run_id: runId, seq });
  };

  return {
    /**
     * Tells this process's listeners (the post streams) that a run changed, after the transaction
     * that changed it: with the posts it added, when the caller has them, so that a stream caught
     * up to just before them writes them without reading them back (on the embedded database
     * such a read waits for, and holds up, the run's next write on its one connection).
     */
    published(runId: string, added: store.AddedPost[] = []): void {
      if (posted.listenerCount(runId) === 0) return;
      posted.emit(runId, added.map(presentPost));
    },

    /** Whether this process has a post stream of the run open now: only then are its new posts handed over with the signal. */
    watched(runId: string): boolean {
      return posted.listenerCount(runId) > 0;
    },

    /** In-process signal that a run has new posts, with those its publisher had (the SSE stream also polls, for other processes). */
    onPosts(runId: string, listener: (posts: Post[]) => void): () => void {
      posted.on(runId, listener);
      return () => posted.off(runId, listener);
    },

    changed,
    postsAdded,

    async mustGet(id: string) {
      const run = await store.getRun(db, id);
      if (!run) throw problems.notFound('run', id);
      return run;
    },

    /** The team that ran a run; 409 when it was archived (its name may belong to another team now). */
    async teamOfRun(run: store.RunRow): Promise<RunTeam> {
      const team = await deps.team(run.team_name);
      if (!team || team.id !== run.team_id) throw problems.conflict(`the team of run ${run.id} was archived`);
      return team;
    },

    /** The team of a run's name to end it with (live, else the last archived one), or the archived stand-in. */
    async teamToEnd(run: store.RunRow): Promise<RunTeam> {
      return (await deps.team(run.team_name)) ?? archivedTeamOf(run);
    },

    /** A new task of a role: the first of its conversation in this run gets the team memory block. */
    async addTask(trx: Trx, run: store.RunRow, team: RunTeam, role: string, postSeq: number, input: AgentInput) {
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
    },

    /** Ends a run: its state, its open tasks, and (when the lead's memory says so) an outcome entry. */
    async finish(trx: Trx, run: store.RunRow, team: RunTeam, state: 'succeeded' | 'failed' | 'cancelled', fields: { failure_reason?: string | null; summary?: string; delivery?: Delivery | null }) {
      const lastSeq = await store.finishRun(trx, run.id, state, { failure_reason: fields.failure_reason ?? null, delivery: fields.delivery });
      await store.endOpenTasks(trx, run.id, 'cancelled');
      await changed(trx, { run_id: run.id, team: run.team_name, event: 'finished', state, seq: lastSeq });
      if (deps.traces && run.trace_id) {
        // This end closes the run's latest activation: its first (the root span) or the follow-up that last reopened it.
        const reopening = await store.reopeningAt(trx, run.id, lastSeq);
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
    },
  };
}

export type RunSteps = ReturnType<typeof createRunSteps>;
