import type { Kysely } from 'kysely';
import { Type } from 'typebox';
import type { Database } from '../../../db/schema.ts';
import type { ModelProxyClient } from '../../../modelproxy/client.ts';
import { defineJob } from '../../../queue/queue.ts';
import { permanentIfRefused } from './proxy-errors.ts';

/** Revokes every model-proxy key of a team (as the proxy knows it: `name.id`). Idempotent at the proxy. */
export const revokeTeamKeysJob = defineJob({
  kind: 'teams.revoke-team-keys',
  payload: Type.Object({ team: Type.String({ minLength: 1, maxLength: 300 }), actor: Type.String({ maxLength: 200 }) }, { additionalProperties: false }),
  async perform(deps: { proxy: Pick<ModelProxyClient, 'revokeTeamKeys'> }, { team, actor }, ctx) {
    const r = await deps.proxy.revokeTeamKeys(team, actor).catch(permanentIfRefused);
    ctx.logger.info({ team, revoked: r.revoked }, 'revoked the model-proxy keys of a team');
  },
});

/** Queues the revocation of a team's keys on `q` (the transaction that ends the team); once per team. */
export const revokeTeamKeysLater = (q: Kysely<Database>, team: string, actor: string) => revokeTeamKeysJob.enqueue(q, { team, actor }, { key: `${revokeTeamKeysJob.kind}:${team}` });
