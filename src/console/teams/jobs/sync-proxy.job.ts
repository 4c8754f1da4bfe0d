import type { Kysely } from 'kysely';
import { Type } from 'typebox';
import type { Database } from '../../../db/schema.ts';
import type { Db } from '../../../db/database.ts';
import type { ModelProxyClient } from '../../../modelproxy/client.ts';
import { defineJob } from '../../../queue/queue.ts';
import { proxyTeamOf } from '../proxy-team.ts';
import * as store from '../teams.store.ts';
import { isGone, permanentIfRefused } from './proxy-errors.ts';

const ROUNDS = 5;

type SyncProxyDeps = { db: Db; proxy: Pick<ModelProxyClient, 'setTeamBudget' | 'updateKey'> };

/** What the proxy should hold for the team; null when the team is gone or archived (nothing to hold). */
async function wanted(db: Db, teamId: number) {
  const t = await store.getTeamById(db, teamId);
  if (!t || t.status === 'archived') return null;
  const roles = await store.rolesOf(db, [teamId]);
  return {
    team: proxyTeamOf(t),
    budget: t.budget_usd_per_day,
    models: roles.filter((r) => r.proxy_key_id).map((r) => [r.proxy_key_id!, r.model] as const).sort(([a], [b]) => (a < b ? -1 : 1)),
  };
}

/**
 * Makes the model proxy agree with a team as stored: its daily budget, and each role's model
 * on the role's key. Enqueued by every change of those, in the change's transaction.
 */
export const syncProxyJob = defineJob({
  kind: 'teams.sync-proxy',
  payload: Type.Object({ team_id: Type.Integer({ minimum: 1 }), actor: Type.String({ maxLength: 200 }) }, { additionalProperties: false }),
  async perform(deps: SyncProxyDeps, { team_id, actor }) {
    // Pushed, then read again: a change that committed meanwhile is pushed too, so whichever
    // runner pushes last pushes what is stored last.
    let want = await wanted(deps.db, team_id);
    for (let round = 0; want && round < ROUNDS; round++) {
      await deps.proxy.setTeamBudget(want.team, want.budget, actor).catch(permanentIfRefused);
      for (const [keyId, model] of want.models) {
        await deps.proxy.updateKey(keyId, { models: [model] }, actor).catch((err) => (isGone(err) ? null : permanentIfRefused(err)));
      }
      const now = await wanted(deps.db, team_id);
      if (!now || JSON.stringify(now) === JSON.stringify(want)) return;
      want = now;
    }
    if (want) throw new Error(`team ${team_id} kept changing while it was pushed to the model proxy`);
  },
});

/** Queues a push of the team's stored budget and models on `q`, the transaction that changes them. */
export const syncTeamProxyLater = (q: Kysely<Database>, teamId: number, actor: string) => syncProxyJob.enqueue(q, { team_id: teamId, actor });
