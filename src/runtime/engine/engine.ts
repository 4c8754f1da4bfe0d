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
  /** The agent runtime's command line inside a sandbox. */
  runtimeArgv: string[];
  /** How often a running turn checks that its run was not cancelled (ms). */
  cancelPollMs?: number;
  /** Times a turn whose runtime died is resumed before the run fails. */
  runtimeRestarts?: number;
  /** Who this worker is, for the run's lease. */
  owner: string;
  /** Seconds a run's lease lasts without renewal (renewed at a third of it). */
  leaseSeconds?: number;
}

export class RuntimeStopped extends Error {}

/** Another worker drives the run now; the job is tried again later (the owner picks new work up before it lets go). */
export class RunBusy extends Error {}

/** Runs the agent runtime with one request; calls `onEvent` for each event line, in order. */
async function runRuntime(sandbox: RoleSandbox, argv: string[], request: AgentRequest, signal: AbortSignal, onEvent: (e: AgentEvent) => Promise<void>): Promise<{ code: number; stderr: string }> {
  const handle = await sandbox.exec({ argv, cwd: '/workspace', signal });
  handle.stdin.end(JSON.stringify(request));
  let stderr = '';
  handle.stderr.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString('utf8')).slice(-4000);
  });
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
    const caught: AgentEvent[] = [];
    const argv = sandbox.runtimeArgv ?? deps.runtimeArgv;
    const replay = await runRuntime(sandbox, argv, { op: 'events', conversation: task.conversation, workspace: config.workspace, after: task.events_seen }, signal, async (e) => void caught.push(e));
    if (replay.code !== 0) throw new RuntimeStopped(`the agent runtime could not read its journal (exit ${replay.code}): ${replay.stderr.trim().slice(-500)}`);
    await runs.recordEvents(task.id, config.model, caught);
    const last = caught.length ? caught[caught.length - 1].seq : task.events_seen;
    const begun = await runs.beginTurn(task.id, last, sandbox.id);
    if (!begun || begun.state !== 'running') return null;
    const thisTurn = caught.filter((e) => e.seq > (begun.turn_from ?? last));
    const ended = thisTurn.find((e) => e.type === 'turn_end');
    if (ended && ended.type === 'turn_end') return ended.outcome;
    // Anything the runtime recorded for this turn (settled calls, its input) means it began: resume it.
    const input: AgentInput = thisTurn.length > 0 ? { kind: 'resume' } : (begun.input as AgentInput);

    // Run the turn; stop it when the run is cancelled or the lease is lost.
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    const watch = setInterval(() => {
      void runs.isActive(run.id).then(
        (active) => active || stop.abort(),
        (err) => logger.warn({ err, run: run.id }, 'could not check whether the run is still active'),
      );
    }, pollMs);
    let outcome: TurnOutcome | null = null;
    let pending: AgentEvent[] = [];
    let result;
    try {
      result = await runRuntime(sandbox, argv, { op: 'turn', conversation: task.conversation, config, input }, stop.signal, async (e) => {
        pending.push(e);
        if (e.type === 'turn_end') outcome = e.outcome;
        // Record before anything is published; a burst is written in one transaction.
        const batch = pending;
        pending = [];
        await runs.recordEvents(task.id, config.model, batch);
      });
    } finally {
      clearInterval(watch);
      signal.removeEventListener('abort', onAbort);
    }
    if (pending.length) await runs.recordEvents(task.id, config.model, pending);
    if (outcome) return outcome;
    if (stop.signal.aborted) return null;
    throw new RuntimeStopped(`the agent runtime of ${task.role} stopped before its turn ended (exit ${result.code})${result.stderr.trim() ? `: ${result.stderr.trim().slice(-500)}` : ''}`);
  }

  /** Drives the run while this worker holds its lease; the lease is renewed, and lost leases stop the work. */
  async function drive(runId: string, jobSignal: AbortSignal): Promise<void> {
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
      await steps(runId, signal);
    } finally {
      clearInterval(renew);
      await runs.release(runId, owner, generation);
    }
  }

  return {
    /**
     * The job's perform: drives a run until it waits, ends, or is no longer ours. After letting
     * the lease go it looks once more for work, so a task that arrived while another job found
     * the run busy is never left waiting.
     */
    async advance(runId: string, signal: AbortSignal): Promise<void> {
      do {
        await drive(runId, signal);
      } while (!signal.aborted && (await runs.nextWork(runId)) !== null);
    },
  };

  /** Runs the run's tasks one turn after another until there is nothing to do. */
  async function steps(runId: string, signal: AbortSignal): Promise<void> {
    let restarts = 0;
    for (;;) {
      if (signal.aborted) return;
      const work = await runs.nextWork(runId);
      if (!work) return;
      let outcome: TurnOutcome | null;
      try {
        outcome = await turn(work, signal);
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof RuntimeStopped && restarts < (deps.runtimeRestarts ?? 2)) {
          restarts++;
          logger.warn({ err, run: runId, task: work.task.id }, 'agent runtime stopped; resuming the turn');
          continue;
        }
        const reason = err instanceof Error ? err.message : String(err);
        logger.error({ err, run: runId, task: work.task.id }, 'run failed outside the agents');
        await runs.failRun(runId, `the ${work.task.role} role could not go on: ${reason}`);
        return;
      }
      if (!outcome) return;
      if (outcome.kind === 'pull_request') {
        // Opening pull requests is the code-host integration's; until it is enabled the agent is told so.
        await runs.requeueTask(work.task.id, { kind: 'tool_result', ok: false, output: 'no code-host integration is enabled, so no pull request can be opened; push the branch and finish naming it' });
        continue;
      }
      await runs.applyOutcome(work.task.id, outcome);
      restarts = 0;
    }
  }
}

export type RunEngine = ReturnType<typeof createRunEngine>;
