/**
 * The model proxy's spend of one sandbox, as its ledger holds it. The gateway, which alone
 * knows which sandbox a request comes from, names that sandbox in the request id of every call
 * it forwards to the proxy (replacing any the sandbox sent); the proxy logs the request id with
 * the call's cost, so the run engine charges a turn what the proxy really spent for it, never
 * what the agent says it used.
 */
import crypto from 'node:crypto';
import type { Db } from '../db/database.ts';

/** The request id's start naming a sandbox (a digest: fits the request id's characters and length whatever the sandbox id is). */
export function sandboxRequestPrefix(sandboxId: string): string {
  return `sbx.${crypto.createHash('sha256').update(sandboxId).digest('hex').slice(0, 24)}.`;
}

/** A fresh request id naming the sandbox, for one call the gateway forwards to the proxy. */
export function sandboxRequestId(sandboxId: string): string {
  return `${sandboxRequestPrefix(sandboxId)}${crypto.randomBytes(8).toString('hex')}`;
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
