import type { Db } from '../../../db/database.ts';
import type { ModelProxyClient } from '../../../modelproxy/client.ts';
import type { JobHandler } from '../../../queue/queue.ts';
import { revokeKeyHandler, RevokeKey } from './revoke-key.job.ts';
import { revokeTeamKeysHandler, RevokeTeamKeys } from './revoke-team-keys.job.ts';
import { syncTeamProxyHandler, SyncTeamProxy } from './sync-proxy.job.ts';

/** The teams module's jobs: its side effects on the model proxy, performed after commit. */
export function teamJobHandlers(deps: { db: Db; proxy: ModelProxyClient }): Record<string, JobHandler> {
  return {
    [RevokeTeamKeys.kind]: revokeTeamKeysHandler(deps),
    [RevokeKey.kind]: revokeKeyHandler(deps),
    [SyncTeamProxy.kind]: syncTeamProxyHandler(deps),
  };
}
