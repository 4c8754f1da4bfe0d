import { sql, type Kysely, type Transaction } from 'kysely';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import type { ChatSurface, HookCaller } from '../../hooks.ts';
import { updateIfVersion } from '../../db/conditional.ts';
import { decodeCursor, toPage, type CursorValue } from '../../db/pagination.ts';
import { problems, type FieldProblem } from '../../errors/problems.ts';
import type { ModelCatalog } from '../../models/catalog.ts';
import type { AgentVersion } from '../agents/agents.schemas.ts';
import { checkSkill } from '../skills/skills.rules.ts';
import type { References, RefQuery } from '../../references.ts';
import { isChatSurface } from '../runs/runs.rules.ts';
import type { RunsService } from '../runs/runs.service.ts';
import type { TemplateContent, TemplateRole } from '../templates/templates.schemas.ts';
import type { TemplatesService } from '../templates/templates.service.ts';
import type { UsersService } from '../users/users.service.ts';
import type { TeamCreate, TeamPatch, TeamState } from './teams.schemas.ts';
import { mustGetLiveTeam } from './teams.directory.ts';
import type { TeamProvisioning } from './teams.provisioning.ts';
import { memoryLayer, presentTeam, presentTeamSummary, teamStateOf, type TeamSandboxes, type TeamView } from './teams.presenters.ts';
import * as store from './teams.store.ts';
import type { TeamRow } from './teams.store.ts';


/** How many live teams a list filtered by state reads at a time. */
const LIST_BATCH = 200;

/** Role fields a person may set by hand (PATCH); an upgrade keeps them. */
const ROLE_MANUAL = ['model', 'max_iterations', 'replicas_max', 'concurrent_runs', 'confirmation_policy', 'memory'] as const;
/** Team fields a person may set by hand; an upgrade keeps them. */
const TEAM_MANUAL = ['budget_usd_per_day', 'rework_rounds', 'idle_after_seconds', 'deep_sleep_after_seconds'] as const;
/** `platform` addresses platform MCP servers (/mcp-servers/platform/{name}); no team may take it. */
export const RESERVED_TEAM_NAMES = ['platform'];
const KEY_LIMITS = ['max_budget', 'budget_duration', 'rpm_limit', 'tpm_limit'] as const;

/** The body fields a problem with the chosen template version names: `template.*` on create, the upgrade body's `version`. */
type TemplateFields = { name: string; version: string };
const CREATE_FIELDS: TemplateFields = { name: 'template.name', version: 'template.version' };
const UPGRADE_FIELDS: TemplateFields = { name: 'version', version: 'version' };


type RoleValues = Omit<Database['team_roles'], 'row_version'> & {};

/** The role rows a template version gives a team. */
function rolesFromTemplate(teamId: number, content: TemplateContent) {
  return Object.entries(content.roles).map(([role, r]: [string, TemplateRole]) => ({
    team_id: teamId,
    role,
    agent: r.agent,
    model: r.model,
    vm: r.vm,
    profile: r.profile,
    provider: r.provider,
    checkpoint_id: r.checkpoint_id,
    replicas_max: r.replicas.max,
    concurrent_runs: r.concurrent_runs,
    max_iterations: r.max_iterations,
    confirmation_policy: (r.confirmation_policy ?? null) as 'never_confirm' | 'confirm_risky' | null,
    memory: JSON.stringify(memoryLayer(r.memory)),
    max_budget: r.max_budget,
    budget_duration: r.budget_duration,
    rpm_limit: r.rpm_limit,
    tpm_limit: r.tpm_limit,
    pipeline_next_role: content.pipeline && Object.hasOwn(content.pipeline, role) ? content.pipeline[role] : null,
    skills: r.skills,
    mcp_servers: r.mcp_servers,
  }));
}

const ROOM_ID_HINT: Record<ChatSurface, string> = {
  chat_a: 'the channel\'s "View Info" shows it',
  chat_b: 'the channel\'s details show it at the bottom',
};

