import { sql, type Kysely, type Transaction } from 'kysely';
import { recordAudit, type Actor } from '../audit/audit.ts';
import type { Db } from '../db/database.ts';
import { deleteIfVersion, updateIfVersion } from '../db/conditional.ts';
import type { Database } from '../db/schema.ts';
import { decodeCursor, toPage } from '../db/pagination.ts';
import { problems } from '../errors/problems.ts';
import type { References } from '../references.ts';
import type { HookCaller } from '../hooks.ts';
import type { Cipher } from './cipher.ts';

/**
 * A secret name: segments of letters, digits, `.`, `_`, `-`, joined by `/`
 * (`integrations/<kind>/<setting>`), at most 200 characters.
 */
export const SECRET_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}(/[A-Za-z0-9][A-Za-z0-9._-]{0,99}){0,4}$';
/** What SECRET_NAME_PATTERN allows, in words. */
export const SECRET_NAME_WORDS = 'one to five parts joined by "/", each of letters, digits, ".", "_" and "-" starting with a letter or digit, at most 100 characters';
const SECRET_NAME = new RegExp(SECRET_NAME_PATTERN);
export const SECRET_NAME_MAX = 200;
/** Largest value, in bytes of UTF-8. */
export const SECRET_VALUE_MAX_BYTES = 64 * 1024;
const INTEGRATION_PREFIX = 'integrations/';

/** The associated data of a sealed value: binds it to its name. */
export const secretAad = (name: string) => `crewhouse-secret:${name}`;

export const isSecretName = (name: string) => name.length <= SECRET_NAME_MAX && SECRET_NAME.test(name);

/** What leaves the service about a secret: never the value. */
export interface SecretMeta {
  name: string;
  /** `integration` for `integrations/<kind>/<setting>`; `platform` otherwise (destinations, MCP servers, model aliases). */
  kind: 'integration' | 'platform';
  set: boolean;
  /** How many destinations, integrations, MCP servers and model aliases name it. */
  used_by: number;
  created_at: string;
  updated_at: string;
  created_by: string;
  updated_by: string;
  value_set_at: string | null;
}


const META_COLUMNS = ['name', 'key_id', 'created_by', 'updated_by', 'value_set_at', 'created_at', 'updated_at', 'row_version'] as const;

type MetaRow = {
  name: string;
  key_id: string | null;
  created_by: string;
  updated_by: string;
  value_set_at: string | null;
  created_at: string;
  updated_at: string;
  row_version: number;
};

const kindOf = (name: string): SecretMeta['kind'] => (name.startsWith(INTEGRATION_PREFIX) ? 'integration' : 'platform');

/** The whitelist of what leaves the service about a secret (never the value), with its row version for the ETag. */
export function presentSecret(row: MetaRow, usedBy: number): SecretMeta & { row_version: number } {
  return {
    name: row.name,
    kind: kindOf(row.name),
    set: row.key_id !== null,
    used_by: usedBy,
    created_at: row.created_at,
    updated_at: row.updated_at,
    created_by: row.created_by,
    updated_by: row.updated_by,
    value_set_at: row.value_set_at,
    row_version: row.row_version,
  };
}

/**
 * The secret store: values are sealed with the cipher before they reach the database and are
 * opened only by `reveal`, which no route calls (the model proxy and the gateway do). Every
 * write is audited without the value. Without `references` and `hooks` (a model proxy that
 * only reads values) nothing counts uses and nothing reacts to a removal.
 */
