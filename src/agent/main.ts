/**
 * The agent runtime's entry point, run inside a sandbox by the worker:
 * `node src/agent/main.ts` with one JSON request on stdin (see protocol.ts). Every journal
 * event is written to stdout as a JSON line once it is on disk; the process exits 0 after the
 * turn's `turn_end` (or the replay), 2 on a bad request. SIGTERM cancels the turn: running tools
 * are killed and the turn ends `cancelled`.
 *
 * When the request ends with a newline, stdin stays open as the worker's control channel: a
 * `{"op":"cancel"}` line cancels the turn like SIGTERM (the worker cannot signal a process
 * inside the sandbox's namespaces), and the end of stdin means the worker is gone (killed, or
 * its lease lost): the runtime kills its tools and exits at once WITHOUT recording anything,
 * so the worker that takes the run over finds the journal as the kill left it and reports the
 * started call as interrupted, instead of racing a second writer on the same journal.
 *
 * `{"op":"serve"}` makes it the sandbox's long-lived runtime instead: one process serving every
 * request of the worker, each on a channel of its own (see serveMany; the engine's side is
 * src/runtime/engine/shared-runtime.ts).
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { Journal } from './journal.ts';
import { runTurn } from './loop.ts';
import type { AgentEvent, AgentRequest } from './protocol.ts';
import { endAllBut, endTurn, TURN_MARK } from './reap.ts';

const CONVERSATION = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Where a conversation's journal lives in the workspace. */
export function journalPath(workspace: string, conversation: string): string {
  return path.join(workspace, '.crewhouse', 'conversations', `${conversation}.jsonl`);
}

/** Exit code of a runtime that stopped because its worker went away (nothing recorded). */
export const WORKER_GONE_EXIT = 3;

/** Reads the request: stdin up to its first newline (the control channel stays open) or its end. */
async function readRequest(): Promise<{ request: AgentRequest | ServeRequest; control: boolean }> {
  const chunks: Buffer[] = [];
  let control = false;
  await new Promise<void>((resolve, reject) => {
    const onData = (c: Buffer) => {
      const nl = c.indexOf(10);
      if (nl < 0) return void chunks.push(c);
      chunks.push(c.subarray(0, nl));
      control = true;
      process.stdin.off('data', onData).off('end', onEnd).pause();
      const rest = c.subarray(nl + 1);
      if (rest.length) process.stdin.unshift(rest);
      resolve();
    };
    const onEnd = () => resolve();
    process.stdin.on('data', onData).once('end', onEnd).once('error', reject);
  });
  const text = Buffer.concat(chunks).toString('utf8');
  if (control) {
    const o = JSON.parse(text) as { op?: unknown; sweep?: unknown } | null;
    if (o?.op === 'serve') return { request: { op: 'serve', sweep: o.sweep === true }, control };
  }
  return { request: parse(text), control };
}

function parse(text: string): AgentRequest {
  const parsed = JSON.parse(text) as AgentRequest;
  if (!parsed || (parsed.op !== 'turn' && parsed.op !== 'events')) throw new Error('op must be "turn" or "events"');
  if (typeof parsed.conversation !== 'string' || !CONVERSATION.test(parsed.conversation)) throw new Error('conversation must be a simple name');
  return parsed;
}

/** Watches the control channel: a cancel line cancels the turn; the channel's end is the worker gone. */
function watchControl(cancel: () => void, gone: () => void): void {
  let buffered = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (c: string) => {
    buffered += c;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      try {
        if ((JSON.parse(line) as { op?: string }).op === 'cancel') cancel();
      } catch {
        // Not a control message: ignored.
      }
    }
  });
  process.stdin.once('end', gone);
  process.stdin.once('error', gone);
  process.stdin.resume();
}

/** The events of one sync, a line each, in one write (the worker reads them as one batch). */
function emit(events: readonly AgentEvent[]): void {
  process.stdout.write(events.map((e) => `${JSON.stringify(e)}\n`).join(''));
}

/** `{"op":"serve"}`: be the sandbox's long-lived runtime; `sweep`: it is alone in a PID namespace of its own (a `local` sandbox's exec). */
interface ServeRequest {
  op: 'serve';
  sweep: boolean;
}

/** How one request is told to stop: `cancel` ends a turn `cancelled` (recorded); `gone` kills its tools and records nothing more. */
interface Stops {
  cancel: AbortSignal;
  gone: AbortSignal;
}

/**
 * Serves one request: a replay of the journal, or a turn whose events are told to `out` once on
 * disk. When `stops.gone` aborts, the tools are killed and the journal is sealed at once: nothing
 * more of the turn is recorded (the request then rejects with WorkerGone).
 */
async function serve(request: AgentRequest, out: (events: readonly AgentEvent[]) => void, stops: Stops, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const workspace = request.op === 'turn' ? request.config.workspace : request.workspace;
  const journal = Journal.open(journalPath(workspace, request.conversation));
  if (request.op === 'events') {
    try {
      for (const e of journal.after(request.after)) out([e]);
    } finally {
      journal.close();
    }
    return;
  }
  const sealing = () => journal.seal();
  stops.gone.addEventListener('abort', sealing, { once: true });
  if (stops.gone.aborted) journal.seal();
  // The tools listen on `tools`: aborting it kills their process groups synchronously.
  const tools = AbortSignal.any([stops.cancel, stops.gone]);
  journal.onDurable(out);
  // Loaded only for a role with MCP servers: the SDK is not in every image (the microVM's minimal one).
  let mcp: import('./mcp.ts').McpToolbox | undefined;
  try {
    mcp = request.config.mcp_servers?.length ? await (await import('./mcp.ts')).McpToolbox.open(request.config.mcp_servers) : undefined;
    await runTurn(request.config, journal, request.input, { signal: tools, stream: true, env, mcp });
  } finally {
    stops.gone.removeEventListener('abort', sealing);
    await mcp?.close();
    journal.close();
  }
}

