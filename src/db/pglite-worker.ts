// The embedded database's thread (started by PGliteThread, pglite-thread.ts): PGlite and its
// one session (PGliteEngine) run here, so the engine's work (every statement runs in
// WebAssembly, synchronously) never holds the service's event loop, where requests pass the
// gateway and the model proxy. Messages in: a statement, a dump, close. Messages out: each
// one's answer by id, and the NOTIFYs the engine delivers.
import { parentPort, workerData } from 'node:worker_threads';
import { messages, PGlite } from '@electric-sql/pglite';
import { parsers } from './parsers.ts';
import { PGliteEngine } from './pglite-engine.ts';
import type { ThreadMessage, ThreadOptions, ThreadRequest, WireError } from './pglite-thread.ts';

const port = parentPort!;
const send = (message: ThreadMessage) => port.postMessage(message);
const options = workerData as ThreadOptions;

function wireError(err: unknown): WireError {
  if (err instanceof messages.DatabaseError) {
    const fields: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(err)) if (typeof value === 'string' || typeof value === 'number') fields[key] = value;
    return { database: true, message: err.message, length: err.length, fields };
  }
  return { database: false, message: err instanceof Error ? err.message : String(err), fields: {} };
}

let engine: PGliteEngine;
try {
  const pg = await PGlite.create({
    ...(options.dataDir ? { dataDir: options.dataDir } : {}),
    ...(options.loadDataDir ? { loadDataDir: options.loadDataDir } : {}),
    parsers,
    startParams: [...PGlite.defaultStartParams, ...options.startParams],
  });
  engine = new PGliteEngine(pg, { statementCache: options.statementCache });
  engine.onNotification((channel, payload) => send({ kind: 'notify', channel, payload }));
} catch (err) {
  send({ kind: 'failed', error: wireError(err) });
  port.close();
  throw err;
}

// One request at a time, in the order sent: the engine has one session (the main thread's
// driver already hands it to one user at a time; a dump or a close waits its turn too).
let turn: Promise<void> = Promise.resolve();
port.on('message', (request: ThreadRequest) => {
  turn = turn.then(() => handle(request));
});
send({ kind: 'ready' });

async function handle(request: ThreadRequest): Promise<void> {
  try {
    switch (request.op) {
      case 'query': {
        const reply = await engine.query(request.text, request.params, request.begin ? { begin: true } : undefined);
        send({ kind: 'answer', id: request.id, rows: reply.rows, affected: reply.affected, command: reply.command });
        return;
      }
      case 'dump': {
        const file = await engine.dump();
        send({ kind: 'answer', id: request.id, image: new Blob([await file.arrayBuffer()]) });
        return;
      }
      case 'close': {
        await engine.close();
        send({ kind: 'answer', id: request.id });
        port.close();
        return;
      }
    }
  } catch (err) {
    send({ kind: 'error', id: request.id, error: wireError(err) });
  }
}
