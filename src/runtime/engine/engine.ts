/**
 * The run engine: performs a run's `engine.advance-run` job. It takes the run's next task, gets the
 * role's sandbox, catches up on the agent's journal (events a worker that died did not record),
 * then runs the agent runtime's turn in the sandbox and records every event before it is
 * published, and applies the turn's outcome (the next role, a question, the end). Everything it
 * writes goes through the run journal, once per event, so a worker killed at any point and the
 * one that takes over neither lose nor repeat a post.
 */
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { AgentConfig, AgentEvent, AgentInput, AgentRequest, TurnOutcome } from '../../agent/protocol.ts';
import type { RunJournal, RunWork } from '../../console/runs/runs.journal.ts';
import { PlacementError } from '../sandboxes/placement.ts';
import { SandboxError, type ExecHandle, type ExecRequest } from '../sandboxes/provider.ts';
import { RunFailure } from './failures.ts';
import { createSharedRuntimes, type ChannelControl, type ChannelResult } from './shared-runtime.ts';

/** A role's sandbox as the engine uses it: ready to exec, its workspace prepared for the run. */
export interface RoleSandbox {
  id: string;
  exec(req: ExecRequest): Promise<ExecHandle>;
  /** True when it had to cold-boot and lost its running processes (the spec's "conversations come back as errors"). */
  coldBooted: boolean;
  /** The runtime's command line in this sandbox, when its provider places it elsewhere than `runtimeArgv` says. */
  runtimeArgv?: string[];
  /**
   * Each exec runs in a PID namespace of its own (a `local` sandbox): the long-lived runtime may
   * then kill everything else in its namespace whenever it serves no turn (see src/agent/reap.ts).
   */
  ownPidNamespace?: boolean;
  /** How many processes the sandbox's memory limit has killed so far; null when its provider does not count them. */
  oomKills?(): Promise<number | null>;
}

/** What the engine reads and writes of a run: the run journal, no more. */
export type EngineJournal = Pick<
  RunJournal,
  'claim' | 'release' | 'nextWork' | 'endedRoles' | 'wakeTeamRuns' | 'isActive' | 'beginTurn' | 'recordEvents' | 'chargeSpend' | 'spendCursor' | 'recordPush' | 'applyOutcome' | 'requeueTask' | 'failRun' | 'notice'
>;

export interface EngineDeps {
  runs: EngineJournal;
  logger: Logger;
  /** The agent configuration of a task's role in its run (version fixed at the run's start). */
  configFor(work: RunWork): Promise<AgentConfig>;
  /** Places (or wakes) the role's sandbox and prepares its workspace for the run: documents, skills, the repository. */
  sandboxFor(work: RunWork, config: AgentConfig): Promise<RoleSandbox>;
  /** Ends the run's hold on the role's sandbox (the run has ended), so the team's next run can have it. */
  releaseSandbox(runId: string, role: string): Promise<void>;
  /** The agent runtime's command line inside a sandbox. */
  runtimeArgv: string[];
  /** How often a running turn checks that its run was not cancelled (ms). */
  cancelPollMs?: number;
  /** How long a runtime told to stop (a cancel, a lost lease) has before it is killed (ms). */
  stopGraceMs?: number;
  /** How long a shared runtime that serves nothing lives on (ms). */
  runtimeIdleMs?: number;
  /** Times a turn whose runtime died is resumed before the run fails. */
  runtimeRestarts?: number;
  /** The gateway's refusals of a sandbox's requests after `afterId`, not before `since` (the gateway's record). */
  egressRefusals(sandboxId: string, afterId: string, since: Date): Promise<Array<{ id: string; role: string; method: string; host: string; rule: string; reason: string; enforced: boolean }>>;
  /** The refs a code host accepted from a sandbox's pushes after `afterId`, not before `since` (the gateway's record): the run's delivery. */
  gitPushes(sandboxId: string, afterId: string, since: Date): Promise<Array<{ id: string; ref: string; new_commit: string }>>;
  /** The model proxy's ledger lines of a sandbox's calls after line `afterId`, not before `since`: what a turn costs. */
  modelSpend(sandboxId: string, afterId: string, since: Date): Promise<Array<{ id: string; cost_usd: number }>>;
  /** How long a turn's end waits for the model proxy to write the cost of its last calls (ms). */
  spendWaitMs?: number;
  /** Who this worker is, for the run's lease. */
  owner: string;
  /** Seconds a run's lease lasts without renewal (renewed at a third of it). */
  leaseSeconds?: number;
  /** Opens the run's pull request through the code-host integration (the agent's open_pull_request); its answer goes back to the agent. */
  openPullRequest?(runId: string, req: { title: string; body: string; head: string | null; base: string | null }): Promise<{ ok: true; url: string; number: number } | { ok: false; reason: string }>;
}