async function main(): Promise<number> {
  let request: AgentRequest | ServeRequest;
  let control = false;
  try {
    ({ request, control } = await readRequest());
  } catch (err) {
    process.stderr.write(`agent runtime: bad request: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
  if (request.op === 'serve') return serveMany(request.sweep);
  const cancel = new AbortController();
  process.on('SIGTERM', () => cancel.abort());
  process.on('SIGINT', () => cancel.abort());
  const gone = new AbortController();
  if (control) {
    watchControl(
      () => cancel.abort(),
      () => {
        gone.abort();
        process.exit(WORKER_GONE_EXIT);
      },
    );
  }
  await serve(request, emit, { cancel: cancel.signal, gone: gone.signal });
  return 0;
}

/**
 * The long-lived runtime of a sandbox (`{"op":"serve"}`): one process serves every request of
 * the worker, each on a channel of its own, so a turn starts no Node. In: `{"ch":N,"request":R}`
 * starts request R on channel N, `{"ch":N,"op":"cancel"}` cancels its turn, `{"ch":N,"op":"leave"}`
 * kills its tools and records nothing more of it. Out: `{"ch":N,"event":E}` per event once it is on
 * disk, and `{"ch":N,"exit":C}` at its end (0 done, 1 failed, 2 bad request, 3 left). The end of
 * stdin is the worker gone: every channel is left, and the process exits at once.
 *
 * A channel's end is said only after what its tools started is killed (reap.ts: marked with the
 * turn's token, their groups, their descendants); with `sweep`, once no channel is served,
 * everything else in the exec's PID namespace is killed too (what escaped every mark).
 */
async function serveMany(sweep: boolean): Promise<number> {
  const channels = new Map<number, { cancel: AbortController; gone: AbortController; conversation: string; ended: boolean; token: string }>();
  const busy = new Set<string>();
  const write = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const finish = (ch: number, code: number) => {
    const c = channels.get(ch);
    if (!c || c.ended) return;
    c.ended = true;
    channels.delete(ch);
    busy.delete(c.conversation);
    endTurn(c.token);
    if (sweep && !channels.size) endAllBut();
    write({ ch, exit: code });
  };
  const start = (ch: number, raw: unknown) => {
    let request: AgentRequest;
    try {
      request = parse(JSON.stringify(raw));
    } catch (err) {
      process.stderr.write(`agent runtime: bad request on channel ${ch}: ${err instanceof Error ? err.message : String(err)}\n`);
      return void write({ ch, exit: 2 });
    }
    // One writer per journal: a conversation already served is refused.
    if (channels.has(ch) || busy.has(request.conversation)) {
      process.stderr.write(`agent runtime: channel ${ch} or conversation ${request.conversation} is already in use\n`);
      return void write({ ch, exit: 2 });
    }
    const c = { cancel: new AbortController(), gone: new AbortController(), conversation: request.conversation, ended: false, token: crypto.randomBytes(16).toString('hex') };
    channels.set(ch, c);
    busy.add(request.conversation);
    serve(request, (events) => c.ended || process.stdout.write(events.map((event) => `${JSON.stringify({ ch, event })}\n`).join('')), { cancel: c.cancel.signal, gone: c.gone.signal }, { ...process.env, [TURN_MARK]: c.token }).then(
      () => finish(ch, 0),
      (err: unknown) => {
        if (!c.gone.signal.aborted) process.stderr.write(`agent runtime: channel ${ch} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
        finish(ch, c.gone.signal.aborted ? WORKER_GONE_EXIT : 1);
      },
    );
  };
  const leave = (ch: number) => {
    const c = channels.get(ch);
    if (!c) return;
    c.gone.abort();
    finish(ch, WORKER_GONE_EXIT);
  };
  process.on('SIGTERM', () => channels.forEach((c) => c.cancel.abort()));
  process.on('SIGINT', () => channels.forEach((c) => c.cancel.abort()));
  let buffered = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk: string) => {
    buffered += chunk;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      if (!line) continue;
      let msg: { ch?: unknown; op?: unknown; request?: unknown };
      try {
        msg = JSON.parse(line) as typeof msg;
      } catch {
        continue;
      }
      const ch = msg?.ch;
      if (typeof ch !== 'number' || !Number.isSafeInteger(ch)) continue;
      if (msg.request !== undefined) start(ch, msg.request);
      else if (msg.op === 'cancel') channels.get(ch)?.cancel.abort();
      else if (msg.op === 'leave') leave(ch);
    }
  });
  await new Promise<void>((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('error', () => resolve());
    process.stdin.resume();
  });
  // The worker is gone: every turn's tools are killed and nothing more is recorded.
  for (const ch of [...channels.keys()]) leave(ch);
  return WORKER_GONE_EXIT;
}

if (import.meta.main) {
  const code = await main();
  // Let stdout drain before leaving.
  process.stdout.write('', () => process.exit(code));
}
