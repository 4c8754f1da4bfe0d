import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { Role } from '../auth/roles.ts';
import { decodeCursor, toPage } from '../db/pagination.ts';

/** Who is acting: a user through a session or token, or the system itself (first start, CLI). */
export interface Actor {
  userId: number | null;
  name: string;
  email: string | null;
  role: Role;
  via: 'session' | 'token' | 'system';
  requestId: string | null;
}

export const systemActor = (name = 'system'): Actor => ({ userId: null, name, email: null, role: 'admin', via: 'system', requestId: null });

/**
 * Records one write in the audit log. Call it with the transaction of the write itself, so
 * the entry and the change commit or roll back together. `details` must never hold a secret.
 */
export async function recordAudit(
  trx: Transaction<Database> | Kysely<Database>,
  actor: Actor,
  action: string,
  target: { type: string; id: string | number },
  details: Record<string, unknown> = {},
): Promise<void> {
  await trx
    .insertInto('audit_log')
    .values({
      actor_user_id: actor.userId,
      actor: actor.name,
      via: actor.via,
      action,
      target_type: target.type,
      target: String(target.id),
      request_id: actor.requestId,
      details: JSON.stringify(details),
    })
    .execute();
}

/** Reads the audit log newest first, for `crewhouse audit`. */
export async function readAudit(db: Kysely<Database>, opts: { limit: number; action?: string; targetType?: string; beforeId?: number }) {
  let q = db.selectFrom('audit_log').selectAll().orderBy('id', 'desc').limit(opts.limit);
  if (opts.action) q = q.where('action', '=', opts.action);
  if (opts.targetType) q = q.where('target_type', '=', opts.targetType);
  if (opts.beforeId) q = q.where('id', '<', opts.beforeId);
  return q.execute();
}

/** The audit log as pages for the Console's GET /audit: newest first, the cursor is the last id seen. */
export function createAuditLog(db: Kysely<Database>) {
  return {
    async list(opts: { limit: number; cursor: string | undefined; action?: string; targetType?: string }) {
      const cursor = decodeCursor(opts.cursor, ['number']);
      const rows = await readAudit(db, { limit: opts.limit + 1, action: opts.action, targetType: opts.targetType, beforeId: cursor ? Number(cursor[0]) : undefined });
      return toPage(
        rows,
        opts.limit,
        (r) => [r.id],
        (r) => ({
          id: r.id,
          at: new Date(r.at).toISOString(),
          actor: r.actor,
          actor_user_id: r.actor_user_id,
          via: r.via,
          action: r.action,
          target_type: r.target_type,
          target: r.target,
          request_id: r.request_id,
          details: (typeof r.details === 'string' ? JSON.parse(r.details) : r.details) as Record<string, unknown>,
        }),
      );
    },
  };
}
export type AuditLog = ReturnType<typeof createAuditLog>;

/** The id of the newest entry of an action on a target type, 0 when there is none: a later entry has a greater id. */
export async function latestAuditId(q: Kysely<Database> | Transaction<Database>, action: string, targetType: string): Promise<number> {
  const row = await q.selectFrom('audit_log').select((e) => e.fn.max('id').as('id')).where('target_type', '=', targetType).where('action', '=', action).executeTakeFirst();
  return Number(row?.id ?? 0);
}

/** The targets of the entries of an action on a target type recorded after the entry `afterId`, newest first. */
export async function auditTargetsSince(q: Kysely<Database> | Transaction<Database>, action: string, targetType: string, afterId: number): Promise<string[]> {
  const rows = await q.selectFrom('audit_log').select('target').where('target_type', '=', targetType).where('action', '=', action).where('id', '>', afterId).orderBy('id', 'desc').execute();
  return rows.map((r) => r.target);
}
