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
 */
import path from 'node:path';
import { Journal } from './journal.ts';
import { runTurn } from './loop.ts';
import type { AgentEvent, AgentRequest } from './protocol.ts';

const CONVERSATION = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Where a conversation's journal lives in the workspace. */
export function journalPath(workspace: string, conversation: string): string {
  return path.join(workspace, '.crewhouse', 'conversations', `${conversation}.jsonl`);
}

/** Exit code of a runtime that stopped because its worker went away (nothing recorded). */
export const WORKER_GONE_EXIT = 3;

/** Reads the request: stdin up to its first newline (the control channel stays open) or its end. */
async function readRequest(): Promise<{ request: AgentRequest; control: boolean }> {
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
  return { request: parse(Buffer.concat(chunks).toString('utf8')), control };
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

function emit(e: AgentEvent): void {
  process.stdout.write(`${JSON.stringify(e)}\n`);
}

async function main(): Promise<number> {
  let request: AgentRequest;
  let control = false;
  try {
    ({ request, control } = await readRequest());
  } catch (err) {
    process.stderr.write(`agent runtime: bad request: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
  const workspace = request.op === 'turn' ? request.config.workspace : request.workspace;
  const journal = Journal.open(journalPath(workspace, request.conversation));
  if (request.op === 'events') {
    for (const e of journal.after(request.after)) emit(e);
    journal.close();
    return 0;
  }
  const controller = new AbortController();
  process.on('SIGTERM', () => controller.abort());
  process.on('SIGINT', () => controller.abort());
  // The tools listen on `tools`: aborting it kills their process groups synchronously.
  const gone = new AbortController();
  const tools = AbortSignal.any([controller.signal, gone.signal]);
  if (control) {
    watchControl(
      () => controller.abort(),
      () => {
        gone.abort();
        process.exit(WORKER_GONE_EXIT);
      },
    );
  }
  journal.onAppend(emit);
  // Loaded only for a role with MCP servers: the SDK is not in every image (the microVM's minimal one).
  const mcp = request.config.mcp_servers?.length ? await (await import('./mcp.ts')).McpToolbox.open(request.config.mcp_servers) : undefined;
  try {
    await runTurn(request.config, journal, request.input, { signal: tools, stream: true, env: process.env, mcp });
  } finally {
    await mcp?.close();
    journal.close();
  }
  return 0;
}

if (import.meta.main) {
  const code = await main();
  // Let stdout drain before leaving.
  process.stdout.write('', () => process.exit(code));
}
