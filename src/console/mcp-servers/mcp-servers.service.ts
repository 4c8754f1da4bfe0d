import type { Transaction } from 'kysely';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { deleteIfVersion, updateIfVersion } from '../../db/conditional.ts';
import type { Database } from '../../db/schema.ts';
import { isBuiltinDestination } from '../../egress/builtins.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';
import { problems, type FieldProblem } from '../../errors/problems.ts';
import type { SecretsService } from '../../secrets/secrets.service.ts';
import type { Logger } from 'pino';
import type { HookCaller } from '../../hooks.ts';
import type { References, RefQuery } from '../../references.ts';
import type { TeamsDirectory } from '../teams/teams.directory.ts';
import { PLATFORM_SEGMENT, type McpServer, type McpServerCreate, type McpServerProposal, type McpServerPut } from './mcp-servers.schemas.ts';
import * as store from './mcp-servers.store.ts';
import type { McpServerRow, ServerColumns } from './mcp-servers.store.ts';

/** A server's address: `team` null for a platform server. */
export interface McpAddress {
  team: string | null;
  name: string;
}

type TeamRoles = Awaited<ReturnType<TeamsDirectory['rolesWithEgress']>>;
type SecretStatus = McpServer['secret']['status'];

const SECRET_PREFIX = 'secret:';
const keyOf = (team: string | null) => team ?? '';
const idOf = (a: McpAddress) => (a.team === null ? `platform:${a.name}` : `${a.team}/${a.name}`);
const label = (a: McpAddress) => (a.team === null ? `platform MCP server` : `MCP server of team "${a.team}"`);

/**
 * `platform:<name>` or `<team>/<name>` (a `{team}` of `platform` also means the platform);
 * anything else names no server.
 */
export function parseMcpId(id: string): McpAddress | null {
  const platform = /^platform:([a-z0-9][a-z0-9-]{0,62})$/.exec(id);
  if (platform) return { team: null, name: platform[1] };
  const team = /^([a-z0-9][a-z0-9-]{0,62})\/([a-z0-9][a-z0-9-]{0,62})$/.exec(id);
  if (team) return addressOf(team[1], team[2]);
  return null;
}

/** The address of a `/mcp-servers/{team}/{name}` path. */
export const addressOf = (team: string, name: string): McpAddress => ({ team: team === PLATFORM_SEGMENT ? null : team, name });

/** Which roles of a team the server is given to lack its destination in their egress. */
export function lackingRoles(server: { destination: string; roles: string[] }, teamRoles: TeamRoles): string[] {
  if (isBuiltinDestination(server.destination)) return [];
  const given = server.roles.length === 0 ? teamRoles : teamRoles.filter((r) => server.roles.includes(r.role));
  return given
    .filter((r) => r.egress.mode === 'allowlist' && !r.egress.destinations.includes(server.destination))
    .map((r) => r.role)
    .sort();
}

/** The whitelist of what leaves the server about an MCP server: the secret's reference and state, never its value. */
/** A server's secret reference and its state; an unset one says the request that sets it. */
function presentSecretRef(ref: string | null, status: SecretStatus) {
  return (status === 'unset' || status === 'missing') && ref ? { ref, status, set_with: `PUT /api/v1/secrets/${ref.slice(SECRET_PREFIX.length)}` } : { ref, status };
}