/** The display name of a chat room (chat_a, chat_b) the surface's bot can read and post in; 422/502/503 (from the surface's adapter) otherwise. */
export async function chatRoomLabel(hooks: HookCaller, surface: ChatSurface, field: string, roomId: string | null): Promise<string> {
  if (!roomId) throw problems.validation([{ field, message: `a ${surface} room is the id of its channel (${ROOM_ID_HINT[surface]})` }]);
  const room = (await hooks.ask('chat:room', surface, field, roomId)).find((r) => r !== null);
  if (!room) throw problems.unavailable(`the ${surface} room cannot be checked: the ${surface} adapter is not set up in this process`);
  return room.label;
}

export function createTeamsService(deps: {
  db: Db;
  models: ModelCatalog;
  references: References;
  templates: Pick<TemplatesService, 'get' | 'getVersion'>;
  /** The agent's current version, or the given one (a run's pinned version). */
  agentVersion: (agent: string, version?: number | null) => Promise<AgentVersion | null>;
  hooks: HookCaller;
  runs: Pick<RunsService, 'activityOf'>;
  users: Pick<UsersService, 'namesOf'>;
  /** The runtime's sandboxes service answers it. */
  sandboxes: { stateOf(teamIds: number[]): Promise<Map<number, TeamSandboxes>> };
  provisioning: TeamProvisioning;
}) {
  const { db, provisioning } = deps;

  const mustGetLive = (name: string) => mustGetLiveTeam(db, name);

  /** The teams with what their runs and sandboxes say of them: state, runs in progress, last run. */
  async function withActivity(rows: TeamRow[]): Promise<TeamView[]> {
    const ids = rows.map((t) => t.id);
    const [runs, sandboxes] = await Promise.all([deps.runs.activityOf(ids), deps.sandboxes.stateOf(ids)]);
    return rows.map((t) => {
      const r = runs.get(t.id)!;
      return { ...t, state: teamStateOf(t, r, sandboxes.get(t.id)!), active_runs: r.running + r.waiting, last_run_at: r.last_run_at };
    });
  }

  async function detail(row: TeamRow) {
    const [[t], roles, links, members, spent] = await Promise.all([
      withActivity([row]),
      store.rolesOf(db, [row.id]),
      store.linksOf(db, [row.id]),
      store.membersOf(db, row.id).then(async (rows) => {
        const names = await deps.users.namesOf(rows.map((m) => m.user_id));
        // A member whose account went between the two reads (its membership cascades) is left out.
        return rows.flatMap((m) => {
          const u = names.get(m.user_id);
          return u ? [{ user_id: m.user_id, name: u.name, email: u.email, role: m.role }] : [];
        });
      }),
      row.status === 'archived' ? Promise.resolve(null) : provisioning.spentToday(),
    ]);
    const agents = new Map<string, AgentVersion | null>();
    for (const r of roles) if (!agents.has(r.agent)) agents.set(r.agent, await deps.agentVersion(r.agent));
    return presentTeam(t, roles, links, members, agents, spent ? provisioning.spentOf(spent, t) : null);
  }

  /**
   * One page of teams in a state. The state comes from runs and sandboxes, so live teams are
   * read in keyset order a batch at a time and kept while in the state, until the page is full.
   */
  async function pageInState(filter: { state?: TeamState; q?: string }, cursor: CursorValue[] | null, limit: number): Promise<TeamView[]> {
    const archived = filter.state === 'archived';
    if (!filter.state || archived) return withActivity(await store.listTeams(db, { archived, q: filter.q }, cursor, limit));
    const batch = Math.max(limit, LIST_BATCH);
    const kept: TeamView[] = [];
    let after = cursor;
    for (;;) {
      const rows = await store.listTeams(db, { archived: false, q: filter.q }, after, batch);
      const more = rows.length > batch;
      const read = more ? rows.slice(0, batch) : rows;
      for (const t of await withActivity(read)) {
        if (t.state === filter.state) kept.push(t);
        // One past the page tells toPage there is a next one.
        if (kept.length > limit) return kept;
      }
      if (!more) return kept;
      const last = read[read.length - 1];
      after = [last.name, last.id];
    }
  }

  async function resolveTemplate(name: string, version: number | null | undefined, fields: TemplateFields) {
    let template;
    try {
      template = await deps.templates.get(name);
    } catch {
      throw problems.validation([{ field: fields.name, message: `no team template named "${name}"` }]);
    }
    const v = version ?? template.current_version;
    let row;
    try {
      row = await deps.templates.getVersion(name, v);
    } catch {
      throw problems.validation([{ field: fields.version, message: `team template "${name}" has no version ${v}` }]);
    }
    await checkVersionNames(row, fields);
    return row;
  }

  /** An older template version may name an agent or model alias that is gone since (asked on `q`): 422. */
  async function checkVersionNames(row: { template_name: string; version: number; content: { roles: Record<string, { agent: string; model: string }> } }, fields: TemplateFields, q?: RefQuery) {
    const roles = Object.values(row.content.roles);
    const missingAgents = await deps.references.unknown('agent', roles.map((r) => r.agent), q);
    const missingModels = roles.map((r) => r.model).filter((m) => !deps.models.get(m));
    if (missingAgents.length || missingModels.length) {
      const what = [...missingAgents.map((a) => `agent "${a}"`), ...[...new Set(missingModels)].map((m) => `model alias "${m}"`)].join(', ');
      throw problems.validation([{ field: fields.version, message: `version ${row.version} of team template "${row.template_name}" names ${what}, which no longer exists` }]);
    }
  }

  /**
   * In the transaction that makes a team use a template version: holds the template and its
   * agents against deletion until commit, and checks again that they exist.
   */
  async function guardTemplateVersion(trx: Transaction<Database>, row: Parameters<typeof checkVersionNames>[0], fields: TemplateFields) {
    await deps.references.guard(trx, 'template', [row.template_name], 'use');
    await deps.references.guard(trx, 'agent', Object.values(row.content.roles).map((r) => r.agent), 'use');
    if ((await deps.references.unknown('template', [row.template_name], trx)).length > 0) {
      throw problems.validation([{ field: fields.name, message: `no team template named "${row.template_name}"` }]);
    }
    await checkVersionNames(row, fields, trx);
  }

  return {
    detail,
    mustGetLive,
    /** Locks the live team of a name against archiving for the rest of the transaction; false when there is none. */
    lockLiveShared: (q: Kysely<Database> | Transaction<Database>, name: string) => store.lockLiveTeamShared(q, name),

    async list(query: { limit: number; cursor?: string; state?: TeamState; q?: string }) {
      const cursor = decodeCursor(query.cursor, ['string', 'number']);
      const rows = await pageInState({ state: query.state, q: query.q }, cursor, query.limit);
      const page = toPage(rows, query.limit, (r) => [r.name, r.id], (r) => r);
      const ids = page.items.map((t) => t.id);
      const [roles, links, spent] = await Promise.all([store.rolesOf(db, ids), store.linksOf(db, ids), provisioning.spentToday()]);
      return {
        items: page.items.map((t) =>
          presentTeamSummary(
            t,
            roles.filter((r) => r.team_id === t.id),
            links.filter((l) => l.team_id === t.id),
            t.status === 'archived' || !spent ? null : provisioning.spentOf(spent, t),
          ),
        ),
        next_cursor: page.next_cursor,
      };
    },

    /** A team for reading: the live one of the name, else the last archived one. */
    async get(name: string) {
      const t = await store.getTeamForRead(db, name);
      if (!t) throw problems.notFound('team', name);
      return t;
    },

    /**
     * Creates a team from a template version: rows first (status provisioning), then one
     * model-proxy key per role and the team budget, then active. A failure on the way removes
     * the rows and revokes the keys, so nothing is left behind.
     */
    async create(actor: Actor, input: TeamCreate) {
      if (RESERVED_TEAM_NAMES.includes(input.name)) throw problems.validation([{ field: 'name', message: `"${input.name}" is reserved` }]);
      const version = await resolveTemplate(input.template.name, input.template.version, CREATE_FIELDS);
      const content = version.content;
      if (content.requires_repo && !input.repo_url) {
        throw problems.validation([{ field: 'repo_url', message: `team template "${input.template.name}" requires a repository` }]);
      }
      if (await store.getLiveTeam(db, input.name)) throw problems.conflict(`a team named "${input.name}" already exists`, [{ field: 'name', message: 'is taken' }]);
      // A repository on the code host counts as a code_host link: the app must be installed on it.
      if (input.repo_url) {
        const [coverage] = await deps.hooks.ask('codeHost:coversUrl', input.repo_url);
        if (coverage && !coverage.covered) throw problems.validation([{ field: 'repo_url', message: coverage.reason }], coverage.reason);
      }
      const home = input.home ? { ...input.home } : null;
      // A team at home nowhere has no room to name or label: a room sent with it was meant for a chat home.
      if (home?.surface === 'none') {
        const sent = (['room_id', 'room_label'] as const).filter((f) => home[f] != null);
        if (sent.length) {
          const message = 'a team whose home is "none" has no room: leave it out, or set surface to chat_a or chat_b';
          throw problems.validation(sent.map((f) => ({ field: `home.${f}`, message })), `home "none" has no room: ${sent.map((f) => `home.${f}`).join(' and ')} must be left out (or set surface to chat_a or chat_b)`);
        }
      }
      // A chat home is a channel the surface's bot can read and post in; its label is the channel's name.
      if (home && isChatSurface(home.surface)) home.room_label = await chatRoomLabel(deps.hooks, home.surface as ChatSurface, 'home.room_id', home.room_id ?? null);
      const budget = input.budget_usd_per_day ?? content.budget_usd_per_day ?? 0;
      const team = await db.transaction().execute(async (trx) => {
        await guardTemplateVersion(trx, version, CREATE_FIELDS);
        const t = await store.insertTeam(trx, {
            name: input.name,
            status: 'provisioning',
            template_name: input.template.name,
            template_version: version.version,
            template_hash: version.content_sha256,
            lead: content.lead ?? Object.keys(content.roles)[0],
            home_surface: home ? home.surface : 'console',
            home_room_id: home?.room_id ?? null,
            home_room_label: home?.room_label ?? null,
            repo_url: input.repo_url ?? null,
            budget_usd_per_day: budget,
            idle_after_seconds: content.idle_after_seconds,
            deep_sleep_after_seconds: content.deep_sleep_after_seconds,
            isolation: content.isolation,
            rework_rounds: content.rework_rounds ?? 0,
            memory: JSON.stringify({}),
            manual_fields: input.budget_usd_per_day != null ? ['budget_usd_per_day'] : [],
            created_by: actor.name,
          });
        const roles = rolesFromTemplate(t.id, content);
        await store.insertRoles(trx, roles);
        if (actor.userId !== null) await store.addMember(trx, t.id, actor.userId, 'owner');
        return { id: t.id, roles };
      });

      const created = { name: input.name, id: team.id };
      try {
        const minted = await provisioning.mintKeys(created, team.roles, actor);
        await provisioning.setBudget(created, budget, actor);
        await db.transaction().execute(async (trx) => {
          for (const m of minted) {
            await store.updateRole(trx, team.id, m.role, { proxy_key_id: m.key_id, proxy_key: m.sealed });
          }
          await store.markActive(trx, team.id);
          await recordAudit(trx, actor, 'team.create', { type: 'team', id: input.name }, { template: input.template.name, version: version.version });
        });
      } catch (err) {
        await db.transaction().execute(async (trx) => {
          await store.deleteTeam(trx, team.id);
          await provisioning.revokeTeamKeysLater(trx, created, actor);
        });
        throw err;
      }
      provisioning.forget(created);
      return (await store.getTeamById(db, team.id))!;
    },

    async patch(actor: Actor, name: string, expected: number, body: TeamPatch) {
      const team = await mustGetLive(name);
      const roles = await store.rolesOf(db, [team.id]);
      const errors: FieldProblem[] = [];
      for (const [role, p] of Object.entries(body.role_settings ?? {})) {
        const current = roles.find((r) => r.role === role);
        if (!current) errors.push({ field: `role_settings.${role}`, message: `team "${name}" has no role "${role}"` });
        for (const k of KEY_LIMITS) if (k in p) errors.push({ field: `role_settings.${role}.${k}`, message: 'the model-proxy key limits of a role cannot be changed here' });
        if (p.model !== undefined && !deps.models.get(p.model)) errors.push({ field: `role_settings.${role}.model`, message: `no model alias named "${p.model}"; the aliases are ${deps.models.aliases.map((a) => a.alias).join(', ')}` });
      }
      const idle = body.idle_after_seconds ?? team.idle_after_seconds;
      const deep = body.deep_sleep_after_seconds ?? team.deep_sleep_after_seconds;
      if (deep < idle) errors.push({ field: body.deep_sleep_after_seconds !== undefined ? 'deep_sleep_after_seconds' : 'idle_after_seconds', message: 'deep_sleep_after_seconds must be at least idle_after_seconds' });
      if (errors.length) throw problems.validation(errors);
      if (team.row_version !== expected) throw problems.preconditionFailed();
      if (team.archiving_at) throw problems.conflict(`team "${name}" is being archived`);

      // The proxy learns first; if it cannot, nothing changes here.
      const budgetChanged = body.budget_usd_per_day !== undefined && body.budget_usd_per_day !== team.budget_usd_per_day;
      if (budgetChanged) await provisioning.setBudget(team, body.budget_usd_per_day!, actor);
      const modelChanges = Object.entries(body.role_settings ?? {}).filter(([role, p]) => p.model !== undefined && p.model !== roles.find((r) => r.role === role)!.model);
      for (const [role, p] of modelChanges) {
        const keyId = roles.find((r) => r.role === role)!.proxy_key_id;
        if (keyId) await provisioning.setKeyModels(keyId, [p.model!], actor);
      }

      try {
        const row = await db.transaction().execute(async (trx) => {
          const set: Record<string, unknown> = {};
          const manual = new Set(team.manual_fields);
          for (const k of TEAM_MANUAL) {
            if (body[k] !== undefined) {
              set[k] = body[k];
              manual.add(k);
            }
          }
          if (body.memory) {
            set.memory = JSON.stringify({ ...memoryLayer(team.memory), ...memoryLayer(body.memory) });
            manual.add('memory');
          }
          set.manual_fields = [...manual];
          const updated = await updateIfVersion(trx, { table: 'teams', where: { id: team.id }, expected, set, what: 'team', label: name });
          for (const [role, p] of Object.entries(body.role_settings ?? {})) {
            const current = roles.find((r) => r.role === role)!;
            const rs: Record<string, unknown> = {};
            const rManual = new Set(current.manual_fields);
            for (const k of ROLE_MANUAL) {
              if (k === 'memory') continue;
              if (p[k] !== undefined) {
                rs[k] = p[k];
                rManual.add(k);
              }
            }
            if (p.memory === null) {
              rs.memory = JSON.stringify({});
              rManual.delete('memory');
            } else if (p.memory !== undefined) {
              rs.memory = JSON.stringify({ ...memoryLayer(current.memory), ...memoryLayer(p.memory) });
              rManual.add('memory');
            }
            if (Object.keys(rs).length === 0) continue;
            rs.manual_fields = [...rManual];
            rs.row_version = sql`nextval('row_version_seq')`;
            await store.updateRole(trx, team.id, role, rs);
          }
          await recordAudit(trx, actor, 'team.update', { type: 'team', id: name }, { fields: Object.keys(body), roles: Object.keys(body.role_settings ?? {}) });
          // Whoever commits last pushed last before committing; pushing the stored values once
          // more after commit leaves the proxy agreeing with the row whatever the interleaving.
          if (budgetChanged || modelChanges.length) await provisioning.syncLater(trx, team.id, actor);
          return updated;
        });
        provisioning.forget(team);
        return (await store.getTeamById(db, row.id))!;
      } catch (err) {
        // Lost the race for the row (or failed): the proxy follows what is stored now.
        if (budgetChanged || modelChanges.length) await provisioning.syncLater(db, team.id, actor);
        throw err;
      }
    },

    /**
     * Archives a team: cancels open runs, marks its sandboxes destroyed, removes roles, links,
     * members and documents, frees the name, and queues the revocation of its model-proxy keys,
     * all in one transaction. Runs, spend history and team memory stay.
     */
    async archive(actor: Actor, name: string, expected: number) {
      const team = await mustGetLive(name);
      if (team.row_version !== expected) throw problems.preconditionFailed();
      if (team.status === 'provisioning') throw problems.conflict(`team "${name}" is still being provisioned`);
      await db.transaction().execute(async (trx) => {
        // The ETag check and the archive are one statement: a concurrent change with the same
        // ETag loses, so no active team is left whose keys are being revoked.
        await updateIfVersion(trx, { table: 'teams', where: { id: team.id }, expected, set: { status: 'archived', archived_at: sql`now()` }, what: 'team', label: name });
        await store.removeTeamRows(trx, team.id);
        // Other modules' rows of the team (documents, MCP servers) go with it.
        await deps.hooks.react('teamArchived', trx, actor, { id: team.id, name });
        await recordAudit(trx, actor, 'team.archive', { type: 'team', id: name });
        await provisioning.revokeTeamKeysLater(trx, team, actor);
      });
      provisioning.forget(team);
    },

    /** Moves a team to another version of its template, keeping the fields set by hand. */
    async upgrade(actor: Actor, name: string, expected: number, toVersion: number | null | undefined) {
      const team = await mustGetLive(name);
      if (team.row_version !== expected) throw problems.preconditionFailed();
      if (team.archiving_at) throw problems.conflict(`team "${name}" is being archived`);
      const version = await resolveTemplate(team.template_name, toVersion, UPGRADE_FIELDS);
      const content = version.content;
      const oldRoles = await store.rolesOf(db, [team.id]);
      const fresh = rolesFromTemplate(team.id, content);
      const added = fresh.filter((r) => !oldRoles.some((o) => o.role === r.role));
      const removed = oldRoles.filter((o) => !fresh.some((r) => r.role === o.role));
      const minted = await provisioning.mintKeys(team, added, actor);
      const keep = new Map(oldRoles.map((o) => [o.role, o]));
      try {
        await db.transaction().execute(async (trx) => {
          await guardTemplateVersion(trx, version, UPGRADE_FIELDS);
          const manual = new Set(team.manual_fields);
          const set: Record<string, unknown> = {
            template_version: version.version,
            template_hash: version.content_sha256,
            lead: content.lead,
            isolation: content.isolation,
          };
          if (!manual.has('rework_rounds')) set.rework_rounds = content.rework_rounds ?? 0;
          if (!manual.has('idle_after_seconds')) set.idle_after_seconds = content.idle_after_seconds;
          if (!manual.has('deep_sleep_after_seconds')) set.deep_sleep_after_seconds = content.deep_sleep_after_seconds;
          if (!manual.has('budget_usd_per_day') && content.budget_usd_per_day != null) set.budget_usd_per_day = content.budget_usd_per_day;
          await updateIfVersion(trx, { table: 'teams', where: { id: team.id }, expected, set, what: 'team', label: name });
          for (const r of removed) await store.deleteRole(trx, team.id, r.role);
          for (const r of fresh) {
            const old = keep.get(r.role);
            if (!old) {
              const m = minted.find((x) => x.role === r.role)!;
              await store.insertRoles(trx, [{ ...r, proxy_key_id: m.key_id, proxy_key: m.sealed }]);
              continue;
            }
            const values: Record<string, unknown> = { ...r, row_version: sql`nextval('row_version_seq')` };
            delete values.team_id;
            delete values.role;
            for (const k of old.manual_fields) if ((ROLE_MANUAL as readonly string[]).includes(k)) values[k] = k === 'memory' ? JSON.stringify(old.memory) : (old as Record<string, unknown>)[k];
            // The key's limits are the key's: they were minted with it.
            for (const k of KEY_LIMITS) values[k] = old[k];
            await store.updateRole(trx, team.id, r.role, values);
          }
          await recordAudit(trx, actor, 'team.upgrade', { type: 'team', id: name }, { from: team.template_version, to: version.version });
          // After commit: the removed roles' keys go, and the proxy takes the stored budget and models.
          await provisioning.revokeKeysLater(trx, removed.flatMap((r) => (r.proxy_key_id ? [r.proxy_key_id] : [])), actor);
          await provisioning.syncLater(trx, team.id, actor);
        });
      } catch (err) {
        await provisioning.revokeKeysLater(db, minted.map((m) => m.key_id), actor);
        throw err;
      }
      return (await store.getTeamById(db, team.id))!;
    },

    /** For the tasks route: has the live team of a name spent its budget for today (UTC)? */
    isBudgetSpent: async (name: string) => provisioning.isBudgetSpent(await mustGetLive(name)),

    async listSkills(name: string, query: { limit: number; cursor?: string }) {
      const t = await mustGetLive(name);
      const rows = await store.listSkills(db, t.id, decodeCursor(query.cursor, ['string']), query.limit);
      return toPage(rows, query.limit, (r) => [r.name], (r) => ({ name: r.name, version: r.version, status: r.status, source: r.source, updated_at: r.updated_at }));
    },

    /**
     * An agent proposes a skill for its team: stored `proposed` (given to no role) until a
     * person curates it. A new proposal of a still-proposed name replaces it (a new version);
     * a curated skill of the name is a person's, so the proposal is refused (409).
     */
    async proposeSkill(actor: Actor, teamName: string, input: { name: string; description: string; instructions: string; source: string }) {
      // JSON strings are YAML scalars: whatever the agent wrote, the front matter stays well formed.
      const body = `---\nname: ${JSON.stringify(input.name)}\ndescription: ${JSON.stringify(input.description.replace(/\s+/g, ' ').trim())}\n---\n\n${input.instructions}\n`;
      const { errors } = checkSkill(input.name, body, {});
      if (errors.length) throw problems.validation(errors);
      return db.transaction().execute(async (trx) => {
        const t = await store.getLiveTeam(trx, teamName);
        if (!t) throw problems.notFound('team', teamName);
        const existing = await store.skillForUpdate(trx, t.id, input.name);
        if (existing?.status === 'curated') throw problems.conflict(`team "${teamName}" already has a curated skill named "${input.name}"; a person changes it`, [{ field: 'name', message: 'is taken' }]);
        const version = (existing?.version ?? 0) + 1;
        if (existing) {
          await store.updateSkill(trx, t.id, input.name, { version, body, source: input.source });
        } else {
          await store.insertSkill(trx, { team_id: t.id, name: input.name, version, status: 'proposed', source: input.source, body });
        }
        await recordAudit(trx, actor, 'team.skill_propose', { type: 'team', id: teamName }, { skill: input.name, version, source: input.source });
        return { name: input.name, version, status: 'proposed' as const };
      });
    },

    /**
     * A person decides on a proposed skill (chat's `skills accept|reject <name>`): accepted, it
     * becomes `curated` (the team's roles get it); rejected, it is removed. 404 when the team
     * has no skill of the name, 409 when it is not proposed.
     */
    async decideSkill(actor: Actor, teamName: string, name: string, decision: 'accept' | 'reject') {
      return db.transaction().execute(async (trx) => {
        const t = await store.getLiveTeam(trx, teamName);
        if (!t) throw problems.notFound('team', teamName);
        const existing = await trx.selectFrom('team_skills').select(['status', 'version']).where('team_id', '=', t.id).where('name', '=', name).forUpdate().executeTakeFirst();
        if (!existing) throw problems.notFound(`skill of team "${teamName}"`, name);
        if (existing.status !== 'proposed') throw problems.conflict(`skill "${name}" of team "${teamName}" is already curated; change it in the Crewhouse console`);
        if (decision === 'accept') await trx.updateTable('team_skills').set({ status: 'curated', updated_at: sql`now()` }).where('team_id', '=', t.id).where('name', '=', name).execute();
        else await trx.deleteFrom('team_skills').where('team_id', '=', t.id).where('name', '=', name).execute();
        await recordAudit(trx, actor, decision === 'accept' ? 'team.skill_accept' : 'team.skill_reject', { type: 'team', id: teamName }, { skill: name, version: existing.version });
        return { name, decision };
      });
    },

    countActiveByTemplate: (templates: string[], q: RefQuery = db) => store.countActiveByTemplate(q, templates),
    countTeamsUsingAgent: (agents: string[], q: RefQuery = db) => store.countTeamsUsingAgent(q, agents),
    countOverridesNaming: (destinations: string[], q: RefQuery = db) => store.countOverridesNaming(q, destinations),
  };
}

export type TeamsService = ReturnType<typeof createTeamsService>;
export type { RoleValues };
