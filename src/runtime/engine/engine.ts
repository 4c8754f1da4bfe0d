/**
 * The run engine: performs a run's `run.advance` job. It takes the run's next task, gets the
 * role's sandbox, catches up on the agent's journal (events a worker that died did not record),
 * then runs the agent runtime's turn in the sandbox and records every event before it is
 * published, and applies the turn's outcome (the next role, a question, the end). Everything it
 * writes goes through the runs service, once per event, so a worker killed at any point and the
 * one that takes over neither lose nor repeat a post.
 */
import crypto from 'node:crypto';
import readline from 'node:readline';
import type { Logger } from 'pino';
import type { AgentConfig, AgentEvent, AgentInput, AgentRequest, TurnOutcome } from '../../agent/protocol.ts';
import type { RunsService } from '../../console/runs/runs.service.ts';
import { PlacementError } from '../sandboxes/placement.ts';
import type { ExecHandle, ExecRequest } from '../sandboxes/provider.ts';

/** A role's sandbox as the engine uses it: ready to exec, its workspace prepared for the run. */
export interface RoleSandbox {
  id: string;
  exec(req: ExecRequest): Promise<ExecHandle>;
  /** True when it had to cold-boot and lost its running processes (the spec's "conversations come back as errors"). */
  coldBooted: boolean;
  /** The runtime's command line in this sandbox, when its provider places it elsewhere than `runtimeArgv` says. */
  runtimeArgv?: string[];
}

export interface EngineDeps {
  runs: RunsService;
  logger: Logger;
  /** The agent configuration of a task's role in its run (version fixed at the run's start). */
  configFor(work: NonNullable<Awaited<ReturnType<RunsService['nextWork']>>>): Promise<AgentConfig>;
  /** Places (or wakes) the role's sandbox and prepares its workspace for the run: documents, skills, the repository. */
  sandboxFor(work: NonNullable<Awaited<ReturnType<RunsService['nextWork']>>>, config: AgentConfig): Promise<RoleSandbox>;
  /** Ends the run's hold on the role's sandbox (the run has ended), so the team's next run can have it. */
  releaseSandbox(runId: string, role: string): Promise<void>;
  /** The agent runtime's command line inside a sandbox. */
  runtimeArgv: string[];
  /** How often a running turn checks that its run was not cancelled (ms). */
  cancelPollMs?: number;
  /** How long a runtime told to stop (a cancel, a lost lease) has before it is killed (ms). */
  stopGraceMs?: number;
  /** Times a turn whose runtime died is resumed before the run fails. */
  runtimeRestarts?: number;
  /** The gateway's refusals of a sandbox's requests after `afterId`, not before `since` (the gateway's record). */
  egressRefusals(sandboxId: string, afterId: string, since: Date): Promise<Array<{ id: string; role: string; method: string; host: string; rule: string; reason: string; enforced: boolean }>>;
  /** Who this worker is, for the run's lease. */
  owner: string;
  /** Seconds a run's lease lasts without renewal (renewed at a third of it). */
  leaseSeconds?: number;
  /** Opens the run's pull request through the code-host integration (the agent's open_pull_request); its answer goes back to the agent. */
  openPullRequest?(runId: string, req: { title: string; body: string; head: string | null; base: string | null }): Promise<{ ok: true; url: string; number: number } | { ok: false; reason: string }>;
}

export class RuntimeStopped extends Error {}

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

/**
 * How a running turn is stopped. `cancel` asks the runtime to end the turn `cancelled` (it
 * kills its tools and records a result for every open call); `leave` closes its control
 * channel, so it kills its tools and exits recording nothing (this worker no longer drives the
 * run; the next one reports the interrupted call). A runtime that does neither in time is killed.
 */
interface TurnControl {
  cancel: AbortSignal;
  leave: AbortSignal;
  /** Grace before a runtime that was told to stop is killed (ms). */
  graceMs: number;
}