export function presentMcpServer(row: McpServerRow, extra: { secretStatus: SecretStatus; warnings: string[] }): McpServer {
  const team = row.team_key === '' ? null : row.team_key;
  return {
    id: idOf({ team, name: row.name }),
    scope: team === null ? 'platform' : 'team',
    team,
    name: row.name,
    url: row.url,
    destination: row.destination,
    auth: row.auth,
    header: row.auth_header,
    roles: row.roles,
    secret: presentSecretRef(row.secret, extra.secretStatus),
    status: row.status,
    proposed_by: row.proposed_by,
    warnings: extra.warnings,
    created_by: row.created_by,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/**
 * MCP servers: platform servers (admins) that agents and templates name, and each team's own
 * servers (operators), some of them proposed by the team's agents and curated by a person.
 */
export function createMcpServersService(deps: {
  db: Db;
  references: References;
  secrets: Pick<SecretsService, 'get' | 'declare'>;
  teams: Pick<TeamsDirectory, 'mustGetLive' | 'rolesWithEgress' | 'roleMcpServerNames'>;
  hooks: HookCaller;
  logger: Pick<Logger, 'info'>;
}) {
  const { db, references, teams } = deps;
  /** Locks a live team against archiving for the rest of the transaction; false when there is none. */
  const lockLiveTeam = async (trx: Transaction<Database>, team: string) => (await deps.hooks.ask('lock:team', trx, team)).some(Boolean);

  const unknownDestination = (name: string): FieldProblem => ({ field: 'destination', message: `no destination named "${name}"; the Destinations page lists them` });
  const unknownSecret = (name: string): FieldProblem => ({ field: 'secret', message: `no secret named "${name}"; an admin sets it first (on the Secrets page or with crewhouse secrets set)` });

  /** In a write's transaction: holds the server's destination and secret against deletion, then checks them again (422). */
  async function guardNames(trx: Transaction<Database>, columns: ServerColumns) {
    const secret = columns.secret === null ? [] : [columns.secret.slice(SECRET_PREFIX.length)];
    await references.guard(trx, 'destination', [columns.destination], 'use');
    await references.guard(trx, 'secret', secret, 'use');
    const errors: FieldProblem[] = [];
    if ((await references.unknown('destination', [columns.destination], trx)).length > 0) errors.push(unknownDestination(columns.destination));
    if ((await references.unknown('secret', secret, trx)).length > 0) errors.push(unknownSecret(secret[0]));
    if (errors.length) throw problems.validation(errors);
  }

  function assertMayWrite(actor: Actor, team: string | null) {
    if (team === null && actor.role !== 'admin') throw problems.forbidden('platform MCP servers are managed by admins; operators manage their teams\' servers');
  }

  async function secretStatus(ref: string | null): Promise<SecretStatus> {
    if (ref === null) return 'none';
    const meta = await deps.secrets.get(ref.slice(SECRET_PREFIX.length));
    return meta === null ? 'missing' : meta.set ? 'set' : 'unset';
  }

  /** The reference a server gets when it needs a secret and none is named: its own, in its team's namespace. */
  const ownSecret = (a: McpAddress) => (a.team === null ? `mcp/${a.name}` : `teams/${a.team}/mcp/${a.name}`);

  /** Presents rows, asking each team's roles and each secret's state once. */
  async function presentAll(rows: McpServerRow[]): Promise<McpServer[]> {
    const rolesByTeam = new Map<string, Promise<TeamRoles | null>>();
    const statusBySecret = new Map<string, Promise<SecretStatus>>();
    return Promise.all(
      rows.map(async (row) => {
        const team = row.team_key === '' ? null : row.team_key;
        let warnings: string[] = [];
        if (team !== null) {
          if (!rolesByTeam.has(team)) {
            const roles = teams.rolesWithEgress(team).catch((err) => {
              // An archived team has no roles to warn about; the server is shown without warnings.
              deps.logger.info({ err, team }, 'the roles of a team server\'s team are unavailable');
              return null;
            });
            rolesByTeam.set(team, roles);
          }
          const roles = await rolesByTeam.get(team)!;
          if (roles) warnings = lackingRoles(row, roles);
        }
        const key = row.secret ?? '';
        if (!statusBySecret.has(key)) statusBySecret.set(key, secretStatus(row.secret));
        return presentMcpServer(row, { secretStatus: await statusBySecret.get(key)!, warnings });
      }),
    );
  }

  const present = async (row: McpServerRow) => (await presentAll([row]))[0];

  /** The role names of a live team (404 for an unknown or archived one). */
  async function roleNamesOf(team: string): Promise<string[]> {
    return (await teams.rolesWithEgress(team)).map((r) => r.role);
  }

  /** Checks a body against the rules beyond its schema and gives the columns to store (422 naming each field). */
  async function columnsOf(actor: Actor, a: McpAddress, teamRoles: string[] | null, input: Omit<McpServerPut, 'team' | 'name'>): Promise<ServerColumns> {
    const team = a.team;
    const errors: FieldProblem[] = [];
    const url = input.url.trim();
    let parsed: URL | null = null;
    try {
      parsed = new URL(url);
    } catch {
      errors.push({ field: 'url', message: 'is not a valid URL' });
    }
    if (parsed) {
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') errors.push({ field: 'url', message: 'must be an http or https URL' });
      else if (parsed.username || parsed.password) errors.push({ field: 'url', message: 'must not carry credentials; put them in a secret and set auth and secret' });
      else if (!parsed.hostname) errors.push({ field: 'url', message: 'needs a host' });
    }
    if ((await references.unknown('destination', [input.destination])).length > 0) errors.push(unknownDestination(input.destination));
    // A server that needs a secret and names none gets its own reference, unset until an admin gives it a value.
    const own = input.auth !== 'none' && (input.secret ?? null) === null ? ownSecret(a) : null;
    const secret = own !== null ? `${SECRET_PREFIX}${own}` : (input.secret ?? null);
    const header = input.header ?? null;
    if (input.auth === 'none') {
      if (secret !== null) errors.push({ field: 'secret', message: 'auth none takes no secret' });
    } else if (own !== null || secret === null) {
      // Its own reference: declared below, once everything else is known to be right.
    } else if (team !== null && !secret.slice(SECRET_PREFIX.length).startsWith(`teams/${team}/`)) {
      // Operators manage team servers; they must not be able to send a platform credential
      // (model keys, integration keys) to a URL of their choosing.
      errors.push({ field: 'secret', message: `a team server's secret must be one of the team's: secret:teams/${team}/<name>` });
    } else if ((await references.unknown('secret', [secret.slice(SECRET_PREFIX.length)])).length > 0) {
      errors.push(unknownSecret(secret.slice(SECRET_PREFIX.length)));
    }
    if (input.auth === 'header' && header === null) errors.push({ field: 'header', message: 'auth header needs the name of the header the secret goes in' });
    if (input.auth !== 'header' && header !== null) errors.push({ field: 'header', message: `only auth header takes a header (auth is ${input.auth})` });
    if (team === null) {
      if (input.roles.length > 0) errors.push({ field: 'roles', message: 'a platform server takes no roles: it reaches the roles whose agent or template names it' });
    } else {
      input.roles.forEach((r, i) => {
        if (!teamRoles!.includes(r)) errors.push({ field: `roles.${i}`, message: `team "${team}" has no role "${r}" (roles: ${teamRoles!.join(', ')})` });
      });
    }
    if (errors.length) throw problems.validation(errors);
    if (own !== null) await deps.secrets.declare(actor, own);
    return { url, destination: input.destination, auth: input.auth, auth_header: header, secret, roles: [...input.roles] };
  }

  const auditDetails = (a: McpAddress, c: ServerColumns) => ({ team: a.team, name: a.name, url: c.url, destination: c.destination, auth: c.auth, secret: c.secret, roles: c.roles });

  /** In a write's transaction: a team server's team must still be live, and stays so until commit. */
  async function lockTeam(trx: Transaction<Database>, team: string | null) {
    if (team !== null && !(await lockLiveTeam(trx, team))) throw problems.notFound('team', team);
  }

  async function mustGet(a: McpAddress): Promise<McpServerRow> {
    const row = await store.getServer(db, keyOf(a.team), a.name);
    if (!row) throw problems.notFound(label(a), a.name);
    return row;
  }

  return {
    /** Which of the names are no platform MCP server's (asked on `q`). */
    async unknown(names: string[], q?: RefQuery): Promise<string[]> {
      const found = await store.existingPlatformNames(q ?? db, names);
      return names.filter((n) => !found.has(n));
    },
    /** How many MCP servers name a secret or a destination. */
    async usesOf(kind: 'secret' | 'destination', names: string[], q?: RefQuery): Promise<Map<string, number>> {
      if (kind === 'destination') return store.countWhere(q ?? db, kind, names);
      const counts = await store.countWhere(q ?? db, kind, names.map((n) => `${SECRET_PREFIX}${n}`));
      return new Map([...counts].map(([value, n]) => [value.slice(SECRET_PREFIX.length), n]));
    },

    present,
    presentAll,

    /** Platform servers first, then each team's, by team and name. */
    async list(query: { limit: number; cursor?: string }) {
      const cursor = decodeCursor(query.cursor, ['string', 'string']);
      const rows = await store.listServers(db, cursor, query.limit);
      const page = toPage(rows, query.limit, (r) => [r.team_key, r.name], (r) => r);
      return { items: await presentAll(page.items), next_cursor: page.next_cursor };
    },

    /**
     * The servers a role of a live team may use now: the platform servers its template role and
     * agent name, and the team's curated servers given to it (to every role when they name none).
     * A team server replaces a platform server of the same name, as team documents do.
     */
    async usableBy(team: string, role: string): Promise<McpServerRow[]> {
      const platform = await teams.roleMcpServerNames(team, role);
      const rows = await store.serversFor(db, team, platform);
      const given = rows.filter((r) => r.team_key === '' || r.roles.length === 0 || r.roles.includes(role));
      const byName = new Map<string, McpServerRow>();
      for (const r of given) if (r.team_key !== '' || !byName.has(r.name)) byName.set(r.name, r);
      return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name));
    },

    /** A live team's own servers (proposed and curated), by name: what chat's `mcp` command lists. */
    async ofTeam(team: string): Promise<Array<{ name: string; status: string }>> {
      await teams.mustGetLive(team);
      return store.serversOfTeam(db, team);
    },

    /** One server; a team server of an unknown or archived team is a 404 too. */
    async get(a: McpAddress) {
      if (a.team !== null) await teams.mustGetLive(a.team);
      return mustGet(a);
    },

    async create(actor: Actor, input: McpServerCreate) {
      const team = input.team ?? null;
      assertMayWrite(actor, team);
      let roles: string[] | null = null;
      if (team !== null) {
        roles = await roleNamesOf(team).catch((err) => {
          if (err?.status === 404) throw problems.invalidField('team', `no live team named "${team}"`);
          throw err;
        });
      }
      const a = { team, name: input.name };
      const columns = await columnsOf(actor, a, roles, input);
      return db.transaction().execute(async (trx) => {
        if (team !== null && !(await lockLiveTeam(trx, team))) throw problems.invalidField('team', `no live team named "${team}"`);
        await guardNames(trx, columns);
        const row = await store.insertServer(trx, { team_key: keyOf(team), name: input.name, ...columns, status: 'curated', proposed_by: null, actor: actor.name });
        if (!row) throw problems.conflict(`${a.team === null ? 'a' : 'an'} ${label(a)} named "${input.name}" already exists`, [{ field: 'name', message: 'is taken' }]);
        await recordAudit(trx, actor, 'mcp_server.create', { type: 'mcp_server', id: idOf(a) }, auditDetails(a, columns));
        return row;
      });
    },

    /**
     * Replaces a server (If-Match: `expected`); a proposed server becomes curated. Without
     * If-Match (`expected` null) it creates the server, and an existing one answers 428.
     */
    async replace(actor: Actor, a: McpAddress, expected: number | null, input: McpServerPut) {
      assertMayWrite(actor, a.team);
      const errors: FieldProblem[] = [];
      if (input.name !== undefined && input.name !== a.name) errors.push({ field: 'name', message: `must be the name in the path ("${a.name}"): servers are not renamed` });
      if (input.team !== undefined && (input.team ?? null) !== a.team) errors.push({ field: 'team', message: a.team === null ? 'must be null or left out for a platform server' : `must be "${a.team}", the team in the path` });
      if (errors.length) throw problems.validation(errors);
      const roles = a.team === null ? null : await roleNamesOf(a.team);
      const columns = await columnsOf(actor, a, roles, input);
      return db.transaction().execute(async (trx) => {
        await lockTeam(trx, a.team);
        await guardNames(trx, columns);
        let row: McpServerRow | undefined;
        let created = false;
        let accepted = false;
        if (expected === null) {
          row = await store.insertServer(trx, { team_key: keyOf(a.team), name: a.name, ...columns, status: 'curated', proposed_by: null, actor: actor.name });
          if (!row) throw problems.preconditionRequired();
          created = true;
        } else {
          const before = await store.getServer(trx, keyOf(a.team), a.name);
          accepted = before?.status === 'proposed';
          row = await updateIfVersion<McpServerRow>(trx, {
            table: 'mcp_servers',
            where: { team_key: keyOf(a.team), name: a.name },
            expected,
            set: { ...columns, roles: JSON.stringify(columns.roles), status: 'curated', updated_by: actor.name },
            what: label(a),
            label: a.name,
          });
        }
        await recordAudit(trx, actor, created ? 'mcp_server.create' : 'mcp_server.update', { type: 'mcp_server', id: idOf(a) }, { ...auditDetails(a, columns), ...(accepted ? { accepted: true } : {}) });
        return { row, created };
      });
    },

    /**
     * Removes a server (If-Match). A platform server named by a current agent or template
     * version answers 409.
     */
    async remove(actor: Actor, a: McpAddress, expected: number) {
      assertMayWrite(actor, a.team);
      const inUse = (uses: number) => problems.conflict(`platform MCP server "${a.name}" is named by ${uses} current agent or template version(s); remove it from them first`);
      const removeRow = async (trx: Transaction<Database>) => {
        await deleteIfVersion(trx, { table: 'mcp_servers', where: { team_key: keyOf(a.team), name: a.name }, expected, what: label(a), label: a.name });
        await recordAudit(trx, actor, 'mcp_server.delete', { type: 'mcp_server', id: idOf(a) });
      };
      // Only platform servers are named by agents and templates; a team's own goes with its team.
      if (a.team === null) return references.deleteUnlessUsed(db, 'mcp_server', a.name, inUse, removeRow);
      const team = a.team;
      await teams.mustGetLive(team);
      await db.transaction().execute(async (trx) => {
        await lockTeam(trx, team);
        await removeRow(trx);
      });
    },

    /**
     * Promotes a proposed server to curated, as it was when read (If-Match); an already curated
     * server is answered as it is, without a write, so repeating the call is harmless.
     */
    async accept(actor: Actor, a: McpAddress, expected: number) {
      assertMayWrite(actor, a.team);
      if (a.team !== null) await teams.mustGetLive(a.team);
      const current = await mustGet(a);
      if (current.status === 'curated') return current;
      return db.transaction().execute(async (trx) => {
        await lockTeam(trx, a.team);
        const row = await updateIfVersion<McpServerRow>(trx, {
          table: 'mcp_servers',
          where: { team_key: keyOf(a.team), name: a.name },
          expected,
          set: { status: 'curated', updated_by: actor.name },
          what: label(a),
          label: a.name,
        });
        await recordAudit(trx, actor, 'mcp_server.accept', { type: 'mcp_server', id: idOf(a) }, { proposed_by: row.proposed_by });
        return row;
      });
    },

    /**
     * An agent of a team proposes a server for it (the runtime calls this; `actor.name` is
     * recorded as `proposed_by`). It is stored `proposed` and given to no role until a person
     * accepts or replaces it. A new proposal of a still-proposed name replaces the old one; a
     * curated server of the name answers 409.
     */
    async propose(actor: Actor, team: string, input: McpServerProposal) {
      const roles = await roleNamesOf(team);
      const a = { team, name: input.name };
      const columns = await columnsOf(actor, a, roles, input);
      return db.transaction().execute(async (trx) => {
        await lockTeam(trx, team);
        await guardNames(trx, columns);
        const existing = await store.getServer(trx, team, input.name);
        let row: McpServerRow | undefined;
        if (!existing) {
          row = await store.insertServer(trx, { team_key: team, name: input.name, ...columns, status: 'proposed', proposed_by: actor.name, actor: actor.name });
        } else if (existing.status === 'proposed') {
          row = await updateIfVersion<McpServerRow>(trx, {
            table: 'mcp_servers',
            where: { team_key: team, name: input.name },
            expected: existing.row_version,
            set: { ...columns, roles: JSON.stringify(columns.roles), proposed_by: actor.name, updated_by: actor.name },
            what: label(a),
            label: input.name,
          });
        }
        if (!row) throw problems.conflict(`team "${team}" already has a curated MCP server named "${input.name}"; a person changes it`, [{ field: 'name', message: 'is taken' }]);
        await recordAudit(trx, actor, 'mcp_server.propose', { type: 'mcp_server', id: idOf(a) }, auditDetails(a, columns));
        return row;
      });
    },

    /** Removes a team's servers in the transaction that archives the team, so a new team of the name inherits none. */
    async removeAllOf(trx: Transaction<Database>, actor: Actor, team: string): Promise<number> {
      const removed = await store.deleteTeamServers(trx, team);
      for (const r of removed) await recordAudit(trx, actor, 'mcp_server.delete', { type: 'mcp_server', id: idOf({ team, name: r.name }) }, { reason: 'team archived' });
      return removed.length;
    },
  };
}

export type McpServersService = ReturnType<typeof createMcpServersService>;
