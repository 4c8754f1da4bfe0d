import { sql, type Kysely, type Transaction } from 'kysely';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { deleteIfVersion, lockKey, updateIfVersion } from '../../db/conditional.ts';
import { within } from '../../db/within.ts';
import type { Database } from '../../db/schema.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';
import { problems } from '../../errors/problems.ts';
import { checkSkill, isSkillName } from './skills.rules.ts';
import { CATALOGUE_MAX_BYTES, type Skill, type SkillPut } from './skills.schemas.ts';

type Row = NonNullable<Awaited<ReturnType<typeof getRow>>>;
const CATALOGUE_LOCK = 'skills:catalogue';

function getRow(db: Db | Transaction<Database>, name: string) {
  return db.selectFrom('platform_skills').selectAll().where('name', '=', name).executeTakeFirst();
}

export function presentSkill(row: Row): Skill {
  return {
    name: row.name,
    description: row.description,
    size_bytes: row.size_bytes,
    revision: row.revision,
    resources: row.resources,
    created_at: row.created_at,
    updated_at: row.updated_at,
    body: row.body,
  };
}

/** The catalogue's highest revision, deletions included, so a revision is never handed out twice. */
async function highestRevision(trx: Transaction<Database>): Promise<number> {
  const r = await sql<{ n: number | null }>`select greatest((select max(revision) from platform_skills), (select max(revision) from platform_skill_tombstones)) as n`.execute(trx);
  return Number(r.rows[0]?.n ?? 0);
}

