/**
 * One long-lived agent runtime per sandbox, serving every request of this worker in it (the
 * journal replays and the turns of every run the sandbox works on), each on a channel of its own
 * (`{"op":"serve"}`, see src/agent/main.ts). Starting Node for each request cost most of a turn's
 * CPU and, with a process per active turn, most of the host's memory.
 *
 * The runtime starts on the first request, stops once it has served nothing for `idleMs` (so an
 * idle sandbox can sleep: the sandbox host never freezes one with an exec under way), and is
 * started again by the next request after it died: a request it was serving ends with its exit
 * code, which the engine treats as a runtime that stopped (the turn is resumed).
 *
 * Its stdout is untrusted (channel.ts): every line is bounded and
 * must be a channel's event or end. A line that names no channel cannot be told apart from a
 * tool's writing into the runtime's stdout: the runtime is killed and every request it served
 * ends with ChannelViolation; a bad event on a channel ends that channel's request so.
 */
import type { Logger } from 'pino';
import type { AgentEvent, AgentRequest } from '../../agent/protocol.ts';
import type { ExecHandle } from '../sandboxes/provider.ts';
import { ChannelViolation, MAX_EVENT_BYTES, readLines } from './channel.ts';
import type { RoleSandbox } from './engine.ts';

/** What a request came to: its channel's exit code (null when the runtime was killed before it said), and the tail of the runtime's stderr. */
export interface ChannelResult {
  code: number | null;
  stderr: string;
}

/** How a running turn is stopped (the engine's TurnControl): `cancel` ends it `cancelled`, `leave` ends it recording nothing. */
export interface ChannelControl {
  cancel: AbortSignal;
  leave: AbortSignal;
  graceMs: number;
}

/** Bytes of events read but not yet handled, over every channel, before the runtime's stdout is paused (one event more may be read). */
const MAX_QUEUED_BYTES = 16 * 1024 * 1024;

/** How long a runtime told to stop (its stdin ended) has before it is killed (ms). */
const STOP_GRACE_MS = 10_000;

interface Channel {
  queue: Array<{ event: AgentEvent; bytes: number }>;
  /** Handles the events that came since the last call, in order (the engine records them in one transaction). */
  onEvents: (events: AgentEvent[]) => Promise<void>;
  /** The handling of the queue, one batch after another. */
  handling: Promise<void>;
  /** A handling of the queue is chained and has not taken its batch yet. */
  scheduled: boolean;
  failure: Error | null;
  done: (r: ChannelResult) => void;
  fail: (err: Error) => void;
  ended: boolean;
}

interface Runtime {
  handle: ExecHandle;
  kill: AbortController;
  channels: Map<number, Channel>;
  stderr: string;
  exited: boolean;
  idle: NodeJS.Timeout | null;
}

export interface SharedRuntimes {
  /** Serves one request on the sandbox's runtime (started if need be); `onEvent` gets its events in order. */
  request(sandbox: RoleSandbox, argv: string[], request: AgentRequest, onEvents: (events: AgentEvent[]) => Promise<void>, control?: ChannelControl): Promise<ChannelResult>;
  /** Ends every runtime (their requests end as the runtimes exit). */
  stopAll(): void;
}

