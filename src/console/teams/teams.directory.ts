import type { Db } from '../../db/database.ts';
import { normalizeEgress, type Egress } from '../../egress/setting.ts';
import { problems } from '../../errors/problems.ts';
import type { RefQuery } from '../../references.ts';
import type { Sealed } from '../../secrets/cipher.ts';
import type { AgentVersion } from '../agents/agents.schemas.ts';
import { effectiveRoleMemory } from './teams.presenters.ts';
import * as store from './teams.store.ts';
import type { TeamRow } from './teams.store.ts';

/** The team that holds a name now: 404 when there is none (or it is archived). */
export async function mustGetLiveTeam(db: Db, name: string): Promise<TeamRow> {
  const t = await store.getLiveTeam(db, name);
  if (!t) throw problems.notFound('team', name);
  return t;
}

/**
 * The teams as the worker, the sandbox host and the gateway read them: what a run needs of a
 * team, where a role's sandbox goes and when it sleeps, a role's egress, key and MCP servers.
 */
export function createTeamsDirectory(deps: {
  db: Db;
  /** The agent's current version, or the given one (a run's pinned version). */
  agentVersion: (agent: string, version?: number | null) => Promise<AgentVersion | null>;
  /** A role's sealed model-proxy key, opened (the provisioning seals and opens keys). */
  openKey: (teamId: number, role: string, sealed: Sealed) => string;
}) {
  const { db } = deps;
  const mustGetLive = (name: string) => mustGetLiveTeam(db, name);

  return {
    mustGetLive,
    /** What a run needs of a team (the live one of the name, else the last archived one): its roles as they are now; null when there is none. */
    async forRun(name: string) {
      const t = await store.getTeamForRead(db, name);
      if (!t) return null;
      const roles = await store.rolesOf(db, [t.id]);
      return {
        id: t.id,
        name: t.name,
        status: t.status,
        surface: t.home_surface,
        lead: t.lead,
        rework_rounds: t.rework_rounds,
        repo_url: t.repo_url,
        roles: roles.map((r) => ({
          role: r.role,
          agent: r.agent,
          model: r.model,
          next_role: r.pipeline_next_role,
          max_iterations: r.max_iterations,
          confirmation_policy: r.confirmation_policy,
          skills: r.skills,
          memory: effectiveRoleMemory(t.memory, r.memory),
        })),
      };
    },

    /** The active teams whose home is a chat surface, with their room and their roles' agents. */
    async homedOn(surface: 'chat_a' | 'chat_b'): Promise<Array<{ name: string; roomId: string | null; roles: Array<{ role: string; agent: string }> }>> {
      const teams = await store.activeTeamsHomedOn(db, surface);
      const roles = await store.rolesOf(db, teams.map((t) => t.id));
      return teams.map((t) => ({ name: t.name, roomId: t.home_room_id, roles: roles.filter((r) => r.team_id === t.id).map((r) => ({ role: r.role, agent: r.agent })) }));
    },

    /** The chat room a live team is homed in (`q`: the caller's transaction), or null when its home is not a chat room. */
    async homeRoomOf(name: string, q?: RefQuery): Promise<{ surface: 'chat_a' | 'chat_b'; room_id: string } | null> {
      const t = await store.getLiveTeam(q ?? db, name);
      if (!t || !t.home_room_id || (t.home_surface !== 'chat_a' && t.home_surface !== 'chat_b')) return null;
      return { surface: t.home_surface, room_id: t.home_room_id };
    },

    /** The name of a team by its id (archived ones too), or null. */
    async nameById(id: number): Promise<string | null> {
      return (await store.getTeamById(db, id))?.name ?? null;
    },

    /** The model-proxy key of a team's role, for the worker; never for a route. */
    async roleModelKey(name: string, role: string): Promise<string | null> {
      const team = await mustGetLive(name);
      const r = (await store.rolesOf(db, [team.id])).find((x) => x.role === role);
      if (!r?.proxy_key) return null;
      return deps.openKey(team.id, role, r.proxy_key);
    },

    /** Each role of a live team with the egress that applies to it: the team's override, else the agent's current version's. */
    /** Each role's effective egress; `pinned` names the agent version a role's run fixed at its start (else the current one). */
    async rolesWithEgress(name: string, pinned: Record<string, number> = {}): Promise<Array<{ role: string; agent: string; egress: Egress }>> {
      const t = await mustGetLive(name);
      const roles = await store.rolesOf(db, [t.id]);
      const out = [];
      for (const r of roles) {
        const agent = r.egress_override ? null : await deps.agentVersion(r.agent, pinned[r.role] ?? null);
        out.push({ role: r.role, agent: r.agent, egress: normalizeEgress(r.egress_override ?? agent?.egress) });
      }
      return out;
    },

    /** The platform MCP servers a role names: its template role's and its agent's current version's. */
    async roleMcpServerNames(name: string, role: string): Promise<string[]> {
      const t = await mustGetLive(name);
      const r = (await store.rolesOf(db, [t.id])).find((x) => x.role === role);
      if (!r) return [];
      const agent = await deps.agentVersion(r.agent);
      return [...new Set([...r.mcp_servers, ...(agent?.mcp_servers ?? [])])];
    },

    /** Checkpoints the live teams' roles use, for GET /checkpoints. */
    async checkpointUses() {
      const rows = await store.checkpointUses(db);
      return rows.map((r) => ({ checkpoint_id: r.checkpoint_id!, kind: 'team', name: `${r.name}/${r.role}` }));
    },

    /**
     * For sandbox placement: a live team's role (its environment, replicas and concurrent runs,
     * and the template version it came from), read on the placement's transaction; null when
     * the team is archived or has no such role.
     */
    async rolePlacement(teamId: number, role: string, q: RefQuery = db) {
      const r = await store.rolePlacement(q ?? db, teamId, role);
      if (!r) return null;
      return { team: r.team, role: r.role, vm: r.vm, provider: r.provider, replicasMax: r.replicas_max, concurrentRuns: r.concurrent_runs, templateName: r.template_name, templateVersion: r.template_version };
    },

    /** The environment of a live team's lead role (where its work starts), or null. */
    leadEnvironment: (name: string) => store.leadEnvironment(db, name).then((r) => r ?? null),

    /** Teams' idle and deep-sleep times (seconds) by id, for the sandbox host's sweep. */
    async sleepTimes(ids: number[]): Promise<Map<number, { idleAfterSeconds: number; deepSleepAfterSeconds: number }>> {
      const rows = await store.sleepTimes(db, ids);
      return new Map(rows.map((r) => [r.id, { idleAfterSeconds: r.idle_after_seconds, deepSleepAfterSeconds: r.deep_sleep_after_seconds }]));
    },
  };
}

export type TeamsDirectory = ReturnType<typeof createTeamsDirectory>;
