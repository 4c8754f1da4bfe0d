import type { Transaction } from 'kysely';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import { deleteIfVersion, updateIfVersion } from '../../db/conditional.ts';
import { within } from '../../db/within.ts';
import { BUILTIN_DESTINATIONS, isBuiltinDestination } from '../../egress/builtins.ts';
import { GATEWAY_KEYS, parseInjectSecret } from '../../egress/gateway-keys.ts';
import { parseHost } from '../../egress/hosts.ts';
import { effectiveEgressPolicy, type EgressSetting, type PolicyDestination } from '../../egress/policy.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';
import { problems, type FieldProblem } from '../../errors/problems.ts';
import type { References, RefQuery } from '../../references.ts';
import type { Destination, DestinationCreate, DestinationPut } from './destinations.schemas.ts';
import * as store from './destinations.store.ts';
import type { DestinationRow } from './destinations.store.ts';

/** The whitelist of what leaves the server about a destination. */
export function presentDestination(row: DestinationRow): Destination {
  return {
    name: row.name,
    host: row.host,
    methods: row.methods,
    paths: row.paths,
    header_allowlist: row.header_allowlist,
    inject_secret: row.inject_secret,
    git_push_ref_globs: row.git_push_ref_globs,
    what: row.what,
    builtin: false,
    github_scope: row.github_scope,
    dev_only: row.dev_only,
    policy_name: row.policy_name,
    updated_at: row.updated_at,
  };
}

const presentBuiltin = (d: PolicyDestination): Destination => ({ ...d, methods: [...d.methods], paths: [...d.paths], header_allowlist: [...d.header_allowlist], git_push_ref_globs: [...d.git_push_ref_globs] });

const builtinConflict = (name: string) => problems.conflict(`"${name}" is a built-in destination: it is part of every agent's egress and cannot be replaced or deleted`);

