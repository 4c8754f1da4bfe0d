import { sql, type Kysely, type Transaction } from 'kysely';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { deleteIfVersion, touchVersion, updateIfVersion } from '../../db/conditional.ts';
import { within } from '../../db/within.ts';
import type { Database } from '../../db/schema.ts';
import { decodeCursor, toPage, type CursorValue } from '../../db/pagination.ts';
import { Problem, problems, type FieldProblem } from '../../errors/problems.ts';
import { checkEgress, normalizeEgress } from '../../egress/setting.ts';
import type { ModelCatalog } from '../../models/catalog.ts';
import { unknownTools } from '../../agent/tools/catalog.ts';
import type { DocumentsService } from '../documents/documents.service.ts';
import type { References, RefQuery } from '../../references.ts';
import { API_PREFIX } from '../../http/openapi.ts';
import { AVATAR_MAX_BYTES, CONTEXT_MAX_BYTES, type Agent, type AgentCreate, type AgentPatch, type AgentSummary, type AgentVersion, type AgentVersionInput } from './agents.schemas.ts';
import { sniffImage } from './avatar.ts';
import * as store from './agents.store.ts';

type Q = Kysely<Database> | Transaction<Database>;
type AgentRow = NonNullable<Awaited<ReturnType<typeof store.getAgent>>>;
type VersionRow = NonNullable<Awaited<ReturnType<typeof store.getVersion>>>;
type VersionMetaRow = Pick<VersionRow, 'version' | 'note' | 'created_by' | 'created_at'>;
type Content = Omit<AgentVersion, 'version' | 'note' | 'created_by' | 'created_at'>;

export function presentVersion(row: VersionRow): AgentVersion {
  return {
    version: row.version,
    note: row.note,
    created_by: row.created_by,
    created_at: row.created_at,
    system_prompt: row.system_prompt,
    tools: row.tools,
    confirmation_policy: row.confirmation_policy,
    produces_branch: row.produces_branch,
    works_on_branch: row.works_on_branch,
    skills: row.skills,
    mcp_servers: row.mcp_servers,
    egress: normalizeEgress(row.egress),
    context: row.context,
    model: row.model,
    environment: row.environment,
  };
}

export const presentVersionMeta = (row: VersionMetaRow) => ({ version: row.version, note: row.note, created_by: row.created_by, created_at: row.created_at });

/**
 * The agent version a run works with: for a run already going, the version it pinned when it
 * started (`pinned`); for a new run, the agent's current version at this moment. A new
 * version therefore reaches only runs that start after it.
 */
export async function agentVersionForRun(db: Q, agent: string, pinned: number | null = null): Promise<AgentVersion> {
  let row: VersionRow | undefined;
  if (pinned === null) {
    row = (await store.currentVersions(db, [agent]))[0];
    if (!row) throw problems.notFound('agent', agent);
  } else {
    row = await store.getVersion(db, agent, pinned);
    if (!row) throw problems.notFound(`version of agent "${agent}"`, pinned);
  }
  return presentVersion(row);
}

/** A decoded cursor whose key has the list's type; another list's cursor is a 400. */
export function cursorOf(cursor: CursorValue[] | null, type: 'string' | 'number'): CursorValue[] | null {
  if (cursor && typeof cursor[0] !== type) throw problems.badRequest('cursor is not a cursor this list gave out', [{ field: 'cursor', message: 'not a valid cursor' }]);
  return cursor;
}

/**
 * Rules 1 to 4 of a version input: the base is the stored `from_version` or nothing. null
 * means "not given" except for works_on_branch, model and environment, where it is a value;
 * an omitted field keeps the base's value or the default.
 */
function resolveContent(input: AgentVersionInput, base: VersionRow | null, prefix: string): Content {
  const b = base ? presentVersion(base) : null;
  // Omitted keeps the base's value; null is a value of its own.
  const kept = <T>(given: T | null | undefined, based: T | null | undefined): T | null => (given !== undefined ? given : (based ?? null));
  const systemPrompt = input.system_prompt ?? b?.system_prompt;
  if (systemPrompt === undefined) throw problems.invalidField(`${prefix}system_prompt`, 'is required when from_version is not given');
  const egress = input.egress ? normalizeEgress(input.egress) : (b?.egress ?? normalizeEgress(null));
  return {
    system_prompt: systemPrompt,
    tools: input.tools ?? b?.tools ?? [],
    confirmation_policy: input.confirmation_policy ?? b?.confirmation_policy ?? 'never_confirm',
    produces_branch: input.produces_branch ?? b?.produces_branch ?? false,
    works_on_branch: kept(input.works_on_branch, b?.works_on_branch),
    skills: input.skills ?? b?.skills ?? [],
    mcp_servers: input.mcp_servers ?? b?.mcp_servers ?? [],
    egress,
    context: input.context ?? b?.context ?? [],
    model: kept(input.model, b?.model),
    environment: kept(input.environment, b?.environment),
  };
}

