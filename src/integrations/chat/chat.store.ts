import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';

type Q = Kysely<Database> | Transaction<Database>;

/** Records a message as seen; true the first time (its one effect is then owed). */
export async function recordMessage(q: Q, surface: string, messageId: string): Promise<boolean> {
  const row = await q.insertInto('surface_messages').values({ surface, message_id: messageId }).onConflict((oc) => oc.columns(['surface', 'message_id']).doNothing()).returning('message_id').executeTakeFirst();
  return row !== undefined;
}

export const messageEffect = (q: Q, surface: string, messageId: string) =>
  q.selectFrom('surface_messages').select(['effect', 'run_id']).where('surface', '=', surface).where('message_id', '=', messageId).executeTakeFirst();

export async function setEffect(q: Q, surface: string, messageId: string, effect: string, runId: string | null = null): Promise<void> {
  await q.updateTable('surface_messages').set({ effect, ...(runId ? { run_id: runId } : {}) }).where('surface', '=', surface).where('message_id', '=', messageId).execute();
}

/** A run's thread; `root_id` when it lives in a conversation's thread that exists already (else its root post is made for it). */
export async function insertThread(q: Q, t: { run_id: string; surface: string; room_id: string; team: string; requested_by: string; requested_by_name: string; root_id?: string | null }): Promise<void> {
  await q.insertInto('surface_threads').values(t).execute();
}

export const threadOfRun = (q: Q, runId: string) => q.selectFrom('surface_threads').selectAll().where('run_id', '=', runId).executeTakeFirst();

export const threadByRoot = (q: Q, surface: string, rootId: string) =>
  q.selectFrom('surface_threads').selectAll().where('surface', '=', surface).where('root_id', '=', rootId).executeTakeFirst();

/** The posted threads (room, root) of these runs on a surface. */
export async function threadRoots(q: Q, surface: string, runIds: string[]): Promise<Array<{ run_id: string; room_id: string; root_id: string }>> {
  if (!runIds.length) return [];
  const rows = await q.selectFrom('surface_threads').select(['run_id', 'room_id', 'root_id']).where('surface', '=', surface).where('run_id', 'in', runIds).where('root_id', 'is not', null).execute();
  return rows.map((r) => ({ run_id: r.run_id, room_id: r.room_id, root_id: r.root_id! }));
}

export async function setRoot(q: Q, runId: string, rootId: string, url: string): Promise<void> {
  await q.updateTable('surface_threads').set({ root_id: rootId, url }).where('run_id', '=', runId).execute();
}

/** The thread has taken care of the run's posts up to `seq` (never back). */
export async function advanceThread(q: Q, runId: string, seq: number, lastRole: string | null): Promise<void> {
  await q
    .updateTable('surface_threads')
    .set({ mirrored_seq: sql`greatest(mirrored_seq, ${seq})`, ...(lastRole ? { last_role: lastRole } : {}) })
    .where('run_id', '=', runId)
    .execute();
}

/** A post's record by key: absent (never tried), pending (`post_id` null: tried, maybe made), or made. */
/**
 * Claims the making of a post for `owner` (a job): the post already made (its id), or whether
 * this owner may make it now and whether an earlier try (its own, or a claimant gone quiet for
 * `staleSeconds`) may have made it already. Another owner's fresh claim: `busy`.
 */
export async function claimPost(q: Q, key: string, owner: string, staleSeconds: number): Promise<{ made: string } | { busy: true } | { mine: true; triedBefore: boolean }> {
  const fresh = await q.insertInto('surface_posts').values({ key, claimed_by: owner }).onConflict((oc) => oc.column('key').doNothing()).returning('key').executeTakeFirst();
  if (fresh) return { mine: true, triedBefore: false };
  const row = await q.selectFrom('surface_posts').select(['post_id', 'claimed_by']).where('key', '=', key).executeTakeFirstOrThrow();
  if (row.post_id) return { made: row.post_id };
  if (row.claimed_by === owner) return { mine: true, triedBefore: true };
  const taken = await q
    .updateTable('surface_posts')
    .set({ claimed_by: owner, claimed_at: sql`now()` })
    .where('key', '=', key)
    .where('post_id', 'is', null)
    .where('claimed_at', '<', sql<string>`now() - make_interval(secs => ${staleSeconds})`)
    .returning('key')
    .executeTakeFirst();
  return taken ? { mine: true, triedBefore: true } : { busy: true };
}

export async function postMade(q: Q, key: string, postId: string): Promise<void> {
  await q.updateTable('surface_posts').set({ post_id: postId }).where('key', '=', key).execute();
}

/** A confirmation's token (its hash): one per run post, a new token replacing an unposted one. */
export async function putConfirmation(q: Q, c: { token_hash: string; run_id: string; seq: number; room_id: string }): Promise<void> {
  await q.deleteFrom('surface_confirmations').where('run_id', '=', c.run_id).where('seq', '=', c.seq).execute();
  await q.insertInto('surface_confirmations').values(c).execute();
}

export const confirmationOf = (q: Q, tokenHash: string) => q.selectFrom('surface_confirmations').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();

export async function confirmationDecided(q: Q, tokenHash: string, by: string): Promise<boolean> {
  const row = await q.updateTable('surface_confirmations').set({ decided_by: by }).where('token_hash', '=', tokenHash).where('decided_by', 'is', null).returning('token_hash').executeTakeFirst();
  return row !== undefined;
}
