import type { Kysely } from 'kysely';
import { Type } from 'typebox';
import type { Database } from '../../../db/schema.ts';
import type { ModelProxyClient } from '../../../modelproxy/client.ts';
import { defineJob } from '../../../queue/queue.ts';
import { isGone, permanentIfRefused } from './proxy-errors.ts';

/** Revokes one model-proxy key (a removed role's, or one minted for a change that failed). */
export const revokeKeyJob = defineJob({
  kind: 'teams.revoke-key',
  payload: Type.Object({ key_id: Type.String({ minLength: 1, maxLength: 200 }), actor: Type.String({ maxLength: 200 }) }, { additionalProperties: false }),
  async perform(deps: { proxy: Pick<ModelProxyClient, 'revokeKey'> }, { key_id, actor }) {
    try {
      // Revoking a revoked key answers it again; a key the proxy never had is as good as revoked.
      await deps.proxy.revokeKey(key_id, actor);
    } catch (err) {
      if (!isGone(err)) permanentIfRefused(err);
    }
  },
});

/** Queues the revocation of a key on `q` (the transaction that drops it, or the database); once per key. */
export const revokeKeyLater = (q: Kysely<Database>, keyId: string, actor: string) => revokeKeyJob.enqueue(q, { key_id: keyId, actor }, { key: `${revokeKeyJob.kind}:${keyId}` });
