import type { Selectable } from 'kysely';
import type { AgentVersion } from '../agents/agents.schemas.ts';
import type { RunActivity } from '../runs/runs.service.ts';
import { budgetStateOf } from '../spend/spend.service.ts';
import type { MemoryInput } from '../templates/templates.schemas.ts';
import type { TeamState } from './teams.schemas.ts';
import type { TeamRow } from './teams.store.ts';
import type { TeamsTables } from './teams.tables.ts';

/** How a team leaves the server: the whitelists of what lists and details show, and the memory settings as they apply. */

export type RoleRow = Selectable<TeamsTables['team_roles']>;
export type LinkRow = Omit<Selectable<TeamsTables['team_links']>, 'created_at'>;
export type Member = { user_id: number; name: string; email: string | null; role: string };

export const MEMORY_DEFAULTS = { inject: true, max_entries: 10, write_outcomes: true } as const;
const MEMORY_KEYS = ['inject', 'max_entries', 'write_outcomes'] as const;

/** Only the memory keys that are set: a layer of the defaults < team < role stack. */
export function memoryLayer(m: MemoryInput | null | undefined): MemoryInput {
  const out: MemoryInput = {};
  for (const k of MEMORY_KEYS) if (m && m[k] !== undefined && m[k] !== null) (out as Record<string, unknown>)[k] = m[k];
  return out;
}

export function effectiveTeamMemory(team: MemoryInput) {
  return { ...MEMORY_DEFAULTS, ...memoryLayer(team) };
}

export function effectiveRoleMemory(team: MemoryInput, role: MemoryInput) {
  const own = memoryLayer(role);
  return { ...effectiveTeamMemory(team), ...own, own: MEMORY_KEYS.filter((k) => k in own) };
}

export function presentLink(l: LinkRow) {
  return { surface: l.surface, external_id: l.external_id, label: l.label, verified: l.verification === 'verified', verification: l.verification };
}

/** A team with what its runs and sandboxes say of it, as lists and details show it. */
export type TeamView = TeamRow & { state: TeamState; active_runs: number; last_run_at: string | null };

export function presentTeamSummary(t: TeamView, roles: RoleRow[], links: LinkRow[], spentToday: number | null) {
  return {
    name: t.name,
    template: { name: t.template_name, version: t.template_version, hash: t.template_hash },
    lead: t.lead,
    roles: roles.map((r) => r.role),
    home: { surface: t.home_surface, room_id: t.home_room_id, room_label: t.home_room_label },
    repo_url: t.repo_url,
    links: links.map(presentLink),
    state: t.state,
    status: t.status,
    active_runs: t.active_runs,
    spent_usd: spentToday,
    budget_usd_per_day: t.budget_usd_per_day,
    budget_state: budgetStateOf(spentToday, t.budget_usd_per_day),
    last_run_at: t.last_run_at,
    created_by: t.created_by,
    created_at: t.created_at,
  };
}

export function presentTeam(
  t: TeamView,
  roles: RoleRow[],
  links: LinkRow[],
  members: Member[],
  agents: Map<string, AgentVersion | null>,
  spentToday: number | null,
) {
  const union = (a: string[], b: string[] | undefined) => [...new Set([...a, ...(b ?? [])])];
  return {
    ...presentTeamSummary(t, roles, links, spentToday),
    role_settings: roles.map((r) => {
      const agent = agents.get(r.agent) ?? null;
      return {
        role: r.role,
        agent: r.agent,
        model: r.model,
        profile: r.profile,
        provider: r.provider,
        checkpoint_id: r.checkpoint_id,
        replicas_max: r.replicas_max,
        concurrent_runs: r.concurrent_runs,
        max_iterations: r.max_iterations,
        memory: effectiveRoleMemory(t.memory, r.memory),
        confirmation_policy: r.confirmation_policy ?? agent?.confirmation_policy ?? 'never_confirm',
        max_budget: r.max_budget,
        budget_duration: r.budget_duration,
        rpm_limit: r.rpm_limit,
        tpm_limit: r.tpm_limit,
        pipeline_next_role: r.pipeline_next_role,
        skills: union(r.skills, agent?.skills),
        mcp_servers: union(r.mcp_servers, agent?.mcp_servers),
      };
    }),
    members: members.map((m) => ({ user_id: m.user_id, name: m.name, email: m.email, role: m.role })),
    settings: {
      idle_after_seconds: t.idle_after_seconds,
      deep_sleep_after_seconds: t.deep_sleep_after_seconds,
      isolation: t.isolation,
      rework_rounds: t.rework_rounds,
      memory: effectiveTeamMemory(t.memory),
    },
  };
}

/** A team's sandboxes at a glance: none placed, some awake (starting or running), or all asleep. */
export type TeamSandboxes = 'none' | 'awake' | 'asleep';

/** The derived team state: archived; running while a run is in progress; waiting while one waits for a person; sleeping when every placed sandbox is asleep; idle otherwise. */
export function teamStateOf(t: Pick<TeamRow, 'status'>, runs: RunActivity, sandboxes: TeamSandboxes): TeamState {
  if (t.status === 'archived') return 'archived';
  if (runs.running > 0) return 'running';
  if (runs.waiting > 0) return 'waiting';
  return sandboxes === 'asleep' ? 'sleeping' : 'idle';
}
