/**
 * The run journal: what the engine (the worker) reads and writes while it drives a run: the
 * lease on it, its next work, a turn's start, the agent's events (checked, then posted once
 * each), the turn's outcome, a failure, a notice, the delivery. The routes' side of runs is
 * the runs service (runs.service.ts); the steps both take are in runs.steps.ts.
 */
import { EventEmitter } from 'node:events';
import type { AgentConfig, AgentEvent, AgentInput, TurnOutcome } from '../../agent/protocol.ts';
import { checkEvents } from './event-checks.ts';
import { postOfEvent, transitionOf, type PostDraft, type RunView } from './runs.rules.ts';
import { FINISHED, iso, type RunsDeps, type RunSteps, type RunTeam } from './runs.steps.ts';
import * as store from './runs.store.ts';
import type { Delivery } from './runs.tables.ts';

/** What the host set up for a role's conversation, that its events are checked against. */
export type EventHost = Pick<AgentConfig, 'model' | 'lead' | 'tools' | 'roles' | 'mcp_servers'>;

/** The work the engine does next on a run: the run, its next task, and the team that runs it. */
export interface RunWork {
  run: store.RunRow;
  task: store.TaskRow;
  team: RunTeam;
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

export function createRunJournal(deps: RunsDeps, steps: RunSteps) {
  const { db } = deps;
  const { published, watched, changed, postsAdded, teamOfRun, teamToEnd, addTask, finish } = steps;
  /** This process's listeners told when a turn begins in a sandbox (the gateway: its role's pinned version may have changed). */
  const turnBegun = new EventEmitter();
  turnBegun.setMaxListeners(0);

  /**
   * Fails a run with a failed post and the reason. A run failed for what its agent sent (`refused`)
   * leaves its summary empty, so no team-memory entry carries the agent's words into later prompts.
   */
  async function failWith(runId: string, reason: string, refused: boolean) {
    const before = await store.getRun(db, runId);
    if (!before) return;
    const team = await teamToEnd(before);
    // A run whose team was archived under it cannot be tried again: its failed post says so (the surfaces advise by it).
    const archived = team.status === 'archived' || team.id !== before.team_id;
    const data = { ...(refused ? { refused: true } : {}), ...(archived ? { cause: 'archived' } : {}) };
    const added = await db.transaction().execute(async (trx) => {
      const run = await store.lockRun(trx, runId);
      if (!run || FINISHED.includes(run.state)) return null;
      const post = await store.addPost(trx, runId, { kind: 'failed', role: null, text: reason, ...(Object.keys(data).length ? { data } : {}) }, null, watched(runId));
      await finish(trx, run, team, 'failed', refused ? { failure_reason: reason } : { failure_reason: reason, summary: reason });
      return post.added ? [post.added] : [];
    });
    if (added) published(runId, added);
  }

  return {
    /**
     * Takes (or renews) the lease on driving a run: null while another worker holds an unexpired
     * one. The generation grows with each new owner, so a stale owner can tell it was replaced.
     */
    claim: (runId: string, owner: string, leaseSeconds: number): Promise<number | null> => store.claimRun(db, runId, owner, leaseSeconds),

    /** Gives the lease up (only the owner of that generation can). */
    release: (runId: string, owner: string, generation: number): Promise<void> => store.releaseRun(db, runId, owner, generation),

    /** The run and the task the engine works on next, or null when there is nothing to do. */
    async nextWork(runId: string): Promise<RunWork | null> {
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

    /** In-process signal that a turn began in a sandbox, so what was read of its pinned version is stale. */
    onTurnBegun(listener: (sandboxId: string) => void): () => void {
      turnBegun.on('begun', listener);
      return () => turnBegun.off('begun', listener);
    },

    isActive: async (runId: string) => (await store.getRun(db, runId))?.state === 'running',

    /** Marks a task's turn as begun from the conversation's seq `from` (kept across a takeover). */
    async beginTurn(taskId: string, from: number, sandboxId: string | null) {
      await db.transaction().execute(async (trx) => {
        const t = await store.getTask(trx, taskId);
        if (!t || (t.state !== 'queued' && t.state !== 'running')) return;
        await store.setTask(trx, taskId, { state: 'running', started: true, sandbox_id: sandboxId, ...(t.state === 'queued' || t.turn_from === null ? { turn_from: from } : {}) });
      });
      if (sandboxId) turnBegun.emit('begun', sandboxId);
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
        // The run locked first, then the task and its open calls read as they are under the lock.
        const run = await store.lockRunOfTask(trx, taskId);
        if (!run) return null;
        const read = await store.taskWithOpenCalls(trx, taskId);
        if (!read) return null;
        const { task, calls: known } = read;
        const recorded = task.turn_end_seq !== null && task.turn_end !== null ? { seq: task.turn_end_seq, outcome: task.turn_end as TurnOutcome } : null;
        // What the host recorded stays as recorded: a journal rewritten below events_seen changes nothing.
        const fresh = events.filter((e) => !(Number.isSafeInteger(e?.seq) && e.seq <= task.events_seen));
        if (!fresh.length) return { run, task, refused: null, turnEnd: recorded, published: false, added: [], seen: task.events_seen };
        const checked = checkEvents(
          { role: task.role, lead: host.lead, tools: host.tools, mcpServers: (host.mcp_servers ?? []).map((m) => m.name), roles: host.roles, eventsSeen: task.events_seen, calls: known },
          fresh,
        );
        const accepted = checked.accepted;
        const added: store.AddedPost[] = [];
        if (accepted.length) {
          if (deps.traces && run.trace_id) {
            // Only a task's own span (made at its last turn's end) names the activation it belongs to: looked up only then.
            const activation = checked.turnEnd ? ((await store.reopeningAt(trx, run.id, task.post_seq))?.seq ?? null) : null;
            const context = { trace_id: run.trace_id, run_id: run.id, team: run.team_name, task_id: task.id, role: task.role, model: host.model, conversation: task.conversation, task_started_at: iso(task.started_at ?? task.created_at), activation };
            await deps.traces.recorded(trx, context, accepted);
          }
          let iterations = 0;
          let lastSeq: number | null = null;
          for (const e of accepted) {
            const source = `${task.conversation}:${e.seq}`;
            if (e.type === 'model_call') iterations++;
            if (e.type === 'proposal' && deps.propose) await deps.propose(trx, { run_id: run.id, team: run.team_name, team_id: run.team_id, role: task.role, source, proposal: e.proposal });
            const draft = postOfEvent(task.role, e, e.type === 'tool_result' ? ((checked.calls.get(e.call_id) ?? known.get(e.call_id))?.subject ?? null) : null);
            if (draft && run.state !== 'cancelled') {
              const post = await store.addPost(trx, run.id, draft, source, watched(run.id));
              lastSeq = post.seq;
              if (post.added) added.push(post.added);
            }
          }
          if (lastSeq !== null) await postsAdded(trx, run.id, lastSeq);
          await store.recordTaskEvents(trx, taskId, accepted[accepted.length - 1].seq, iterations, checked.turnEnd ?? null, { conversation: task.conversation, calls: checked.calls });
        }
        return { run, task, refused: checked.refusal, turnEnd: checked.turnEnd ?? recorded, published: accepted.length > 0, added, seen: accepted.length ? accepted[accepted.length - 1].seq : task.events_seen };
      });
      if (!answer) return { refused: null, turnEnd: null, seen: 0 };
      if (answer.published) published(answer.run.id, answer.added);
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
        const run = await store.lockRunOfTask(trx, taskId);
        if (!run) return null;
        const cost = await store.chargeSpend(trx, { run_id: run.id, task_id: taskId, sandbox_id: sandboxId }, lines);
        if (cost === 0) return null;
        await store.addCost(trx, run.id, taskId, cost);
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
      const pushed = await db.transaction().execute(async (trx) => {
        const task = await store.getTask(trx, taskId);
        if (!task) return null;
        const run = await store.lockRun(trx, task.run_id);
        if (!run) return null;
        const source = `push:${push.id}`;
        if ((await store.postSeqOf(trx, run.id, source)) !== null) return null;
        const post = await store.addPost(trx, run.id, { kind: 'artifact', role: task.role, text: `pushed ${branch} at ${push.new_commit}`, data: { branch, commit: push.new_commit } }, source, watched(run.id));
        const delivery: Delivery = { branch, commit: push.new_commit, pull_request: run.delivery?.pull_request ?? null };
        await store.setDelivery(trx, run.id, delivery);
        return { runId: run.id, added: post.added ? [post.added] : [] };
      });
      if (pushed) published(pushed.runId, pushed.added);
    },

    /** Applies a task's turn outcome: the pipeline's next task, a wait for a person, or the run's end. Once per turn. */
    async applyOutcome(taskId: string, outcome: TurnOutcome) {
      const first = await store.getTask(db, taskId);
      const owner = first ? await store.getRun(db, first.run_id) : undefined;
      if (!first || !owner) return;
      const team = await teamOfRun(owner);
      const applied = await db.transaction().execute(async (trx) => {
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
        const added: store.AddedPost[] = [];
        for (const [i, p] of t.posts.entries()) {
          const post = await store.addPost(trx, run.id, p as PostDraft, source(i), watched(run.id));
          seqs.push(post.seq);
          if (post.added) added.push(post.added);
        }
        if (seqs.length) await postsAdded(trx, run.id, seqs[seqs.length - 1]!);
        switch (t.kind) {
          case 'continue': {
            await store.setTask(trx, taskId, { state: t.task_state, outcome, ...(t.task_state === 'done' ? { finished: true } : {}) });
            await store.setReworkUsed(trx, run.id, t.rework_used);
            for (const [i, nt] of t.tasks.entries()) {
              const waiting = nt.input.kind === 'answer' ? await store.waitingTaskOf(trx, run.id, nt.role) : undefined;
              if (waiting) await store.setTask(trx, waiting.id, { state: 'queued', input: nt.input });
              else await addTask(trx, run, team, nt.role, seqs[i] ?? seqs[0], nt.input);
            }
            await deps.advance(trx, run.id);
            break;
          }
          case 'wait':
            await store.setTask(trx, taskId, { state: 'waiting', outcome });
            await store.waitRun(trx, run.id, { role: t.waiting_for.role, kind: t.waiting_for.kind, since: new Date().toISOString() }, seqs[0]);
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
        return { runId: run.id, added };
      });
      if (applied) published(applied.runId, applied.added);
    },

    /** Fails a run for a reason outside the agents (a sandbox that cannot be had, a runtime that keeps dying). */
    async failRun(runId: string, reason: string) {
      await failWith(runId, reason, false);
    },

    /** A notice in the run's conversation (a cold boot, a refused request), once per source. */
    async notice(runId: string, text: string, source: string, data: Record<string, unknown> = {}) {
      const added = await db.transaction().execute(async (trx) => {
        const run = await store.lockRun(trx, runId);
        // Nothing is posted after a cancel.
        if (!run || run.state === 'cancelled') return [];
        const post = await store.addPost(trx, runId, { kind: 'notice', role: null, text, data }, source, watched(runId));
        return post.added ? [post.added] : [];
      });
      published(runId, added);
    },

    /** Names the pull request of a run's delivery (opened, then merged or closed), keeping its branch and commit. */
    async setPullRequest(runId: string, pr: { url: string; number: number | null; state: string | null }) {
      await db.transaction().execute(async (trx) => {
        const run = await store.lockRun(trx, runId);
        if (!run) return;
        const d = run.delivery;
        const delivery: Delivery = { branch: d?.branch ?? null, commit: d?.commit ?? null, pull_request: pr };
        await store.setDelivery(trx, runId, delivery);
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

export type RunJournal = ReturnType<typeof createRunJournal>;
