/**
 * The model proxy's spend of one sandbox, as its ledger holds it. The gateway, which alone
 * knows which sandbox a request comes from, names that sandbox in the request id of every call
 * it forwards to the proxy (replacing any the sandbox sent); the proxy logs the request id with
 * the call's cost, so the run engine charges a turn what the proxy really spent for it, never
 * what the agent says it used.
 */
import crypto from 'node:crypto';
import { boundedMemo } from '../bounded-memo.ts';
import type { Db } from '../db/database.ts';

/** The request id's start naming a sandbox (a digest: fits the request id's characters and length whatever the sandbox id is). */
export function sandboxRequestPrefix(sandboxId: string): string {
  return `sbx.${crypto.hash('sha256', sandboxId, 'hex').slice(0, 24)}.`;
}

/**
 * The gateway names a sandbox in every model call it forwards, a call every step or so: the
 * prefix is worked out once per sandbox, and the rest is this process's random start and a
 * count, not fresh random bytes. A hash and random bytes are cheap in a loop but, as one call
 * among a step's other work, cost 80 to 100 µs each on a model request's way (cold caches).
 * The id only has to be unique (the sandbox cannot set it: the gateway replaces any it sent).
 */
const prefixOf = boundedMemo(4096, sandboxRequestPrefix);
let idBase = crypto.randomBytes(4).toString('hex');
let idCount = 0;

/** A fresh request id naming the sandbox, for one call the gateway forwards to the proxy. */
export function sandboxRequestId(sandboxId: string): string {
  const prefix = prefixOf(sandboxId);
  if (idCount === 0xffffffff) {
    idBase = crypto.randomBytes(4).toString('hex');
    idCount = 0;
  }
  return `${prefix}${idBase}${(++idCount).toString(16).padStart(8, '0')}`;
}

/** The ledger lines of a sandbox's calls after line `afterId`, written not before `since`, oldest first. */
export async function sandboxSpendOf(db: Db, sandboxId: string, afterId: string, since: Date, limit = 500): Promise<Array<{ id: string; cost_usd: number }>> {
  const rows = await db
    .selectFrom('mp_request_log')
    .select(['id', 'cost_usd'])
    .where('id', '>', Number(afterId))
    .where('at', '>=', since.toISOString())
    .where('request_id', 'like', `${sandboxRequestPrefix(sandboxId)}%`)
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((r) => ({ id: String(r.id), cost_usd: Number(r.cost_usd) }));
}