export class RuntimeStopped extends Error {}

/** The message of an error of ours, written for people (a run's failure reason may carry it); null for anything else. */
export function humanReason(err: unknown): string | null {
  if (err instanceof RuntimeStopped || err instanceof RunFailure || err instanceof PlacementError || err instanceof SandboxError) return err.message;
  return null;
}

/** The role's sandbox is placed on another sandbox host: that host's worker drives the run (the engine's caller forwards it there). */
export class PlacedElsewhere extends Error {
  readonly hostId: string;
  constructor(hostId: string, message: string) {
    super(message);
    this.hostId = hostId;
    this.name = 'PlacedElsewhere';
  }
}

/** Another worker drives the run now; the job is tried again later (the owner picks new work up before it lets go). */
export class RunBusy extends Error {}

export function createRunEngine(deps: EngineDeps) {
  const { runs, logger } = deps;
  const pollMs = deps.cancelPollMs ?? 1000;
  // One long-lived agent runtime per sandbox serves every request (the journal replay, then the
  // turn); the runtime speaks the shared protocol (`{"op":"serve"}`, src/agent/main.ts).
  const shared = createSharedRuntimes({ logger, idleMs: deps.runtimeIdleMs });
  const graceMs = deps.stopGraceMs ?? 30_000;
  /** Serves one request on the sandbox's runtime; a request not stopped otherwise is left when `signal` aborts (this worker no longer drives the run). */
  const serve = (sandbox: RoleSandbox, argv: string[], request: AgentRequest, signal: AbortSignal, onEvents: (events: AgentEvent[]) => Promise<void>, control?: ChannelControl): Promise<ChannelResult> =>
    shared.request(sandbox, argv, request, onEvents, control ?? { cancel: new AbortController().signal, leave: signal, graceMs });

  /** One turn of the task's role; returns its outcome, or null when the run stopped being ours to drive. */
  async function turn(work: RunWork, signal: AbortSignal): Promise<TurnOutcome | null> {
    const { run, task } = work;
    const config = await deps.configFor(work);
    const sandbox = await deps.sandboxFor(work, config);
    if (sandbox.coldBooted) {
      await runs.notice(run.id, `the ${task.role} sandbox had to start cold (its snapshot could not be used); what was running in it was lost`, `coldboot:${sandbox.id}:${task.id}:${task.events_seen}`);
    }
    // Catch up on what the journal holds beyond what was recorded (a worker that died mid-turn).
    // A turn a worker already began is read from its start, recorded or not: whether it began,
    // and how it ended, are in its events (the recording skips what it already holds).
    const caught: AgentEvent[] = [];
    const from = task.state === 'running' && task.turn_from !== null ? Math.min(task.turn_from, task.events_seen) : task.events_seen;
    const argv = sandbox.runtimeArgv ?? deps.runtimeArgv;
    const oomBefore = await oomCount(sandbox, run.id);
    const replay = await serve(sandbox, argv, { op: 'events', conversation: task.conversation, workspace: config.workspace, after: from }, signal, async (events) => void caught.push(...events));
    if (replay.code !== 0) throw await stopped(sandbox, run.id, task.role, oomBefore, replay, `the agent runtime of the ${task.role} role could not read its journal`);
    // Every event is checked on the host before it is believed (event-checks.ts); a refused one failed the run.
    const caughtUp = await runs.recordEvents(task.id, config, caught);
    if (caughtUp.refused) return null;
    const last = caught.length ? caughtUp.seen : from;
    const begun = await runs.beginTurn(task.id, last, sandbox.id);
    if (!begun || begun.state !== 'running') return null;
    const turnFrom = begun.turn_from ?? last;
    // The gateway's refusals of this task's requests become notices, once per distinct refusal.
    const since = begun.started_at ? new Date(begun.started_at) : new Date();
    let egressCursor = '0';
    const postRefusals = async () => {
      for (;;) {
        const refused = await deps.egressRefusals(sandbox.id, egressCursor, since);
        for (const r of refused) {
          egressCursor = r.id;
          if (!r.enforced) continue;
          const key = crypto.createHash('sha256').update(`${r.method}\n${r.host}\n${r.rule}\n${r.reason}`).digest('hex').slice(0, 24);
          await runs.notice(run.id, `the gateway refused a request of the ${r.role} role to ${r.host}: ${r.reason}`, `egress:${task.conversation}:${key}`, { role: r.role, host: r.host, method: r.method, rule: r.rule });
        }
        if (!refused.length) return;
      }
    };
    await postRefusals();
    // What the task cost and delivered is the host's own record: the model proxy's ledger and the gateway's pushes.
    const started = new Date(begun.started_at ?? Date.now());
    let spendCursor = await runs.spendCursor(sandbox.id);
    let pushCursor = '0';
    let spendLines = 0;
    const collect = async () => {
      for (;;) {
        const lines = await deps.modelSpend(sandbox.id, spendCursor, started);
        if (!lines.length) break;
        await runs.chargeSpend(task.id, sandbox.id, lines);
        spendCursor = lines[lines.length - 1].id;
        spendLines += lines.length;
      }
      for (;;) {
        const pushes = await deps.gitPushes(sandbox.id, pushCursor, started);
        if (!pushes.length) break;
        for (const p of pushes) await runs.recordPush(task.id, p);
        pushCursor = pushes[pushes.length - 1].id;
      }
    };
    await collect();
    const thisTurn = caught.filter((e) => e.seq > turnFrom);
    // Only a turn end the host accepted and recorded counts (a journal rewritten after the fact changes nothing).
    if (caughtUp.turnEnd && caughtUp.turnEnd.seq > turnFrom) return caughtUp.turnEnd.outcome;
    // Anything the runtime recorded for this turn (settled calls, its input) means it began: resume it.
    const input: AgentInput = thisTurn.length > 0 ? { kind: 'resume' } : (begun.input as AgentInput);

    // Run the turn; cancel it when the run is cancelled, leave it when the lease is lost or the worker stops.
    const stop = new AbortController();
    let refusals = Promise.resolve();
    const watch = setInterval(() => {
      void runs.isActive(run.id).then(
        (active) => active || stop.abort(),
        (err) => logger.warn({ err, run: run.id }, 'could not check whether the run is still active'),
      );
      // One look at a time: a slow database must not pile them up.
      refusals = refusals.then(postRefusals).catch((err) => logger.warn({ err, run: run.id }, 'could not read the gateway refusals of the run'));
      refusals = refusals.then(collect).catch((err) => logger.warn({ err, run: run.id }, 'could not read the cost and pushes of the run'));
    }, pollMs);
    let outcome: TurnOutcome | null = null;
    let refused = false;
    let replies = 0;
    const record = async (batch: AgentEvent[]) => {
      const rec = await runs.recordEvents(task.id, config, batch);
      if (rec.refused) {
        // The run failed saying why; the runtime is stopped and nothing more of this turn is believed.
        refused = true;
        stop.abort();
      } else if (rec.turnEnd && rec.turnEnd.seq > turnFrom) outcome = rec.turnEnd.outcome;
    };
    let result;
    const oomAtStart = await oomCount(sandbox, run.id);
    try {
      const control = { cancel: stop.signal, leave: signal, graceMs };
      result = await serve(
        sandbox,
        argv,
        { op: 'turn', conversation: task.conversation, config, input },
        signal,
        async (events) => {
          if (refused) return;
          for (const e of events) if (e.type === 'model_reply') replies++;
          // Record before anything is published; a burst is written in one transaction.
          await record(events);
        },
        control,
      );
    } finally {
      clearInterval(watch);
    }
    await refusals;
    await postRefusals();
    // The proxy writes a call's cost just after its answer: the turn's end waits (bounded) for the lines of the replies it saw.
    const deadline = Date.now() + (deps.spendWaitMs ?? 10_000);
    for (;;) {
      await collect();
      if (spendLines >= replies || Date.now() >= deadline || signal.aborted) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    if (refused) return null;
    if (outcome) return outcome;
    if (stop.signal.aborted || signal.aborted) return null;
    throw await stopped(sandbox, run.id, task.role, oomAtStart, result, `the agent runtime of the ${task.role} role stopped before its turn ended`);
  }

  /** The sandbox's count of processes its memory limit killed, or null when its provider does not say (or cannot now). */
  async function oomCount(sandbox: RoleSandbox, runId: string): Promise<number | null> {
    if (!sandbox.oomKills) return null;
    try {
      return await sandbox.oomKills();
    } catch (err) {
      logger.warn({ err, run: runId, sandbox: sandbox.id }, 'could not read the sandbox\'s out-of-memory count');
      return null;
    }
  }

  /**
   * Why a runtime stopped, for people: the sandbox ran out of memory when its count of OOM kills
   * rose meanwhile; otherwise its exit code. Its stderr is the sandbox's text: it goes to the
   * log with the run's id, never into the reason.
   */
  async function stopped(sandbox: RoleSandbox, runId: string, role: string, oomBefore: number | null, result: { code: number | null; stderr: string }, what: string): Promise<RuntimeStopped> {
    const oomAfter = oomBefore === null ? null : await oomCount(sandbox, runId);
    logger.warn({ run: runId, role, sandbox: sandbox.id, code: result.code, stderr: result.stderr.trim().slice(-2000), oom_kills: oomAfter }, 'the agent runtime stopped early');
    if (oomBefore !== null && oomAfter !== null && oomAfter > oomBefore) {
      return new RuntimeStopped(`the ${role} sandbox ran out of memory, and its agent runtime was killed; raise the memory of the role's environment, or give the team a lighter task`);
    }
    const how = result.code === null ? 'it did not exit when told to, and was abandoned' : `exit code ${result.code}`;
    return new RuntimeStopped(`${what} (${how}); the service log has its last output under run ${runId}`);
  }

  /**
   * Drives the run while this worker holds its lease; the lease is renewed, and lost leases stop
   * the work. True when the run waits for a sandbox; the host to forward it to when another host must drive it.
   */
  async function drive(runId: string, jobSignal: AbortSignal): Promise<boolean | { forwardTo: string }> {
    const lease = deps.leaseSeconds ?? 30;
    // One name per drive, not per worker: two jobs of one run in the same worker must not both drive it.
    const owner = `${deps.owner}:${crypto.randomUUID()}`;
    const generation = await runs.claim(runId, owner, lease);
    if (generation === null) throw new RunBusy(`run ${runId} is driven by another worker`);
    const lost = new AbortController();
    const signal = AbortSignal.any([jobSignal, lost.signal]);
    const renew = setInterval(() => {
      void runs.claim(runId, owner, lease).then(
        (g) => g === generation || lost.abort(),
        (err) => logger.warn({ err, run: runId }, 'could not renew the run lease'),
      );
    }, (lease * 1000) / 3);
    try {
      const blocked = await steps(runId, signal);
      // An ended run holds no sandbox: a role's replicas take a bounded number of runs at once,
      // and a run of the team that waited for one of them goes on.
      const ended = signal.aborted ? null : await runs.endedRoles(runId);
      if (ended) {
        for (const role of ended) await deps.releaseSandbox(runId, role);
        await runs.wakeTeamRuns(runId);
      }
      return blocked;
    } finally {
      clearInterval(renew);
      await runs.release(runId, owner, generation);
    }
  }

  return {
    /** Stops the shared runtimes (a turn still served by one ends as it exits). */
    stop(): void {
      shared.stopAll();
    },
    /**
     * The job's perform: drives a run until it waits, ends, or is no longer ours. After letting
     * the lease go it looks once more for work, so a task that arrived while another job found
     * the run busy is never left waiting. Answers the host that must drive the run from here
     * (its role's sandbox is placed there), with the run's lease already let go; else null.
     */
    async advance(runId: string, signal: AbortSignal): Promise<{ forwardTo: string } | null> {
      let blocked: boolean | { forwardTo: string } = false;
      do {
        blocked = await drive(runId, signal);
        if (typeof blocked === 'object') return blocked;
      } while (!blocked && !signal.aborted && (await runs.nextWork(runId)) !== null);
      return null;
    },
  };

  /** Runs the run's tasks one turn after another until there is nothing to do; true when the next one waits for a sandbox of its role, a host's id when it runs on another host. */
  async function steps(runId: string, signal: AbortSignal): Promise<boolean | { forwardTo: string }> {
    let restarts = 0;
    for (;;) {
      if (signal.aborted) return false;
      const work = await runs.nextWork(runId);
      if (!work) return false;
      let outcome: TurnOutcome | null;
      try {
        outcome = await turn(work, signal);
      } catch (err) {
        if (signal.aborted) return false;
        if (err instanceof PlacedElsewhere) {
          logger.info({ run: runId, task: work.task.id, role: work.task.role, host: err.hostId }, 'the role\'s sandbox is placed on another host; its worker drives the run from here');
          return { forwardTo: err.hostId };
        }
        if (err instanceof PlacementError && err.code === 'full') {
          // Every sandbox of the role is busy with other runs of the team: this run waits, its task
          // queued, until one of them ends (which queues this run's engine again), or a person cancels it.
          await runs.notice(runId, `${err.message}; this run goes on when another run of the team ends`, `full:${work.task.id}:${work.task.events_seen}`);
          return true;
        }
        if (err instanceof PlacementError && err.code === 'wait') {
          // No host has room now: the run waits in line; a host that makes room queues it again.
          await runs.notice(runId, err.message, `wait:${work.task.id}:${work.task.events_seen}`);
          return true;
        }
        if (err instanceof RuntimeStopped && restarts < (deps.runtimeRestarts ?? 2)) {
          restarts++;
          logger.warn({ err, run: runId, task: work.task.id }, 'agent runtime stopped; resuming the turn');
          continue;
        }
        // Only our own errors' messages are written for people; anything else (a database
        // error, a bug) is in the log under the run's id, and the reason says so.
        const reason = humanReason(err) ?? `something went wrong in the service; the service log has the details under run ${runId}`;
        logger.error({ err, run: runId, task: work.task.id }, 'run failed outside the agents');
        await runs.failRun(runId, `the ${work.task.role} role could not go on: ${reason}`);
        return false;
      }
      if (!outcome) return false;
      if (outcome.kind === 'pull_request') {
        // Opening pull requests is the code-host integration's; without it the agent is told so.
        const opened = deps.openPullRequest
          ? await deps.openPullRequest(runId, { title: outcome.title, body: outcome.body, head: outcome.head, base: outcome.base })
          : { ok: false as const, reason: 'no code-host integration is enabled, so no pull request can be opened; push the branch and finish naming it' };
        await runs.requeueTask(work.task.id, opened.ok ? { kind: 'tool_result', ok: true, output: `opened pull request #${opened.number}: ${opened.url}` } : { kind: 'tool_result', ok: false, output: opened.reason });
        continue;
      }
      await runs.applyOutcome(work.task.id, outcome);
      restarts = 0;
    }
  }
}

export type RunEngine = ReturnType<typeof createRunEngine>;
