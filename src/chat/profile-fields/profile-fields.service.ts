import { recordAudit } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { lockKey } from '../../db/conditional.ts';
import { chatErrors } from '../http/errors.ts';
import { dbId } from '../http/params.ts';
import { renderMarkdown } from '../markdown.ts';
import { isAdmin } from '../users/users.present.ts';
import { chatActor, type Caller } from '../users/users.service.ts';

/** Zulip's custom profile field types. */
export const FIELD_TYPE = { shortText: 1, longText: 2, select: 3, date: 4, url: 5, user: 6, externalAccount: 7, pronouns: 8 } as const;
/** Types whose values are Markdown and carry a rendered_value. */
const RENDERED = new Set<number>([FIELD_TYPE.shortText, FIELD_TYPE.longText]);
const MAX_LENGTH: Record<number, number> = { 1: 50, 2: 500, 7: 50, 8: 50, 5: 2048 };

export type ChatProfileFieldsService = ReturnType<typeof createChatProfileFieldsService>;

export function createChatProfileFieldsService(deps: { db: Db }) {
  const { db } = deps;

  const fields = (realmId: number) =>
    db.selectFrom('chat_profile_fields').select(['id', 'name', 'hint', 'field_type', 'field_data', 'sort_order']).where('realm_id', '=', realmId).orderBy('sort_order').orderBy('id').execute();

  /** Checks a value against its field's type; returns what is stored (and its rendering). */
  async function checkValue(realmId: number, field: { name: string; field_type: number; field_data: string }, value: unknown): Promise<{ value: string; rendered: string | null }> {
    if (field.field_type === FIELD_TYPE.user) {
      if (!Array.isArray(value) || value.some((x) => !Number.isSafeInteger(x))) throw chatErrors.bad(`${field.name} is not a list`);
      const ids = [...new Set(value as number[])];
      const found = ids.length ? await db.selectFrom('chat_users').select('id').where('realm_id', '=', realmId).where('id', 'in', ids.map(dbId)).execute() : [];
      const missing = ids.find((id) => !found.some((f) => f.id === id));
      if (missing !== undefined) throw chatErrors.bad(`Invalid user ID: ${missing}`);
      return { value: JSON.stringify(ids), rendered: null };
    }
    if (typeof value !== 'string') throw chatErrors.bad(`${field.name} is not a string`);
    const limit = MAX_LENGTH[field.field_type];
    if (limit && [...value].length > limit) throw chatErrors.bad(`${field.name} is too long (limit: ${limit} characters)`);
    if (field.field_type === FIELD_TYPE.select) {
      const options = field.field_data ? (JSON.parse(field.field_data) as Record<string, unknown>) : {};
      if (!(value in options)) throw chatErrors.bad(`'${value}' is not a valid choice for '${field.name}'.`);
    } else if (field.field_type === FIELD_TYPE.date) {
      if (!/^\d{4}-\d{2}-\d{2}$/.test(value) || Number.isNaN(Date.parse(value))) throw chatErrors.bad(`${field.name} is not a date`);
    } else if (field.field_type === FIELD_TYPE.url) {
      if (!/^https?:\/\/\S+$/.test(value)) throw chatErrors.bad(`${field.name} is not a URL`);
    }
    return { value, rendered: RENDERED.has(field.field_type) ? renderMarkdown(value) : null };
  }

  return {
    /** GET /realm/profile_fields. */
    async list(caller: Caller) {
      return (await fields(caller.realm.id)).map((f) => ({ id: f.id, name: f.name, hint: f.hint, type: f.field_type, field_data: f.field_data, order: f.sort_order }));
    },

    /** POST /realm/profile_fields (administrators). */
    async create(caller: Caller, v: { name: string; hint: string; fieldType: number; fieldData?: Record<string, unknown> }) {
      if (!isAdmin(caller.user)) throw chatErrors.adminRequired();
      const name = v.name.trim();
      if (!name) throw chatErrors.bad('Label cannot be blank.');
      if ([...name].length > 40) throw chatErrors.bad('name is too long (limit: 40 characters)');
      if (!Object.values(FIELD_TYPE).includes(v.fieldType as 1)) throw chatErrors.bad('Invalid field type.');
      if (v.fieldType === FIELD_TYPE.select && (!v.fieldData || !Object.keys(v.fieldData).length)) throw chatErrors.bad('Field must have at least one choice.');
      return db.transaction().execute(async (trx) => {
        await lockKey(trx, `chat_profile_fields:${caller.realm.id}`);
        const dup = await trx.selectFrom('chat_profile_fields').select('id').where('realm_id', '=', caller.realm.id).where((eb) => eb(eb.fn('lower', ['name']), '=', name.toLowerCase())).executeTakeFirst();
        if (dup) throw chatErrors.bad('A field with that label already exists.');
        const order = await trx.selectFrom('chat_profile_fields').select((eb) => eb.fn.countAll<number>().as('n')).where('realm_id', '=', caller.realm.id).executeTakeFirstOrThrow();
        const row = await trx
          .insertInto('chat_profile_fields')
          .values({ realm_id: caller.realm.id, name, hint: v.hint, field_type: v.fieldType, field_data: v.fieldData ? JSON.stringify(v.fieldData) : '', sort_order: Number(order.n) + 1 })
          .returning('id')
          .executeTakeFirstOrThrow();
        await recordAudit(trx, chatActor(caller), 'chat.profile_field.create', { type: 'chat_profile_field', id: row.id }, { name, field_type: v.fieldType });
        return row.id;
      });
    },

    /** PATCH /users/me/profile_data: sets (or, with an empty value, clears) the caller's values. */
    async setOwn(caller: Caller, data: Array<{ id: number; value: unknown }>) {
      if (caller.user.is_bot) throw chatErrors.noBots();
      const all = await fields(caller.realm.id);
      const changes: Array<{ fieldId: number; value: string | null; rendered: string | null }> = [];
      for (const item of data) {
        const field = all.find((f) => f.id === item.id);
        if (!field) throw chatErrors.bad(`Field id ${item.id} not found.`);
        if (item.value === '' || (Array.isArray(item.value) && !item.value.length)) changes.push({ fieldId: field.id, value: null, rendered: null });
        else changes.push({ fieldId: field.id, ...(await checkValue(caller.realm.id, field, item.value)) });
      }
      await db.transaction().execute(async (trx) => {
        for (const c of changes) {
          if (c.value === null) {
            await trx.deleteFrom('chat_profile_values').where('user_id', '=', caller.user.id).where('field_id', '=', c.fieldId).execute();
          } else {
            await trx
              .insertInto('chat_profile_values')
              .values({ user_id: caller.user.id, field_id: c.fieldId, value: c.value, rendered_value: c.rendered })
              .onConflict((oc) => oc.columns(['user_id', 'field_id']).doUpdateSet({ value: c.value!, rendered_value: c.rendered }))
              .execute();
          }
        }
        await recordAudit(trx, chatActor(caller), 'chat.profile_data.update', { type: 'chat_user', id: caller.user.id }, { fields: changes.map((c) => c.fieldId) });
      });
    },

    checkValue,
  };
}
