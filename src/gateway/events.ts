import type { Selectable } from 'kysely';
import type { Db } from '../db/database.ts';
import type { GatewayTables } from './gateway.tables.ts';
import type { SandboxIdentity } from '../runtime/sandboxes/identify.ts';

/** A refusal as the run engine reads it to post a `notice` on the sandbox's run: what was refused and why (the row as stored). */
export type EgressEvent = Selectable<GatewayTables['egress_events']>;

/** Records one refusal of a sandbox's request. */
export async function recordEgressEvent(
  db: Db,
  who: SandboxIdentity,
  e: { method: string; host: string; path: string; destination: string | null; rule: string; reason: string; enforced?: boolean },
): Promise<void> {
  await db
    .insertInto('egress_events')
    .values({
      sandbox_id: who.sandboxId,
      team_id: who.teamId,
      role: who.role,
      method: e.method.slice(0, 32),
      host: e.host.slice(0, 300),
      path: e.path.slice(0, 2000),
      destination: e.destination,
      rule: e.rule,
      reason: e.reason.slice(0, 1000),
      enforced: e.enforced ?? true,
    })
    .execute();
}

/**
 * A sandbox's refusals after `afterId` (0: from the start), oldest first, and not before
 * `since` when given (a turn's start: what happened before belongs to earlier work): the run
 * engine turns each into a notice post.
 */
export async function egressEventsOf(db: Db, sandboxId: string, afterId = '0', limit = 100, since: Date | null = null): Promise<EgressEvent[]> {
  let q = db
    .selectFrom('egress_events')
    .selectAll()
    .where('sandbox_id', '=', sandboxId)
    .where('id', '>', afterId);
  if (since) q = q.where('at', '>=', since.toISOString());
  const rows = await q
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((r) => ({ ...r, id: String(r.id), at: new Date(r.at).toISOString() }));
}

/** A team's enforced refusals between two times, oldest first (what a run's pull request reports as refused egress). */
export async function egressRefusalsOfTeam(db: Db, teamId: number, since: string, until: string | null, limit = 50): Promise<EgressEvent[]> {
  let q = db.selectFrom('egress_events').selectAll().where('team_id', '=', teamId).where('enforced', '=', true).where('at', '>=', since);
  if (until) q = q.where('at', '<=', until);
  const rows = await q.orderBy('id').limit(limit).execute();
  return rows.map((r) => ({ ...r, id: String(r.id), at: new Date(r.at).toISOString() }));
}
