import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { deleteIfVersion, updateIfVersion } from '../../db/conditional.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';
import { problems, type FieldProblem } from '../../errors/problems.ts';
import type { References, RefQuery } from '../../references.ts';
import type { CheckpointUse } from '../../hooks.ts';
import {
  DEFAULT_DEEP_SLEEP_AFTER_SECONDS,
  DEFAULT_IDLE_AFTER_SECONDS,
  type Environment,
  type EnvironmentCreate,
  type EnvironmentPut,
  type Image,
} from './environments.schemas.ts';
import type { ImagesService } from './images.service.ts';

type Row = NonNullable<Awaited<ReturnType<typeof getRow>>>;

function getRow(db: NonNullable<RefQuery>, name: string) {
  return db.selectFrom('environments').selectAll().where('name', '=', name).executeTakeFirst();
}

/** Checks the rules between fields and gives the columns to store. */
function toColumns(input: EnvironmentCreate | EnvironmentPut) {
  const errors: FieldProblem[] = [];
  const checkpoint = input.checkpoint_id ?? null;
  if (input.provider === 'hosted' && checkpoint === null) errors.push({ field: 'checkpoint_id', message: 'is required for a hosted environment: the golden checkpoint a new computer is restored from' });
  if (input.provider === 'microvm' && checkpoint !== null) errors.push({ field: 'checkpoint_id', message: 'is not accepted for a microvm environment: a microVM boots the current image' });
  if (input.provider === 'local' && checkpoint !== null) errors.push({ field: 'checkpoint_id', message: 'is not accepted for a local environment: a local sandbox starts from the host\'s own system' });
  const idle = input.idle_after_seconds ?? DEFAULT_IDLE_AFTER_SECONDS;
  const deep = input.deep_sleep_after_seconds ?? Math.max(DEFAULT_DEEP_SLEEP_AFTER_SECONDS, idle);
  if (deep < idle) errors.push({ field: 'deep_sleep_after_seconds', message: `must be at least idle_after_seconds (${idle})` });
  if (errors.length) throw problems.validation(errors);
  return {
    provider: input.provider,
    profile: input.profile ?? null,
    vcpus: input.vcpus ?? null,
    memory_mib: input.memory_mib ?? null,
    disk_gib: input.disk_gib ?? null,
    checkpoint_id: checkpoint,
    idle_after_seconds: idle,
    deep_sleep_after_seconds: deep,
  };
}

/** The whitelist of what leaves the server about an environment. */
export function presentEnvironment(row: Row, extra: { image: Pick<Image, 'name' | 'version' | 'built_at'> | null; usedBy: number }): Environment {
  return {
    name: row.name,
    provider: row.provider,
    profile: row.profile,
    vcpus: row.vcpus,
    memory_mib: row.memory_mib,
    disk_gib: row.disk_gib,
    checkpoint_id: row.checkpoint_id,
    idle_after_seconds: row.idle_after_seconds,
    deep_sleep_after_seconds: row.deep_sleep_after_seconds,
    image: row.provider === 'microvm' && extra.image ? { name: extra.image.name, version: extra.image.version, built_at: extra.image.built_at } : null,
    used_by: extra.usedBy,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function createEnvironmentsService(deps: { db: Db; references: References; images: Pick<ImagesService, 'current'> }) {
  const { db, references } = deps;

  /** Presents rows with what they need from elsewhere: the current image (microvm) and their uses. */
  async function present(rows: Row[]): Promise<Environment[]> {
    const current = rows.some((r) => r.provider === 'microvm') ? await deps.images.current() : null;
    const uses = await references.usesMany('environment', rows.map((r) => r.name));
    return rows.map((row) => presentEnvironment(row, { image: current, usedBy: uses.get(row.name) ?? 0 }));
  }
  const presentOne = async (row: Row) => ({ environment: (await present([row]))[0], version: row.row_version });

  return {
    /** The checkpoints environments name, for GET /checkpoints. */
    async checkpointUses(): Promise<CheckpointUse[]> {
      const rows = await db.selectFrom('environments').select(['name', 'checkpoint_id']).where('checkpoint_id', 'is not', null).execute();
      return rows.map((r) => ({ checkpoint_id: r.checkpoint_id!, kind: 'environment', name: r.name }));
    },

    async list(query: { limit: number; cursor?: string }) {
      const cursor = decodeCursor(query.cursor, ['string']);
      let q = db.selectFrom('environments').selectAll().orderBy('name').limit(query.limit + 1);
      if (cursor) q = q.where('name', '>', String(cursor[0]));
      const page = toPage(await q.execute(), query.limit, (r) => [r.name], (r) => r);
      return { items: await present(page.items), next_cursor: page.next_cursor };
    },

    async get(name: string) {
      const row = await getRow(db, name);
      if (!row) throw problems.notFound('environment', name);
      return presentOne(row);
    },

    async create(actor: Actor, input: EnvironmentCreate) {
      const columns = toColumns(input);
      const row = await db.transaction().execute(async (trx) => {
        const inserted = await trx.insertInto('environments').values({ name: input.name, ...columns }).onConflict((oc) => oc.column('name').doNothing()).returningAll().executeTakeFirst();
        if (!inserted) throw problems.conflict(`an environment named "${input.name}" already exists`, [{ field: 'name', message: 'is taken' }]);
        await recordAudit(trx, actor, 'environment.create', { type: 'environment', id: input.name }, { provider: inserted.provider });
        return inserted;
      });
      return presentOne(row);
    },

    async replace(actor: Actor, name: string, expected: number, input: EnvironmentPut) {
      if (input.name !== undefined && input.name !== name) throw problems.invalidField('name', 'must be the name in the path; an environment cannot be renamed');
      const columns = toColumns(input);
      const row = await db.transaction().execute(async (trx) => {
        const updated = await updateIfVersion<Row>(trx, { table: 'environments', where: { name }, expected, set: columns, what: 'environment', label: name });
        await recordAudit(trx, actor, 'environment.update', { type: 'environment', id: name }, { provider: updated.provider });
        return updated;
      });
      return presentOne(row);
    },

    async remove(actor: Actor, name: string, expected: number) {
      const inUse = (uses: number) => problems.conflict(`environment "${name}" is named by ${uses} current agent or template version(s); point them elsewhere first`);
      await references.deleteUnlessUsed(db, 'environment', name, inUse, async (trx) => {
        await deleteIfVersion(trx, { table: 'environments', where: { name }, expected, what: 'environment', label: name });
        await recordAudit(trx, actor, 'environment.delete', { type: 'environment', id: name });
      });
    },

    /** What a template version copies of an environment when it names it, or null when there is none (read on `q`, e.g. a placement's transaction). */
    async snapshot(name: string, q: RefQuery = db) {
      const row = await getRow(q ?? db, name);
      if (!row) return null;
      return { provider: row.provider, profile: row.profile ?? '', vcpus: row.vcpus, memory_mib: row.memory_mib, disk_gib: row.disk_gib, checkpoint_id: row.checkpoint_id };
    },

    /** Which of these names are not environments. */
    async unknown(names: string[], q: RefQuery = db): Promise<string[]> {
      if (names.length === 0) return [];
      const found = new Set((await q.selectFrom('environments').select('name').where('name', 'in', names).execute()).map((r) => r.name));
      return names.filter((n) => !found.has(n));
    },
  };
}

export type EnvironmentsService = ReturnType<typeof createEnvironmentsService>;