export function createSkillsService(deps: { db: Db }) {
  const { db } = deps;

  return {
    async list(query: { limit: number; cursor?: string }) {
      const cursor = decodeCursor(query.cursor, ['string']);
      let q = db
        .selectFrom('platform_skills')
        .select(['name', 'description', 'size_bytes', 'revision', 'updated_at', sql<string[]>`coalesce((select jsonb_agg(k order by k) from jsonb_object_keys(resources) k), '[]'::jsonb)`.as('files')])
        .orderBy('name')
        .limit(query.limit + 1);
      if (cursor) q = q.where('name', '>', String(cursor[0]));
      return toPage(await q.execute(), query.limit, (r) => [r.name], (r) => ({ ...r, files: r.files }));
    },

    async get(name: string, q?: Kysely<Database> | Transaction<Database>) {
      const row = isSkillName(name) ? await getRow(q ?? db, name) : undefined;
      if (!row) throw problems.notFound('skill', name);
      return row;
    },

    /**
     * Creates (expected null; an existing skill answers 428) or replaces (If-Match) a skill. The
     * revision becomes the catalogue's highest plus one; the skill is marked edited through the
     * API, and a tombstone of the name goes.
     */
    async put(actor: Actor, name: string, expected: number | null, input: SkillPut) {
      const resources = input.resources ?? {};
      const { description, size, errors } = checkSkill(name, input.body, resources);
      if (errors.length) throw problems.validation(errors);
      return db.transaction().execute(async (trx) => {
        // One writer of the catalogue at a time: revisions and the total size are catalogue-wide.
        await lockKey(trx, CATALOGUE_LOCK);
        const others = await trx.selectFrom('platform_skills').select((eb) => eb.fn.coalesce(eb.fn.sum<number>('size_bytes'), eb.val(0)).as('n')).where('name', '!=', name).executeTakeFirstOrThrow();
        if (Number(others.n) + size > CATALOGUE_MAX_BYTES) {
          throw problems.validation([{ field: 'body', message: `the catalogue would hold ${Number(others.n) + size} bytes; at most ${CATALOGUE_MAX_BYTES}` }]);
        }
        const revision = (await highestRevision(trx)) + 1;
        const set = { description, body: input.body, resources: JSON.stringify(resources), size_bytes: size, revision, api_edited: true, source: 'api' as const };
        let row: Row;
        let created = false;
        if (expected === null) {
          const inserted = await trx.insertInto('platform_skills').values({ name, ...set }).onConflict((oc) => oc.column('name').doNothing()).returningAll().executeTakeFirst();
          if (!inserted) throw problems.preconditionRequired();
          row = inserted;
          created = true;
        } else {
          row = await updateIfVersion<Row>(trx, { table: 'platform_skills', where: { name }, expected, set, what: 'skill', label: name });
        }
        await trx.deleteFrom('platform_skill_tombstones').where('name', '=', name).execute();
        await recordAudit(trx, actor, created ? 'skill.create' : 'skill.update', { type: 'skill', id: name }, { revision, size_bytes: size, files: Object.keys(resources).length });
        return { row, created };
      });
    },

    /**
     * Writes a skill from the configuration repository, as one step of the import's transaction
     * (which records the audit): the same rules as a PUT, the revision becomes the catalogue's
     * highest plus one, the skill is no longer marked edited through the API, and its tombstone
     * goes (a skill deleted through the API returns).
     */
    async importWrite(trx: Transaction<Database>, name: string, body: string, resources: Record<string, string>) {
      const { description, size, errors } = checkSkill(name, body, resources);
      if (errors.length) throw problems.validation(errors);
      await lockKey(trx, CATALOGUE_LOCK);
      const others = await trx.selectFrom('platform_skills').select((eb) => eb.fn.coalesce(eb.fn.sum<number>('size_bytes'), eb.val(0)).as('n')).where('name', '!=', name).executeTakeFirstOrThrow();
      if (Number(others.n) + size > CATALOGUE_MAX_BYTES) {
        throw problems.validation([{ field: 'body', message: `the catalogue would hold ${Number(others.n) + size} bytes; at most ${CATALOGUE_MAX_BYTES}` }]);
      }
      const revision = (await highestRevision(trx)) + 1;
      const set = { description, body, resources: JSON.stringify(resources), size_bytes: size, revision, api_edited: false, source: 'import' as const };
      // Under the catalogue lock no other writer of skills runs: the row read is the row written.
      const existing = await getRow(trx, name);
      const row = existing
        ? await updateIfVersion<Row>(trx, { table: 'platform_skills', where: { name }, expected: existing.row_version, set, what: 'skill', label: name })
        : await trx.insertInto('platform_skills').values({ name, ...set }).returningAll().executeTakeFirstOrThrow();
      await trx.deleteFrom('platform_skill_tombstones').where('name', '=', name).execute();
      return row;
    },

    /** Deletes a skill (If-Match) and leaves a tombstone: the next import restores it if its file still exists. Given `trx`, one step of the caller's transaction, which records the audit. */
    async remove(actor: Actor, name: string, expected: number, trx?: Transaction<Database>) {
      if (!isSkillName(name)) throw problems.notFound('skill', name);
      const outer = trx;
      await within(db, trx, async (trx) => {
        await lockKey(trx, CATALOGUE_LOCK);
        // Read before the row goes: the deleted skill may hold the highest revision.
        const revision = (await highestRevision(trx)) + 1;
        await deleteIfVersion(trx, { table: 'platform_skills', where: { name }, expected, what: 'skill', label: name });
        await trx
          .insertInto('platform_skill_tombstones')
          .values({ name, revision, deleted_by: actor.name })
          .onConflict((oc) => oc.column('name').doUpdateSet({ revision, deleted_by: actor.name, deleted_at: sql`now()` }))
          .execute();
        if (!outer) await recordAudit(trx, actor, 'skill.delete', { type: 'skill', id: name }, { revision });
      });
    },

    /**
     * What the repository import needs: skills edited through the API (an import does not
     * overwrite them without forcing) and skills deleted through the API (an import restores
     * one whose file still exists, and clears the mark).
     */
    async importState(q: Kysely<Database> | Transaction<Database> = db): Promise<{ edited: string[]; deleted: Array<{ name: string; revision: number; deleted_at: string }> }> {
      const edited = await q.selectFrom('platform_skills').select('name').where('api_edited', '=', true).orderBy('name').execute();
      const deleted = await q.selectFrom('platform_skill_tombstones').select(['name', 'revision', 'deleted_at']).orderBy('name').execute();
      return { edited: edited.map((r) => r.name), deleted };
    },

    async unknown(names: string[], q: Kysely<Database> | Transaction<Database> = db): Promise<string[]> {
      const valid = names.filter(isSkillName);
      if (valid.length === 0) return names;
      const found = new Set((await q.selectFrom('platform_skills').select('name').where('name', 'in', valid).execute()).map((r) => r.name));
      return names.filter((n) => !found.has(n));
    },
  };
}

export type SkillsService = ReturnType<typeof createSkillsService>;