export function createSharedRuntimes(opts: { logger: Logger; idleMs?: number }): SharedRuntimes {
  const idleMs = opts.idleMs ?? 5_000;
  const runtimes = new Map<string, Promise<Runtime>>();
  let nextChannel = 1;
  let queued = 0;
  let drained: (() => void) | null = null;

  function endAll(rt: Runtime, violation: Error) {
    for (const [ch, c] of rt.channels) {
      rt.channels.delete(ch);
      c.failure ??= violation;
      settle(rt, c, null);
    }
  }

  function send(rt: Runtime, ch: number, o: object) {
    if (!rt.exited && !rt.handle.stdin.writableEnded) rt.handle.stdin.write(`${JSON.stringify({ ch, ...o })}\n`);
  }

  /** Ends a channel once what it queued is handled: with its failure, else its code. */
  function settle(rt: Runtime, c: Channel, code: number | null) {
    if (c.ended) return;
    c.ended = true;
    void c.handling.then(() => (c.failure ? c.fail(c.failure) : c.done({ code, stderr: rt.stderr })));
  }

  /** The end of its stdin stops a runtime (as a worker that went away would); one that does not stop at that is killed. */
  function stop(rt: Runtime) {
    rt.handle.stdin.end();
    setTimeout(() => rt.exited || rt.kill.abort(), STOP_GRACE_MS).unref();
  }

  function idleCheck(sandboxId: string, rt: Runtime) {
    if (rt.idle) clearTimeout(rt.idle);
    rt.idle = null;
    if (rt.channels.size || rt.exited) return;
    rt.idle = setTimeout(() => {
      if (rt.channels.size || rt.exited) return;
      runtimes.delete(sandboxId);
      stop(rt);
    }, idleMs);
    rt.idle.unref();
  }

  async function start(sandbox: RoleSandbox, argv: string[]): Promise<Runtime> {
    const kill = new AbortController();
    const handle = await sandbox.exec({ argv, cwd: '/workspace', signal: kill.signal });
    const rt: Runtime = { handle, kill, channels: new Map(), stderr: '', exited: false, idle: null };
    const noop = () => {};
    handle.stdin.on('error', noop);
    handle.stdout.on('error', noop);
    handle.stderr.on('error', noop);
    handle.stderr.on('data', (c: Buffer) => {
      rt.stderr = (rt.stderr + c.toString('utf8')).slice(-4000);
    });
    // Alone in its own PID namespace, the runtime kills whatever runs there while it serves no turn.
    handle.stdin.write(`${JSON.stringify({ op: 'serve', ...(sandbox.ownPidNamespace ? { sweep: true } : {}) })}\n`);
    const gone = (code: number | null) => {
      // The next request starts a new runtime (runtimeOf passes over one that exited).
      rt.exited = true;
      if (rt.idle) clearTimeout(rt.idle);
      for (const [ch, c] of rt.channels) {
        rt.channels.delete(ch);
        settle(rt, c, code);
      }
    };
    handle.exit.then(
      (code) => {
        if (rt.channels.size) opts.logger.warn({ sandbox: sandbox.id, code, stderr: rt.stderr.trim().slice(-2000) }, 'the agent runtime of a sandbox stopped while it served requests');
        // What it wrote before it exited is read first (a quiet spell at most).
        reader.drain(2_000);
      },
      () => reader.drain(2_000),
    );
    const reader = readLines(handle.stdout, MAX_EVENT_BYTES);
    void (async () => {
      let violation: Error | null = null;
      try {
        for await (const line of reader.lines) {
          const msg = messageOf(line);
          if (!msg) continue;
          const c = rt.channels.get(msg.ch);
          if (!c) continue;
          if ('exit' in msg) {
            rt.channels.delete(msg.ch);
            settle(rt, c, msg.exit);
            idleCheck(sandbox.id, rt);
            continue;
          }
          if (msg.event instanceof Error) {
            // This channel broke the protocol: its turn is left (its tools killed) and ends with the violation.
            c.failure ??= msg.event;
            rt.channels.delete(msg.ch);
            send(rt, msg.ch, { op: 'leave' });
            settle(rt, c, null);
            idleCheck(sandbox.id, rt);
            continue;
          }
          const ch = msg.ch;
          queued += line.length;
          c.queue.push({ event: msg.event, bytes: line.length });
          // What came while the last batch was handled is handled as one, and so is what came in one
          // read (the events of one sync of the journal, written at once): the batch is taken after
          // the lines already read are queued.
          if (!c.scheduled) {
            c.scheduled = true;
            c.handling = c.handling.then(afterQueued).then(async () => {
              c.scheduled = false;
              const batch = c.queue.splice(0);
              if (!batch.length) return;
              for (const b of batch) queued -= b.bytes;
              if (queued < MAX_QUEUED_BYTES / 2 && drained) {
                const d = drained;
                drained = null;
                d();
              }
              if (c.failure) return;
              try {
                await c.onEvents(batch.map((b) => b.event));
              } catch (err) {
                // What cannot be handled (recorded) ends the request: its turn is left (its tools killed, nothing more recorded).
                c.failure ??= err as Error;
                if (rt.channels.get(ch) === c) {
                  rt.channels.delete(ch);
                  send(rt, ch, { op: 'leave' });
                  settle(rt, c, null);
                  idleCheck(sandbox.id, rt);
                }
              }
            });
          }
          // A slow consumer holds the runtime's output back instead of buffering without bound.
          if (queued >= MAX_QUEUED_BYTES) await new Promise<void>((r) => (drained = r));
        }
      } catch (err) {
        violation = err as Error;
        kill.abort();
      }
      handle.stdout.destroy();
      handle.stderr.destroy();
      const code = await Promise.race([handle.exit.catch(() => null), new Promise<null>((r) => setTimeout(() => r(null), 10_000).unref())]);
      if (violation) endAll(rt, violation);
      gone(code);
    })();
    return rt;
  }

  async function runtimeOf(sandbox: RoleSandbox, argv: string[]): Promise<Runtime> {
    const have = runtimes.get(sandbox.id);
    if (have) {
      const rt = await have.catch(() => null);
      if (rt && !rt.exited) return rt;
    }
    const starting = start(sandbox, argv);
    runtimes.set(sandbox.id, starting);
    try {
      return await starting;
    } catch (err) {
      if (runtimes.get(sandbox.id) === starting) runtimes.delete(sandbox.id);
      throw err;
    }
  }

  const sendTo = send;
  return {
    async request(sandbox, argv, request, onEvents, control) {
      const rt = await runtimeOf(sandbox, argv);
      const ch = nextChannel++;
      let killTimer: NodeJS.Timeout | undefined;
      const result = new Promise<ChannelResult>((done, fail) => {
        rt.channels.set(ch, { queue: [], onEvents, handling: Promise.resolve(), scheduled: false, failure: null, done, fail, ended: false });
      });
      if (rt.idle) clearTimeout(rt.idle);
      rt.idle = null;
      const send = (o: object) => sendTo(rt, ch, o);
      send({ request });
      // A channel that does not end when told to: it is left (its tools killed, nothing more recorded), and a runtime that does not even answer that is killed.
      const leaveLater = () => {
        killTimer ??= setTimeout(() => {
          send({ op: 'leave' });
          killTimer = setTimeout(() => rt.kill.abort(), control!.graceMs);
        }, control!.graceMs);
      };
      const onCancel = () => (send({ op: 'cancel' }), leaveLater());
      const onLeave = () => {
        send({ op: 'leave' });
        killTimer ??= setTimeout(() => rt.kill.abort(), control!.graceMs);
      };
      if (control) {
        if (control.cancel.aborted) onCancel();
        else control.cancel.addEventListener('abort', onCancel, { once: true });
        if (control.leave.aborted) onLeave();
        else control.leave.addEventListener('abort', onLeave, { once: true });
      }
      try {
        return await result;
      } finally {
        clearTimeout(killTimer);
        control?.cancel.removeEventListener('abort', onCancel);
        control?.leave.removeEventListener('abort', onLeave);
        idleCheck(sandbox.id, rt);
      }
    },
    stopAll() {
      for (const [id, p] of runtimes) {
        runtimes.delete(id);
        void p.then(stop, () => {});
      }
    },
  };
}