/** The whitelist of what leaves the server about an agent, with its current version. */
export function presentAgent(row: AgentRow, extra: { current: AgentVersion | null; avatarUrl: string | null; usedBy: number }): AgentSummary & { current: AgentVersion | null } {
  const { current } = extra;
  return {
    name: row.name,
    display_name: row.display_name,
    kind: row.kind,
    description: row.description,
    avatar_url: extra.avatarUrl,
    model: current?.model ?? null,
    environment: current?.environment ?? null,
    tool_count: current?.tools.length ?? 0,
    mcp: current?.mcp_servers ?? [],
    current_version: row.current_version,
    used_by: extra.usedBy,
    updated_at: row.updated_at,
    current,
  };
}

/**
 * Agent definitions and their versions. The composition root wires what this module answers
 * others: the 'agent' and 'tool' names (`unknown`, `unknownTools`), its uses of environments,
 * destinations and MCP servers (`usesOf`), and the 'agent' owner of context documents
 * (`lockShared`).
 */
export function createAgentsService(deps: { db: Db; references: References; models: ModelCatalog; documents: Pick<DocumentsService, 'deleteAllOf'>; publicBaseUrl: string }) {
  const { db, references, models, documents } = deps;

  const avatarUrl = (name: string, version: number) => `${deps.publicBaseUrl}${API_PREFIX}/agents/${encodeURIComponent(name)}/avatar?v=${version}`;

  /** Every name a version refers to must exist (asked on `q`): 422 naming the field and the names. */
  async function checkNames(content: Content, prefix: string, q?: RefQuery) {
    const errors: FieldProblem[] = [];
    const unknownIn = async (field: string, kind: Parameters<References['unknown']>[0], names: string[], what: string) => {
      const unknown = new Set(await references.unknown(kind, names, q));
      names.forEach((n, i) => {
        if (unknown.has(n)) errors.push({ field: `${prefix}${field}.${i}`, message: `no ${what} named "${n}"` });
      });
    };
    // One at a time: inside a transaction they share its single connection.
    for (const check of [
      () => unknownIn('tools', 'tool', content.tools, 'built-in tool (see GET /tools)'),
      () => unknownIn('skills', 'skill', content.skills, 'platform skill'),
      () => unknownIn('mcp_servers', 'mcp_server', content.mcp_servers, 'platform MCP server'),
      () => unknownIn('egress.destinations', 'destination', content.egress.destinations, 'destination'),
    ]) {
      await check();
    }
    if (content.environment !== null && (await references.unknown('environment', [content.environment], q)).length > 0) {
      errors.push({ field: `${prefix}environment`, message: `no environment named "${content.environment}"` });
    }
    if (content.model !== null && !models.get(content.model)) {
      errors.push({ field: `${prefix}model`, message: `no model alias named "${content.model}"; the aliases are ${deps.models.aliases.map((a) => a.alias).join(', ')}` });
    }
    errors.push(...checkEgress(content.egress, `${prefix}egress`));
    const contextBytes = Buffer.byteLength(JSON.stringify(content.context));
    if (contextBytes > CONTEXT_MAX_BYTES) errors.push({ field: `${prefix}context`, message: `must be at most ${CONTEXT_MAX_BYTES / 1024} KiB as JSON (it is ${contextBytes} bytes)` });
    if (errors.length) throw problems.validation(errors);
  }

  async function versionInput(name: string, input: AgentVersionInput, prefix: string, q?: Q) {
    let base: VersionRow | null = null;
    if (input.from_version !== undefined && input.from_version !== null) {
      base = (await store.getVersion(q ?? db, name, input.from_version)) ?? null;
      if (!base) throw problems.invalidField(`${prefix}from_version`, `agent "${name}" has no version ${input.from_version}`);
    }
    const content = resolveContent(input, base, prefix);
    await checkNames(content, prefix, q);
    return { content, note: input.note ?? '', from: base?.version ?? null };
  }

  /** In a write's transaction: holds the names a version refers to against deletion, then checks them again. */
  async function guardNames(trx: Transaction<Database>, content: Content, prefix: string) {
    await references.guard(trx, 'destination', content.egress.destinations, 'use');
    if (content.environment !== null) await references.guard(trx, 'environment', [content.environment], 'use');
    await references.guard(trx, 'mcp_server', content.mcp_servers, 'use');
    await references.guard(trx, 'skill', content.skills, 'use');
    await checkNames(content, prefix, trx);
  }

  async function summaries(rows: AgentRow[]): Promise<Array<AgentSummary & { current: AgentVersion | null }>> {
    const names = rows.map((r) => r.name);
    const [versions, avatars, usedBy] = await Promise.all([
      store.currentVersions(db, names),
      store.avatarVersions(db, names),
      references.usesMany('agent', names),
    ]);
    const versionOf = new Map(versions.map((v) => [v.agent_name, presentVersion(v)]));
    const avatarOf = new Map(avatars.map((a) => [a.agent_name, a.row_version]));
    return rows.map((row) => {
      const avatar = avatarOf.get(row.name);
      return presentAgent(row, { current: versionOf.get(row.name) ?? null, avatarUrl: avatar === undefined ? null : avatarUrl(row.name, avatar), usedBy: usedBy.get(row.name) ?? 0 });
    });
  }

  /** The whitelist of what leaves the server about one agent. */
  async function present(row: AgentRow): Promise<Agent> {
    return (await summaries([row]))[0];
  }

  async function mustGet(q: Q, name: string): Promise<AgentRow> {
    const row = await store.getAgent(q, name);
    if (!row) throw problems.notFound('agent', name);
    return row;
  }

  return {
    /** Which of the names are no agent's (asked on `q`). */
    async unknown(names: string[], q?: RefQuery): Promise<string[]> {
      const found = await store.existingAgents(q ?? db, names);
      return names.filter((n) => !found.has(n));
    },
    unknownTools: async (names: string[]) => unknownTools(names),
    /** How many agents' current versions name an environment, a destination or an MCP server. */
    usesOf: (kind: 'environment' | 'destination' | 'mcp_server', names: string[], q?: RefQuery): Promise<Map<string, number>> => store.countCurrentUsing(q ?? db, kind, names),
    /** Locks an agent against deletion for the rest of the transaction; false when there is none. */
    lockShared: (q: Kysely<Database> | Transaction<Database>, name: string) => store.lockAgentShared(q, name),

    present,

    async list(query: { limit: number; cursor?: string }) {
      const cursor = cursorOf(decodeCursor(query.cursor, 1), 'string');
      const rows = await store.listAgents(db, cursor, query.limit);
      const page = toPage(rows, query.limit, (r) => [r.name], (r) => r);
      const items = (await summaries(page.items)).map(({ current: _current, ...summary }) => summary);
      return { items, next_cursor: page.next_cursor };
    },

    get: (name: string, q?: Q) => mustGet(q ?? db, name),

    /** The stored version content a version input resolves to (rules 1 to 5, names asked on `q`, fields named after `prefix`), without writing it. */
    resolveVersion: async (name: string, input: AgentVersionInput, q?: Q, prefix = ''): Promise<Content> => (await versionInput(name, input, prefix, q)).content,

    /** Creates an agent; given `trx`, as one step of the caller's transaction, which records the audit itself. */
    async create(actor: Actor, input: AgentCreate, trx?: Transaction<Database>) {
      const outer = trx;
      if (await store.getAgent(trx ?? db, input.name)) throw problems.conflict(`an agent named "${input.name}" already exists`, [{ field: 'name', message: 'is taken' }]);
      if (input.version.from_version !== undefined && input.version.from_version !== null) {
        throw problems.invalidField('version.from_version', 'a new agent has no versions to start from');
      }
      const { content, note } = await versionInput(input.name, input.version, 'version.', trx);
      return within(db, trx, async (trx) => {
        await guardNames(trx, content, 'version.');
        const row = await store.insertAgent(trx, {
          name: input.name,
          display_name: input.display_name ?? null,
          kind: input.kind ?? null,
          description: input.description ?? '',
          current_version: 1,
          created_by: actor.name,
        });
        await store.insertVersion(trx, { agent_name: input.name, version: 1, note, created_by: actor.name, ...content });
        if (!outer) await recordAudit(trx, actor, 'agent.create', { type: 'agent', id: input.name }, { version: 1 });
        return row;
      });
    },

    async patch(actor: Actor, name: string, expected: number, patch: AgentPatch, trx?: Transaction<Database>) {
      const outer = trx;
      const set: Record<string, unknown> = {};
      if (patch.display_name !== undefined) set.display_name = patch.display_name;
      if (patch.kind !== undefined) set.kind = patch.kind;
      if (patch.description !== undefined) set.description = patch.description ?? '';
      return within(db, trx, async (trx) => {
        const row = await updateIfVersion<AgentRow>(trx, { table: 'agents', where: { name }, expected, set, what: 'agent', label: name });
        if (!outer) await recordAudit(trx, actor, 'agent.update', { type: 'agent', id: name }, { fields: Object.keys(patch) });
        return row;
      });
    },

    /** Deletes an agent with its versions, avatar and documents; 409 while a template or team uses it. */
    async remove(actor: Actor, name: string, expected: number, trx?: Transaction<Database>) {
      const outer = trx;
      await mustGet(trx ?? db, name);
      const inUse = (used: number) => problems.conflict(`agent "${name}" is used by ${used} template version(s) or team(s); remove those uses first`);
      await references.deleteUnlessUsed(trx ?? db, 'agent', name, inUse, async (trx) => {
        await deleteIfVersion(trx, { table: 'agents', where: { name }, expected, what: 'agent', label: name });
        const removed = await documents.deleteAllOf(trx, 'agent', name);
        if (outer) return;
        await recordAudit(trx, actor, 'agent.delete', { type: 'agent', id: name }, { documents_removed: removed });
      });
    },

    async listVersions(name: string, query: { limit: number; cursor?: string }) {
      const cursor = decodeCursor(query.cursor, 1);
      await mustGet(db, name);
      const rows = await store.listVersions(db, name, cursorOf(cursor, 'number'), query.limit);
      return toPage(rows, query.limit, (r) => [r.version], presentVersionMeta);
    },

    async getVersion(name: string, version: number) {
      await mustGet(db, name);
      const row = await store.getVersion(db, name, version);
      if (!row) throw problems.notFound(`version of agent "${name}"`, version);
      return presentVersion(row);
    },

    /** Adds a version (rules 1 to 5) and makes it current; If-Match is the agent's ETag. */
    async addVersion(actor: Actor, name: string, expected: number, input: AgentVersionInput, trx?: Transaction<Database>) {
      const outer = trx;
      await mustGet(trx ?? db, name);
      const { content, note, from } = await versionInput(name, input, '', trx);
      return within(db, trx, async (trx) => {
        await guardNames(trx, content, '');
        const agent = await updateIfVersion<AgentRow>(trx, {
          table: 'agents',
          where: { name },
          expected,
          set: { current_version: sql`current_version + 1` },
          what: 'agent',
          label: name,
        });
        const row = await store.insertVersion(trx, { agent_name: name, version: agent.current_version, note, created_by: actor.name, ...content });
        if (!outer) await recordAudit(trx, actor, 'agent.version.create', { type: 'agent', id: name }, { version: row.version, from_version: from });
        return { agent, version: presentVersion(row) };
      });
    },

    versionForRun: (name: string, pinned: number | null = null) => agentVersionForRun(db, name, pinned),

    async getAvatar(name: string) {
      await mustGet(db, name);
      const row = await store.getAvatar(db, name);
      if (!row) throw new Problem(404, 'not-found', 'Not found', `the agent "${name}" has no avatar yet; an admin sets one`);
      return { media_type: row.media_type, bytes: Buffer.from(row.bytes), row_version: row.row_version };
    },

    /**
     * Sets the avatar. The type comes from the bytes (PNG, JPEG, GIF, WebP), whatever the
     * header said; 415 otherwise, 413 above 512 KiB. Replacing needs the avatar's ETag; a first
     * avatar needs none, and takes the agent's ETag when one is sent.
     */
    async putAvatar(actor: Actor, name: string, expected: number | null, body: unknown) {
      const bytes = Buffer.isBuffer(body) ? body : null;
      const type = bytes ? sniffImage(bytes) : null;
      if (!bytes || !type) throw problems.unsupportedMediaType('the avatar must be a PNG, JPEG, GIF or WebP image; its type is read from the bytes');
      if (bytes.length > AVATAR_MAX_BYTES) throw problems.payloadTooLarge(`the avatar is ${bytes.length} bytes; at most ${AVATAR_MAX_BYTES / 1024} KiB`);
      return db.transaction().execute(async (trx) => {
        const agentVersion = await store.lockAgent(trx, name);
        if (agentVersion === null) throw problems.notFound('agent', name);
        // Bumps the agent's ETag too: its avatar_url changes with the avatar.
        await touchVersion(trx, 'agents', { name });
        const existing = await store.getAvatar(trx, name);
        if (existing && expected === null) throw problems.preconditionRequired();
        // A first avatar has no ETag of its own: an If-Match sent with it is the agent's, whose avatar it sets.
        if (!existing && expected !== null && expected !== agentVersion) throw problems.preconditionFailed();
        const set = { media_type: type, bytes, size_bytes: bytes.length };
        const row = existing
          ? await updateIfVersion<{ row_version: number }>(trx, { table: 'agent_avatars', where: { agent_name: name }, expected: expected as number, set, what: 'avatar', label: name })
          : await store.insertAvatar(trx, { agent_name: name, ...set });
        await recordAudit(trx, actor, 'agent.avatar.update', { type: 'agent', id: name }, { media_type: type, size_bytes: bytes.length, replaced: Boolean(existing) });
        return { row_version: row.row_version };
      });
    },
  };
}

export type AgentsService = ReturnType<typeof createAgentsService>;
