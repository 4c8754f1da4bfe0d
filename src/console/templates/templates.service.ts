import type { Transaction } from 'kysely';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import { deleteIfVersion, updateIfVersion } from '../../db/conditional.ts';
import { within } from '../../db/within.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';
import { problems, type FieldProblem } from '../../errors/problems.ts';
import type { ModelCatalog } from '../../models/catalog.ts';
import type { References, RefQuery } from '../../references.ts';
import { canonicalJson, sha256Hex } from './canonical.ts';
import { roleInput } from './role-input.ts';
import type { TeamTemplateVersion, TemplateContent, TemplateCreate, TemplateNewVersion, TemplateRole, TemplateVersionInput } from './templates.schemas.ts';
import * as store from './templates.store.ts';

/** The values a template version copies from an environment when it is created. */
export interface EnvironmentSnapshot {
  provider: string;
  profile: string;
  vcpus: number | null;
  memory_mib: number | null;
  disk_gib: number | null;
  checkpoint_id: string | null;
}

type VersionRow = NonNullable<Awaited<ReturnType<typeof store.getVersion>>>;
type TemplateRow = NonNullable<Awaited<ReturnType<typeof store.getTemplate>>>;

export const DEFAULT_REWORK_ROUNDS = 2;

export function presentVersion(row: VersionRow): TeamTemplateVersion {
  return { version: row.version, note: row.note, created_by: row.created_by, created_at: row.created_at, content_sha256: row.content_sha256, ...row.content };
}

/** Checks a pipeline is a chain over the roles: known roles, no self hand-off, one predecessor each, no cycle, nothing hands to the lead. */
export function pipelineProblems(pipeline: Record<string, string>, roles: string[], lead: string): FieldProblem[] {
  const errors: FieldProblem[] = [];
  const predecessors = new Map<string, string>();
  for (const [from, to] of Object.entries(pipeline)) {
    const field = `pipeline.${from}`;
    if (!roles.includes(from)) errors.push({ field, message: `"${from}" is not a role of this template` });
    if (!roles.includes(to)) errors.push({ field, message: `hands off to "${to}", which is not a role of this template` });
    if (from === to) errors.push({ field, message: 'a role cannot hand off to itself' });
    if (to === lead) errors.push({ field, message: `cannot hand back to the lead "${lead}": work starts with the lead` });
    const prev = predecessors.get(to);
    if (prev !== undefined) errors.push({ field, message: `"${to}" already follows "${prev}"; a pipeline is a chain` });
    predecessors.set(to, from);
  }
  for (const start of Object.keys(pipeline)) {
    const seen = new Set<string>([start]);
    const next = (role: string) => (Object.hasOwn(pipeline, role) ? pipeline[role] : undefined);
    let at = next(start);
    while (at !== undefined) {
      if (seen.has(at)) {
        errors.push({ field: 'pipeline', message: `the hand-offs from "${start}" form a cycle` });
        return errors;
      }
      seen.add(at);
      at = next(at);
    }
  }
  return errors;
}

const REQUIRED_WITHOUT_BASE = ['lead', 'roles', 'sleep', 'idle_after_seconds', 'deep_sleep_after_seconds', 'budget_usd_per_day'] as const;