/** Runs the agent runtime with one request; calls `onEvent` for each event line, in order. */
async function runRuntime(sandbox: RoleSandbox, argv: string[], request: AgentRequest, signal: AbortSignal, onEvent: (e: AgentEvent) => Promise<void>, control?: TurnControl): Promise<{ code: number; stderr: string }> {
  const kill = new AbortController();
  const handle = await sandbox.exec({ argv, cwd: '/workspace', signal: control ? kill.signal : signal });
  let killTimer: NodeJS.Timeout | undefined;
  const killLater = () => {
    killTimer ??= setTimeout(() => kill.abort(), control!.graceMs);
  };
  const onCancel = () => {
    handle.stdin.write(`${JSON.stringify({ op: 'cancel' })}\n`);
    killLater();
  };
  const onLeave = () => {
    handle.stdin.end();
    killLater();
  };
  if (control) {
    // The request's newline keeps stdin open as the control channel.
    handle.stdin.write(`${JSON.stringify(request)}\n`);
    if (control.cancel.aborted) onCancel();
    else control.cancel.addEventListener('abort', onCancel, { once: true });
    if (control.leave.aborted) onLeave();
    else control.leave.addEventListener('abort', onLeave, { once: true });
  } else handle.stdin.end(JSON.stringify(request));
  let stderr = '';
  handle.stderr.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString('utf8')).slice(-4000);
  });
  try {
    const lines = readline.createInterface({ input: handle.stdout, crlfDelay: Infinity });
    for await (const line of lines) {
      if (!line.trim()) continue;
      let e: AgentEvent;
      try {
        e = JSON.parse(line) as AgentEvent;
      } catch {
        continue;
      }
      if (typeof e?.seq === 'number' && typeof e?.type === 'string') await onEvent(e);
    }
    return { code: await handle.exit, stderr };
  } finally {
    clearTimeout(killTimer);
    if (control) {
      control.cancel.removeEventListener('abort', onCancel);
      control.leave.removeEventListener('abort', onLeave);
      if (!handle.stdin.writableEnded) handle.stdin.end();
    }
  }
}

export function createRunEngine(deps: EngineDeps) {
  const { runs, logger } = deps;
  const pollMs = deps.cancelPollMs ?? 1000;

  /** One turn of the task's role; returns its outcome, or null when the run stopped being ours to drive. */
  async function turn(work: NonNullable<Awaited<ReturnType<RunsService['nextWork']>>>, signal: AbortSignal): Promise<TurnOutcome | null> {
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
    const replay = await runRuntime(sandbox, argv, { op: 'events', conversation: task.conversation, workspace: config.workspace, after: from }, signal, async (e) => void caught.push(e));
    if (replay.code !== 0) throw new RuntimeStopped(`the agent runtime could not read its journal (exit ${replay.code}): ${replay.stderr.trim().slice(-500)}`);
    await runs.recordEvents(task.id, config.model, caught);
    const last = caught.length ? caught[caught.length - 1].seq : from;
    const begun = await runs.beginTurn(task.id, last, sandbox.id);
    if (!begun || begun.state !== 'running') return null;
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
    const thisTurn = caught.filter((e) => e.seq > (begun.turn_from ?? last));
    const ended = thisTurn.find((e) => e.type === 'turn_end');
    if (ended && ended.type === 'turn_end') return ended.outcome;
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
    }, pollMs);
    let outcome: TurnOutcome | null = null;
    let pending: AgentEvent[] = [];
    let result;
    try {
      const control = { cancel: stop.signal, leave: signal, graceMs: deps.stopGraceMs ?? 30_000 };
      result = await runRuntime(
        sandbox,
        argv,
        { op: 'turn', conversation: task.conversation, config, input },
        signal,
        async (e) => {
          pending.push(e);
          if (e.type === 'turn_end') outcome = e.outcome;
          // Record before anything is published; a burst is written in one transaction.
          const batch = pending;
          pending = [];
          await runs.recordEvents(task.id, config.model, batch);
        },
        control,
      );
    } finally {
      clearInterval(watch);
    }
    await refusals;
    await postRefusals();
    if (pending.length) await runs.recordEvents(task.id, config.model, pending);
    if (outcome) return outcome;
    if (stop.signal.aborted || signal.aborted) return null;
    throw new RuntimeStopped(`the agent runtime of ${task.role} stopped before its turn ended (exit ${result.code})${result.stderr.trim() ? `: ${result.stderr.trim().slice(-500)}` : ''}`);
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
        const reason = err instanceof Error ? err.message : String(err);
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
