import { sql } from 'kysely';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { problems, type FieldProblem } from '../../http/problems.ts';
import type { References, RefQuery } from '../references.ts';
import * as store from './teams.store.ts';
import type { EgressValue } from './teams.tables.ts';

const CIDR = /^(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}\/(?:3[0-2]|[12]?\d)|[0-9a-fA-F:]*:[0-9a-fA-F:.]*\/(?:12[0-8]|1[01]\d|[1-9]?\d))$/;

/** A team role's egress override: it replaces the agent definition's egress for that role. */
export function createEgressOverridesService(deps: { db: Db; references: References }) {
  const { db } = deps;

  async function roleOf(name: string, role: string) {
    const t = await store.getLiveTeam(db, name);
    if (!t) throw problems.notFound('team', name);
    const r = (await store.rolesOf(db, [t.id])).find((x) => x.role === role);
    if (!r) throw problems.notFound(`role of team "${name}"`, role);
    return { team: t, role: r };
  }

  /** The override's rules; destinations are asked on `q` (the write's transaction, to check again). */
  async function validate(egress: EgressValue, q?: RefQuery) {
    const errors: FieldProblem[] = [];
    const unknown = new Set(await deps.references.unknown('destination', egress.destinations, q));
    egress.destinations.forEach((d, i) => {
      if (unknown.has(d)) errors.push({ field: `destinations.${i}`, message: `no destination named "${d}"` });
    });
    egress.upstream_deny_cidrs.forEach((c, i) => {
      if (!CIDR.test(c)) errors.push({ field: `upstream_deny_cidrs.${i}`, message: `"${c}" is not an IPv4 or IPv6 CIDR` });
    });
    if (errors.length) throw problems.validation(errors);
  }

  return {
    async get(name: string, role: string) {
      const { role: r } = await roleOf(name, role);
      return { row_version: r.row_version, override: r.egress_override ?? null };
    },

    async put(actor: Actor, name: string, role: string, expected: number, egress: EgressValue) {
      await validate(egress);
      const { team } = await roleOf(name, role);
      return db.transaction().execute(async (trx) => {
        // The destinations stay until commit: a concurrent delete waits, then sees this override.
        await deps.references.guard(trx, 'destination', egress.destinations, 'use');
        await validate(egress, trx);
        const row = await trx
          .updateTable('team_roles')
          .set({ egress_override: JSON.stringify(egress), row_version: sql`nextval('row_version_seq')` })
          .where('team_id', '=', team.id)
          .where('role', '=', role)
          .where('row_version', '=', expected)
          .returning(['row_version', 'egress_override'])
          .executeTakeFirst();
        if (!row) throw problems.preconditionFailed();
        await recordAudit(trx, actor, 'team.egress_override.set', { type: 'team', id: name }, { role, mode: egress.mode, destinations: egress.destinations });
        return { row_version: row.row_version, override: row.egress_override };
      });
    },

    /** Removes the override (the agent definition's egress applies again). */
    async remove(actor: Actor, name: string, role: string, expected: number) {
      const { team, role: r } = await roleOf(name, role);
      if (r.egress_override === null) throw problems.notFound(`egress override of role "${role}" of team`, name);
      await db.transaction().execute(async (trx) => {
        const row = await trx
          .updateTable('team_roles')
          .set({ egress_override: JSON.stringify(null), row_version: sql`nextval('row_version_seq')` })
          .where('team_id', '=', team.id)
          .where('role', '=', role)
          .where('row_version', '=', expected)
          .returning('row_version')
          .executeTakeFirst();
        if (!row) throw problems.preconditionFailed();
        await recordAudit(trx, actor, 'team.egress_override.remove', { type: 'team', id: name }, { role });
      });
    },
  };
}

export type EgressOverridesService = ReturnType<typeof createEgressOverridesService>;
