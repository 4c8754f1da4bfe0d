import type { HookCaller } from '../../hooks.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';

/**
 * The checkpoint ids in use. Each module that names checkpoints (environments, teams) answers
 * the `checkpointUses` hook with its uses; the list is their union by id.
 */
export function createCheckpointsService(deps: { hooks: HookCaller }) {
  return {
    async list(query: { limit: number; cursor?: string }) {
      const cursor = decodeCursor(query.cursor, ['string']);
      const byId = new Map<string, Array<{ kind: string; name: string }>>();
      for (const uses of await deps.hooks.ask('checkpointUses')) {
        for (const use of uses) {
          const list = byId.get(use.checkpoint_id) ?? [];
          list.push({ kind: use.kind, name: use.name });
          byId.set(use.checkpoint_id, list);
        }
      }
      const items = [...byId.entries()]
        .filter(([id]) => !cursor || id > String(cursor[0]))
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .slice(0, query.limit + 1)
        .map(([id, used_by]) => ({ id, used_by }));
      return toPage(items, query.limit, (c) => [c.id], (c) => c);
    },
  };
}

export type CheckpointsService = ReturnType<typeof createCheckpointsService>;