export function createSecretsService(deps: { db: Db; cipher: Cipher; references?: References; hooks?: HookCaller }) {
  const { db, cipher } = deps;
  const aad = secretAad;


  /** Rows with their uses, counted for all of them at once. */
  async function presentAll(rows: MetaRow[]) {
    const uses = deps.references ? await deps.references.usesMany('secret', rows.map((r) => r.name)) : new Map<string, number>();
    return rows.map((row) => presentSecret(row, uses.get(row.name) ?? 0));
  }
  const present = async (row: MetaRow) => (await presentAll([row]))[0];

  function checkName(name: string) {
    if (!isSecretName(name)) throw problems.invalidField('name', `must be ${SECRET_NAME_WORDS}`);
  }

  function checkValue(value: string) {
    if (typeof value !== 'string' || value.length === 0) throw problems.invalidField('value', 'must be a non-empty string');
    if (Buffer.byteLength(value, 'utf8') > SECRET_VALUE_MAX_BYTES) throw problems.invalidField('value', `must be at most ${SECRET_VALUE_MAX_BYTES} bytes`);
  }

  const metaOf = (trx: Db | Transaction<Database>, name: string) => trx.selectFrom('secrets').select(META_COLUMNS).where('name', '=', name).executeTakeFirst();

  return {
    isSecretName,

    /**
     * Writes a value (create or replace). `expected`: undefined writes unconditionally (internal
     * callers); null creates only (an existing reference answers 428: replacing needs If-Match);
     * a number replaces only while the row version is that one (404/412).
     */
    async put(actor: Actor, name: string, value: string, opts: { expected?: number | null } = {}) {
      checkName(name);
      checkValue(value);
      const sealed = cipher.seal(value, aad(name));
      const set = { value_sealed: sealed.blob, key_id: sealed.keyId, updated_by: actor.name, value_set_at: sql<string>`now()` };
      const written = await db.transaction().execute(async (trx) => {
        let row: MetaRow | undefined;
        let created = false;
        if (typeof opts.expected === 'number') {
          row = await updateIfVersion<MetaRow>(trx, { table: 'secrets', where: { name }, expected: opts.expected, set, what: 'secret', label: name });
        } else {
          const inserted = await trx
            .insertInto('secrets')
            .values({ name, ...set, created_by: actor.name })
            .onConflict((oc) => oc.column('name').doNothing())
            .returning(META_COLUMNS)
            .executeTakeFirst();
          if (inserted) {
            row = inserted;
            created = true;
          } else if (opts.expected === null) {
            throw problems.preconditionRequired();
          } else {
            row = await trx
              .updateTable('secrets')
              .set({ ...set, updated_at: sql`now()`, row_version: sql`nextval('row_version_seq')` })
              .where('name', '=', name)
              .returning(META_COLUMNS)
              .executeTakeFirstOrThrow();
          }
        }
        await recordAudit(trx, actor, 'secret.put', { type: 'secret', id: name }, { created });
        return { row, created };
      });
      // Usage counts read other modules' tables: outside the transaction (one connection on PGlite).
      return { secret: await present(written.row), created: written.created };
    },

    /**
     * Creates an unset reference when there is none (an integration declaring the secrets it
     * needs); an existing reference, set or not, is left alone.
     */
    async declare(actor: Actor, name: string) {
      checkName(name);
      return db.transaction().execute(async (trx) => {
        const inserted = await trx
          .insertInto('secrets')
          .values({ name, value_sealed: null, key_id: null, created_by: actor.name, updated_by: actor.name })
          .onConflict((oc) => oc.column('name').doNothing())
          .returning('name')
          .executeTakeFirst();
        if (inserted) await recordAudit(trx, actor, 'secret.declare', { type: 'secret', id: name });
        return Boolean(inserted);
      });
    },

    /**
     * Removes the value. An integration secret's reference stays, marked unset; any other
     * reference goes with it, and the `secretRemoved` reactions run in the same transaction.
     * `expected` as in `put` (undefined: unconditional).
     */
    /**
     * Removes a secret's value. An integration secret's reference stays, marked unset (the
     * integration declares it), unless `keepReference` is false: one no integration takes.
     */
    async remove(actor: Actor, name: string, opts: { expected?: number; keepReference?: boolean } = {}) {
      return db.transaction().execute(async (trx) => {
        // Writers naming the secret hold the shared lock; this waits for them, and they for it.
        await deps.references?.guard(trx, 'secret', [name], 'delete');
        const before = await metaOf(trx, name);
        if (!before) throw problems.notFound('secret', name);
        const expected = opts.expected ?? before.row_version;
        if (opts.keepReference ?? kindOf(name) === 'integration') {
          await updateIfVersion(trx, {
            table: 'secrets',
            where: { name },
            expected,
            set: { value_sealed: null, key_id: null, value_set_at: null, updated_by: actor.name },
            what: 'secret',
            label: name,
          });
          await recordAudit(trx, actor, 'secret.delete', { type: 'secret', id: name }, { reference: 'kept unset' });
          return { reference: 'unset' as const };
        }
        await deleteIfVersion(trx, { table: 'secrets', where: { name }, expected, what: 'secret', label: name });
        await deps.hooks?.react('secretRemoved', trx, actor, name);
        await recordAudit(trx, actor, 'secret.delete', { type: 'secret', id: name }, { reference: 'removed' });
        return { reference: 'removed' as const };
      });
    },

    /** Metadata of one reference, or null. */
    async get(name: string) {
      if (!isSecretName(name)) return null;
      const row = await metaOf(db, name);
      return row ? present(row) : null;
    },

    /** Which of these names have no reference (set or unset). */
    async unknown(names: string[], q: Kysely<Database> | Transaction<Database> = db): Promise<string[]> {
      const valid = names.filter(isSecretName);
      if (valid.length === 0) return names;
      const found = new Set((await q.selectFrom('secrets').select('name').where('name', 'in', valid).execute()).map((r) => r.name));
      return names.filter((n) => !found.has(n));
    },

    /** References by name, optionally under a prefix (`integrations/code_host/`). */
    async list(query: { limit: number; cursor?: string; prefix?: string }) {
      const cursor = decodeCursor(query.cursor, ['string']);
      let q = db.selectFrom('secrets').select(META_COLUMNS).orderBy('name').limit(query.limit + 1);
      if (cursor) q = q.where('name', '>', String(cursor[0]));
      if (query.prefix) q = q.where(sql`left(name, ${query.prefix.length})`, '=', query.prefix);
      const rows = await q.execute();
      const page = toPage(rows, query.limit, (r) => [r.name], (r) => r);
      return { items: await presentAll(page.items), next_cursor: page.next_cursor };
    },

    /** The plaintext value, or null when there is no value. Internal only: never behind a route. */
    async reveal(name: string): Promise<string | null> {
      if (!isSecretName(name)) return null;
      const row = await db.selectFrom('secrets').select(['value_sealed', 'key_id']).where('name', '=', name).executeTakeFirst();
      if (!row || row.value_sealed === null || row.key_id === null) return null;
      return cipher.open({ keyId: row.key_id, blob: row.value_sealed }, aad(name));
    },
  };
}

export type SecretsService = ReturnType<typeof createSecretsService>;
