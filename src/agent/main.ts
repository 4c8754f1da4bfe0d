/**
 * The agent runtime's entry point, run inside a sandbox by the worker:
 * `node src/agent/main.ts` with one JSON request on stdin (see protocol.ts). Every journal
 * event is written to stdout as a JSON line once it is on disk; the process exits 0 after the
 * turn's `turn_end` (or the replay), 2 on a bad request. SIGTERM cancels the turn: running tools
 * are killed and the turn ends `cancelled`.
 */
import path from 'node:path';
import { Journal } from './journal.ts';
import { runTurn } from './loop.ts';
import { McpToolbox } from './mcp.ts';
import type { AgentEvent, AgentRequest } from './protocol.ts';

const CONVERSATION = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Where a conversation's journal lives in the workspace. */
export function journalPath(workspace: string, conversation: string): string {
  return path.join(workspace, '.crewhouse', 'conversations', `${conversation}.jsonl`);
}

async function readRequest(): Promise<AgentRequest> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as AgentRequest;
  if (!parsed || (parsed.op !== 'turn' && parsed.op !== 'events')) throw new Error('op must be "turn" or "events"');
  if (typeof parsed.conversation !== 'string' || !CONVERSATION.test(parsed.conversation)) throw new Error('conversation must be a simple name');
  return parsed;
}

function emit(e: AgentEvent): void {
  process.stdout.write(`${JSON.stringify(e)}\n`);
}

async function main(): Promise<number> {
  let request: AgentRequest;
  try {
    request = await readRequest();
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
  journal.onAppend(emit);
  const mcp = request.config.mcp_servers?.length ? await McpToolbox.open(request.config.mcp_servers) : undefined;
  try {
    await runTurn(request.config, journal, request.input, { signal: controller.signal, stream: true, env: process.env, mcp });
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