export function createTemplatesService(deps: {
  db: Db;
  references: References;
  models: ModelCatalog;
  environmentOf: (name: string, q?: RefQuery) => Promise<EnvironmentSnapshot | null>;
}) {
  const { db, references } = deps;

  type InputRole = TemplateVersionInput['roles'][string];
  const NAMED: Array<{ kind: 'agent' | 'environment' | 'skill' | 'mcp_server'; pick: (r: InputRole) => string[]; field: string; what: string }> = [
    { kind: 'agent', pick: (r) => [r.agent], field: 'agent', what: 'agent' },
    { kind: 'environment', pick: (r) => [r.vm], field: 'vm', what: 'environment' },
    { kind: 'skill', pick: (r) => r.skills ?? [], field: 'skills', what: 'platform skill' },
    { kind: 'mcp_server', pick: (r) => r.mcp_servers ?? [], field: 'mcp_servers', what: 'platform MCP server' },
  ];

  /** The names a version body refers to that do not exist (asked on `q`), as field problems. */
  async function unknownNames(input: TemplateVersionInput, q?: RefQuery): Promise<FieldProblem[]> {
    const errors: FieldProblem[] = [];
    const roles = Object.entries(input.roles);
    for (const { kind, pick, field, what } of NAMED) {
      const unknown = new Set(await references.unknown(kind, roles.flatMap(([, r]) => pick(r)), q));
      for (const [name, r] of roles) for (const v of pick(r)) if (unknown.has(v)) errors.push({ field: `roles.${name}.${field}`, message: `no ${what} named "${v}"` });
    }
    return errors;
  }

  /** In a write's transaction: holds the names a version body refers to against deletion, then checks them again. */
  async function guardNames(trx: Transaction<Database>, input: TemplateVersionInput) {
    const roles = Object.values(input.roles);
    for (const { kind, pick } of NAMED) await references.guard(trx, kind, roles.flatMap(pick), 'use');
    const errors = await unknownNames(input, trx);
    if (errors.length) throw problems.validation(errors);
  }

  /**
   * The whole version a new-version body describes: the body itself, or with `from_version` that
   * stored version with the fields present in the body changed; `keepRoles` when its roles stay.
   */
  async function wholeVersion(name: string, body: TemplateNewVersion, q?: RefQuery): Promise<{ input: TemplateVersionInput; keepRoles: Record<string, TemplateRole> | null }> {
    const { from_version: from, ...given } = body;
    const present = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) as Partial<TemplateVersionInput>;
    if (from === undefined || from === null) {
      const missing = REQUIRED_WITHOUT_BASE.filter((k) => present[k] === undefined);
      if (missing.length) throw problems.validation(missing.map((field) => ({ field, message: 'is required when from_version is not given' })));
      return { input: present as TemplateVersionInput, keepRoles: null };
    }
    const base = await store.getVersion(q ?? db, name, from);
    if (!base) throw problems.validation([{ field: 'from_version', message: `team template "${name}" has no version ${from}` }]);
    const c = base.content;
    const roles: TemplateVersionInput['roles'] = {};
    for (const [role, r] of Object.entries(c.roles)) roles[role] = { ...roleInput(r), confirmation_policy: r.confirmation_policy as InputRole['confirmation_policy'] };
    const stored: TemplateVersionInput = {
      lead: c.lead ?? '',
      roles,
      // The top-level durations are the stored ones; `sleep` only repeats them.
      sleep: {},
      idle_after_seconds: c.idle_after_seconds,
      deep_sleep_after_seconds: c.deep_sleep_after_seconds,
      budget_usd_per_day: c.budget_usd_per_day ?? 0,
      isolation: c.isolation,
      requires_repo: c.requires_repo,
      rework_rounds: c.rework_rounds ?? undefined,
      pipeline: c.pipeline ?? {},
    };
    return { input: { ...stored, ...present }, keepRoles: present.roles === undefined ? c.roles : null };
  }

  /** Validates a version body and resolves it into stored content, copying each role's environment. */
  async function contentOf(input: TemplateVersionInput, q?: RefQuery): Promise<TemplateContent> {
    const errors: FieldProblem[] = [];
    const roleNames = Object.keys(input.roles);
    if (!roleNames.includes(input.lead)) errors.push({ field: 'lead', message: `must be one of the roles (${roleNames.join(', ')})` });
    for (const key of ['idle_after_seconds', 'deep_sleep_after_seconds'] as const) {
      if (input.sleep[key] !== undefined && input.sleep[key] !== input[key]) errors.push({ field: `sleep.${key}`, message: `must equal ${key} (${input[key]})` });
    }
    if (input.deep_sleep_after_seconds < input.idle_after_seconds) errors.push({ field: 'deep_sleep_after_seconds', message: 'must be at least idle_after_seconds' });
    errors.push(...pipelineProblems(input.pipeline ?? {}, roleNames, input.lead));

    const roles = Object.entries(input.roles);
    errors.push(...(await unknownNames(input, q)));
    for (const [name, r] of roles) {
      if (!deps.models.get(r.model)) errors.push({ field: `roles.${name}.model`, message: `no model alias named "${r.model}"; the aliases are ${deps.models.aliases.map((a) => a.alias).join(', ')}` });
      if (r.budget_duration && (r.max_budget === undefined || r.max_budget === null)) errors.push({ field: `roles.${name}.budget_duration`, message: 'needs max_budget' });
    }
    if (errors.length) throw problems.validation(errors);

    const resolved: Record<string, TemplateRole> = {};
    for (const [name, r] of roles) {
      const env = await deps.environmentOf(r.vm, q);
      if (!env) throw problems.validation([{ field: `roles.${name}.vm`, message: `no environment named "${r.vm}"` }]);
      resolved[name] = {
        agent: r.agent,
        model: r.model,
        vm: r.vm,
        ...env,
        replicas: { max: r.replicas?.max ?? 1 },
        concurrent_runs: r.concurrent_runs ?? 1,
        max_iterations: r.max_iterations ?? null,
        confirmation_policy: r.confirmation_policy ?? null,
        memory: { ...(r.memory ?? {}) },
        max_budget: r.max_budget ?? null,
        budget_duration: r.max_budget ? (r.budget_duration ?? '1d') : null,
        rpm_limit: r.rpm_limit ?? null,
        tpm_limit: r.tpm_limit ?? null,
        skills: [...new Set(r.skills ?? [])],
        mcp_servers: [...new Set(r.mcp_servers ?? [])],
      };
    }
    return {
      lead: input.lead,
      roles: resolved,
      sleep: { idle_after_seconds: input.idle_after_seconds, deep_sleep_after_seconds: input.deep_sleep_after_seconds },
      idle_after_seconds: input.idle_after_seconds,
      deep_sleep_after_seconds: input.deep_sleep_after_seconds,
      budget_usd_per_day: input.budget_usd_per_day,
      isolation: input.isolation ?? 'shared',
      requires_repo: input.requires_repo ?? false,
      rework_rounds: input.rework_rounds ?? DEFAULT_REWORK_ROUNDS,
      pipeline: input.pipeline ?? {},
    };
  }

  async function detail(row: TemplateRow) {
    const current = await store.getVersion(db, row.name, row.current_version);
    return {
      name: row.name,
      description: row.description,
      current_version: row.current_version,
      updated_at: row.updated_at,
      used_by: await references.uses('template', row.name),
      current: current ? presentVersion(current) : null,
    };
  }

  return {
    detail,

    async list(query: { limit: number; cursor?: string }) {
      const rows = await store.listTemplates(db, decodeCursor(query.cursor, ['string']), query.limit);
      const page = toPage(rows, query.limit, (r) => [r.name], (r) => r);
      const uses = await references.usesMany('template', page.items.map((r) => r.name));
      const items = page.items.map((r) => ({
        name: r.name,
        description: r.description,
        current_version: r.current_version,
        updated_at: r.updated_at,
        used_by: uses.get(r.name) ?? 0,
        lead: r.content.lead,
        roles: Object.keys(r.content.roles),
      }));
      return { items, next_cursor: page.next_cursor };
    },

    async get(name: string, q?: RefQuery) {
      const row = await store.getTemplate(q ?? db, name);
      if (!row) throw problems.notFound('team template', name);
      return row;
    },

    /**
     * The stored content a version body (without from_version) resolves to, validated with names
     * asked on `q`, and its content_sha256: what a new version would hold, without writing it.
     */
    async resolve(input: TemplateVersionInput, q?: RefQuery): Promise<{ content: TemplateContent; content_sha256: string }> {
      const content = await contentOf(input, q);
      return { content, content_sha256: sha256Hex(canonicalJson(content)) };
    },

    /** Creates a template; given `trx`, as one step of the caller's transaction, which records the audit itself. */
    async create(actor: Actor, input: TemplateCreate, trx?: Transaction<Database>) {
      const outer = trx;
      const { name, description, ...version } = input;
      const content = await contentOf(version, trx);
      return within(db, trx, async (trx) => {
        await guardNames(trx, version);
        if (await store.getTemplate(trx, name)) throw problems.conflict(`a team template named "${name}" already exists`, [{ field: 'name', message: 'is taken' }]);
        const row = await trx.insertInto('team_templates').values({ name, description: description ?? '', current_version: 1 }).returningAll().executeTakeFirstOrThrow();
        await store.insertVersion(trx, { template_name: name, version: 1, note: version.note ?? '', created_by: actor.name, content, content_sha256: sha256Hex(canonicalJson(content)) });
        if (!outer) await recordAudit(trx, actor, 'team_template.create', { type: 'team_template', id: name }, { version: 1 });
        return row;
      });
    },

    async patch(actor: Actor, name: string, expected: number, description: string | null, trx?: Transaction<Database>) {
      const outer = trx;
      return within(db, trx, async (trx) => {
        const row = await updateIfVersion<TemplateRow>(trx, { table: 'team_templates', where: { name }, expected, set: { description: description ?? '' }, what: 'team template', label: name });
        if (!outer) await recordAudit(trx, actor, 'team_template.update', { type: 'team_template', id: name }, { fields: ['description'] });
        return row;
      });
    },

    async remove(actor: Actor, name: string, expected: number, trx?: Transaction<Database>) {
      const outer = trx;
      await this.get(name, trx);
      const inUse = (teams: number) => problems.conflict(`team template "${name}" is used by ${teams} active team(s); archive them first`);
      await references.deleteUnlessUsed(trx ?? db, 'template', name, inUse, async (trx) => {
        await deleteIfVersion(trx, { table: 'team_templates', where: { name }, expected, what: 'team template', label: name });
        if (!outer) await recordAudit(trx, actor, 'team_template.delete', { type: 'team_template', id: name });
      });
    },

    async createVersion(actor: Actor, name: string, expected: number, body: TemplateNewVersion, trx?: Transaction<Database>) {
      const outer = trx;
      await this.get(name, trx);
      const { input, keepRoles } = await wholeVersion(name, body, trx);
      const content = await contentOf(input, trx);
      // Roles taken unchanged from the stored version keep the environment values it copied.
      if (keepRoles) content.roles = keepRoles;
      return within(db, trx, async (trx) => {
        await guardNames(trx, input);
        const version = await store.nextVersion(trx, name);
        // The If-Match check and the move of current_version are one statement.
        await updateIfVersion(trx, { table: 'team_templates', where: { name }, expected, set: { current_version: version }, what: 'team template', label: name });
        const row = await store.insertVersion(trx, { template_name: name, version, note: input.note ?? '', created_by: actor.name, content, content_sha256: sha256Hex(canonicalJson(content)) });
        if (!outer) await recordAudit(trx, actor, 'team_template.version', { type: 'team_template', id: name }, { version });
        return row;
      });
    },

    async getVersion(name: string, version: number, q?: RefQuery) {
      await this.get(name, q);
      const row = await store.getVersion(q ?? db, name, version);
      if (!row) throw problems.notFound(`version of team template "${name}"`, version);
      return row;
    },

    async listVersions(name: string, query: { limit: number; cursor?: string }) {
      await this.get(name);
      const rows = await store.listVersions(db, name, decodeCursor(query.cursor, ['number']), query.limit);
      return toPage(rows, query.limit, (r) => [r.version], (r) => r);
    },

    /** Current template versions naming a thing: for agents', environments', skills' and MCP servers' usage counts. */
    countCurrentUses: (column: 'agent' | 'environment' | 'mcp_servers' | 'skills', names: string[], q: RefQuery = db) => store.countCurrentUses(q, column, names),

    /** Which of these names are not team templates (asked on `q`). */
    /** The size a template version copied for one of its roles from the role's environment (null when it names none or the version or role is gone), read on `q`. */
    async roleSize(name: string, version: number, role: string, q: RefQuery = db): Promise<{ vcpus: number | null; memory_mib: number | null; disk_gib: number | null } | null> {
      const row = await store.getVersion(q ?? db, name, version);
      const r = row?.content.roles[role];
      return r ? { vcpus: r.vcpus, memory_mib: r.memory_mib, disk_gib: r.disk_gib } : null;
    },

    async unknown(names: string[], q: RefQuery = db): Promise<string[]> {
      const missing: string[] = [];
      for (const n of names) if (!(await store.getTemplate(q, n))) missing.push(n);
      return missing;
    },
  };
}

export type TemplatesService = ReturnType<typeof createTemplatesService>;
