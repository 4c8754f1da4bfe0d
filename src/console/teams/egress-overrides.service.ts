import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { updateIfVersion } from '../../db/conditional.ts';
import { checkEgress, normalizeEgress, type Egress, type EgressInput } from '../../egress/setting.ts';
import { problems, type FieldProblem } from '../../errors/problems.ts';
import type { References, RefQuery } from '../../references.ts';
import { mustGetLiveTeam } from './teams.directory.ts';
import * as store from './teams.store.ts';

/** A team role's egress override: it replaces the agent definition's egress for that role. */
export function createEgressOverridesService(deps: { db: Db; references: References }) {
  const { db } = deps;

  async function roleOf(name: string, role: string) {
    const t = await mustGetLiveTeam(db, name);
    const r = (await store.rolesOf(db, [t.id])).find((x) => x.role === role);
    if (!r) throw problems.notFound(`role of team "${name}"`, role);
    return { team: t, role: r };
  }

  /** The override's rules; destinations are asked on `q` (the write's transaction, to check again). */
  async function validate(egress: Egress, q?: RefQuery) {
    const errors: FieldProblem[] = [];
    const unknown = new Set(await deps.references.unknown('destination', egress.destinations, q));
    egress.destinations.forEach((d, i) => {
      if (unknown.has(d)) errors.push({ field: `destinations.${i}`, message: `no destination named "${d}"` });
    });
    errors.push(...checkEgress(egress, ''));
    if (errors.length) throw problems.validation(errors);
  }

  /** The role's row only while its version is the one the caller read (If-Match): 404 or 412 otherwise. */
  const writeRole = (q: Parameters<typeof updateIfVersion>[0], teamId: number, name: string, role: string, expected: number, override: Egress | null) =>
    updateIfVersion<{ row_version: number; egress_override: Egress | null }>(q, {
      table: 'team_roles',
      where: { team_id: teamId, role },
      expected,
      set: { egress_override: JSON.stringify(override) },
      what: `role of team "${name}"`,
      label: role,
      touch: false,
    });

  return {
    async get(name: string, role: string) {
      const { role: r } = await roleOf(name, role);
      return { row_version: r.row_version, override: r.egress_override ? normalizeEgress(r.egress_override) : null };
    },

    async put(actor: Actor, name: string, role: string, expected: number, input: EgressInput) {
      const egress = normalizeEgress(input);
      await validate(egress);
      const { team } = await roleOf(name, role);
      return db.transaction().execute(async (trx) => {
        // The destinations stay until commit: a concurrent delete waits, then sees this override.
        await deps.references.guard(trx, 'destination', egress.destinations, 'use');
        await validate(egress, trx);
        const row = await writeRole(trx, team.id, name, role, expected, egress);
        await recordAudit(trx, actor, 'team.egress_override.set', { type: 'team', id: name }, { role, mode: egress.mode, destinations: egress.destinations });
        return { row_version: row.row_version, override: row.egress_override };
      });
    },

    /** Removes the override (the agent definition's egress applies again). */
    async remove(actor: Actor, name: string, role: string, expected: number) {
      const { team, role: r } = await roleOf(name, role);
      if (r.egress_override === null) throw problems.notFound(`egress override of role "${role}" of team`, name);
      await db.transaction().execute(async (trx) => {
        await writeRole(trx, team.id, name, role, expected, null);
        await recordAudit(trx, actor, 'team.egress_override.remove', { type: 'team', id: name }, { role });
      });
    },
  };
}

export type EgressOverridesService = ReturnType<typeof createEgressOverridesService>;