/** Resolves once the lines of the chunk being read are queued (after the reader's microtasks). */
const afterQueued = () => new Promise<void>((resolve) => setImmediate(resolve));

type Message = { ch: number; exit: number } | { ch: number; event: AgentEvent | ChannelViolation };

/**
 * One line of the shared runtime's stdout: a channel's event or end. A blank line is nothing; a
 * line that names no channel is ChannelViolation (thrown: it cannot be told whose it is); a bad
 * event on a channel is that channel's ChannelViolation.
 */
function messageOf(line: Buffer): Message | null {
  let blank = true;
  for (const b of line) if (b !== 32 && b !== 9 && b !== 13) blank = false;
  if (blank) return null;
  let o: unknown;
  try {
    o = JSON.parse(line.toString('utf8'));
  } catch {
    throw new ChannelViolation('the agent runtime sent something that is not a JSON event on its control channel; the run was stopped so it cannot harm the service');
  }
  const m = o as { ch?: unknown; exit?: unknown; event?: unknown } | null;
  if (!m || typeof m !== 'object' || Array.isArray(m) || typeof m.ch !== 'number') {
    throw new ChannelViolation('the agent runtime sent a message without a sequence number and type on its control channel; the run was stopped so it cannot harm the service');
  }
  if (typeof m.exit === 'number') return { ch: m.ch, exit: m.exit };
  const e = m.event as { seq?: unknown; type?: unknown } | null;
  if (!e || typeof e !== 'object' || Array.isArray(e) || typeof e.seq !== 'number' || typeof e.type !== 'string') {
    return { ch: m.ch, event: new ChannelViolation('the agent runtime sent a message without a sequence number and type on its control channel; the run was stopped so it cannot harm the service') };
  }
  return { ch: m.ch, event: e as AgentEvent };
}