export function createDestinationsService(deps: { db: Db; references: References; devDestinations: boolean }) {
  const { db, references } = deps;

  /** An injected `mcp:`/`secret:` reference must exist (asked on `q`): the field problem, or null. */
  async function injectProblem(inject: string | null, q?: RefQuery): Promise<FieldProblem | null> {
    if (inject === null) return null;
    const ref = parseInjectSecret(inject);
    if (ref.kind === 'invalid') return { field: 'inject_secret', message: `must be a gateway key (${GATEWAY_KEYS.map((k) => k.name).join(', ')}), mcp:<name> or secret:<name>` };
    if (ref.kind === 'mcp' && (await references.unknown('mcp_server', [ref.name], q)).length > 0) return { field: 'inject_secret', message: `no platform MCP server named "${ref.name}"` };
    if (ref.kind === 'secret' && (await references.unknown('secret', [ref.name], q)).length > 0) {
      return { field: 'inject_secret', message: `no secret named "${ref.name}"; an admin sets it first (on the Secrets page or with crewhouse secrets set)` };
    }
    return null;
  }

  /** In the write's transaction: holds the injected reference against deletion and checks it again. */
  async function guardInject(trx: Transaction<Database>, inject: string | null) {
    const ref = inject === null ? null : parseInjectSecret(inject);
    if (ref?.kind === 'mcp' || ref?.kind === 'secret') await references.guard(trx, ref.kind === 'mcp' ? 'mcp_server' : 'secret', [ref.name], 'use');
    const problem = await injectProblem(inject, trx);
    if (problem) throw problems.validation([problem]);
  }

  /** Checks a body against the rules that need more than its schema, and gives the columns to store. */
  async function toColumns(input: DestinationPut | DestinationCreate, q?: RefQuery) {
    const errors: FieldProblem[] = [];
    if (input.builtin === true) errors.push({ field: 'builtin', message: 'built-in destinations are defined by the service; send false or leave it out' });
    let host: string | null = null;
    const devOnly = input.dev_only ?? false;
    if (input.host !== undefined && input.host !== null) {
      const parsed = parseHost(input.host);
      if (!parsed.ok) errors.push({ field: 'host', message: parsed.reason });
      else {
        host = parsed.port === null ? parsed.host : `${parsed.ip === 6 ? `[${parsed.host}]` : parsed.host}:${parsed.port}`;
        if (parsed.kind !== 'public' && !devOnly) {
          errors.push({ field: 'dev_only', message: `host ${input.host} is ${parsed.kind.replace('_', '-')} (not public): such a destination must be dev_only` });
        }
      }
    }
    const inject = input.inject_secret ?? null;
    const injectError = await injectProblem(inject, q);
    if (injectError) errors.push(injectError);
    if (errors.length) throw problems.validation(errors);
    return {
      host,
      methods: JSON.stringify([...new Set((input.methods ?? []).map((m) => m.toUpperCase()))]),
      paths: JSON.stringify([...new Set(input.paths ?? [])]),
      header_allowlist: JSON.stringify([...new Set((input.header_allowlist ?? []).map((h) => h.toLowerCase()))]),
      inject_secret: inject,
      git_push_ref_globs: JSON.stringify([...new Set(input.git_push_ref_globs ?? [])]),
      what: input.what ?? '',
      github_scope: input.github_scope ?? null,
      dev_only: devOnly,
      policy_name: input.policy_name ?? null,
    };
  }

  async function all(): Promise<PolicyDestination[]> {
    const rows = await store.allDestinations(db);
    return [...BUILTIN_DESTINATIONS.map(presentBuiltin), ...rows.map(presentDestination)].map(({ updated_at: _u, ...d }) => d);
  }

  return {
    /** A destination secret went (in its transaction): every destination stops injecting it. */
    async stopInjecting(trx: Transaction<Database>, actor: Actor, secret: string) {
      const changed = await store.clearInjectSecret(trx, `secret:${secret}`);
      for (const d of changed) await recordAudit(trx, actor, 'destination.update', { type: 'destination', id: d }, { fields: ['inject_secret'], reason: 'secret removed' });
    },

    async list(query: { limit: number; cursor?: string }) {
      const cursor = decodeCursor(query.cursor, ['string']);
      const after = cursor ? String(cursor[0]) : null;
      const stored = (await store.listDestinations(db, after, query.limit + 1)).map(presentDestination);
      const builtins = BUILTIN_DESTINATIONS.filter((d) => after === null || d.name > after).map(presentBuiltin);
      const merged = [...builtins, ...stored].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).slice(0, query.limit + 1);
      return toPage(merged, query.limit, (d) => [d.name], (d) => d);
    },

    /** One destination and its ETag (built-ins have the fixed ETag 0: they never change). */
    async get(name: string, q?: RefQuery): Promise<{ destination: Destination; version: number }> {
      const builtin = BUILTIN_DESTINATIONS.find((d) => d.name === name);
      if (builtin) return { destination: presentBuiltin(builtin), version: 0 };
      const row = await store.getDestination(q ?? db, name);
      if (!row) throw problems.notFound('destination', name);
      return { destination: presentDestination(row), version: row.row_version };
    },

    /** The destination a body describes, checked against every rule (names asked on `q`), as it would be stored; nothing is written. */
    async resolve(input: DestinationCreate, q?: RefQuery): Promise<Destination> {
      if (isBuiltinDestination(input.name)) throw builtinConflict(input.name);
      const c = await toColumns(input, q);
      const list = (v: string) => JSON.parse(v) as string[];
      return { name: input.name, ...c, methods: list(c.methods), paths: list(c.paths), header_allowlist: list(c.header_allowlist), git_push_ref_globs: list(c.git_push_ref_globs), builtin: false };
    },

    /** Creates a destination; given `trx`, as one step of the caller's transaction, which records the audit itself. */
    async create(actor: Actor, input: DestinationCreate, trx?: Transaction<Database>) {
      const outer = trx;
      if (isBuiltinDestination(input.name)) throw builtinConflict(input.name);
      const columns = await toColumns(input, trx);
      return within(db, trx, async (trx) => {
        await guardInject(trx, columns.inject_secret);
        const row = await trx
          .insertInto('destinations')
          .values({ name: input.name, ...columns })
          .onConflict((oc) => oc.column('name').doNothing())
          .returningAll()
          .executeTakeFirst();
        if (!row) throw problems.conflict(`a destination named "${input.name}" already exists`, [{ field: 'name', message: 'is taken' }]);
        if (!outer) await recordAudit(trx, actor, 'destination.create', { type: 'destination', id: row.name }, { host: row.host, dev_only: row.dev_only, inject_secret: row.inject_secret });
        return row;
      });
    },

    /** Replaces every field of a stored destination (If-Match); built-ins answer 409. */
    async replace(actor: Actor, name: string, expected: number, input: DestinationPut, trx?: Transaction<Database>) {
      const outer = trx;
      if (isBuiltinDestination(name)) throw builtinConflict(name);
      if (input.name !== undefined && input.name !== name) throw problems.invalidField('name', 'must be the name in the path; a destination cannot be renamed');
      const columns = await toColumns(input, trx);
      return within(db, trx, async (trx) => {
        await guardInject(trx, columns.inject_secret);
        const row = await updateIfVersion<DestinationRow>(trx, { table: 'destinations', where: { name }, expected, set: columns, what: 'destination', label: name });
        if (!outer) await recordAudit(trx, actor, 'destination.update', { type: 'destination', id: name }, { host: row.host, dev_only: row.dev_only, inject_secret: row.inject_secret });
        return row;
      });
    },

    async remove(actor: Actor, name: string, expected: number, trx?: Transaction<Database>) {
      const outer = trx;
      if (isBuiltinDestination(name)) throw builtinConflict(name);
      const inUse = (uses: number) => problems.conflict(`destination "${name}" is named by ${uses} current agent version(s), team role override(s) or MCP server(s); remove it from their egress, or point the MCP servers at another destination, first`);
      await references.deleteUnlessUsed(trx ?? db, 'destination', name, inUse, async (trx) => {
        await deleteIfVersion(trx, { table: 'destinations', where: { name }, expected, what: 'destination', label: name });
        if (!outer) await recordAudit(trx, actor, 'destination.delete', { type: 'destination', id: name });
      });
    },

    /** Which of these names are neither built-in nor stored. */
    async unknown(names: string[], q: RefQuery = db): Promise<string[]> {
      const found = await store.existingNames(q, names.filter((n) => !isBuiltinDestination(n)));
      return names.filter((n) => !isBuiltinDestination(n) && !found.has(n));
    },

    /** Per name: the destinations injecting secret `name` (`secret:<name>`, the secret's "used by") or platform MCP server `name`'s credential (`mcp:<name>`). */
    async countInjecting(kind: 'secret' | 'mcp', names: string[], q: RefQuery = db): Promise<Map<string, number>> {
      const prefix = `${kind}:`;
      const counts = await store.countInjecting(q, names.map((n) => prefix + n));
      return new Map([...counts].map(([value, n]) => [value.slice(prefix.length), n]));
    },

    /** Every destination, built-ins first, as the gateway enforces them. */
    all,

    /** The effective egress policy of an agent role, from its egress (the version's, or the team's role override). */
    async policyFor(egress: EgressSetting | null) {
      return effectiveEgressPolicy({ egress, destinations: await all(), devDestinations: deps.devDestinations });
    },
  };
}

export type DestinationsService = ReturnType<typeof createDestinationsService>;
