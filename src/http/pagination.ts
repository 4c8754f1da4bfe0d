import { Type, type Static, type TSchema } from 'typebox';
import { DEFAULT_LIMIT, MAX_LIMIT } from '../db/pagination.ts';

/** `limit` and `cursor`, on every list. */
export const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: `page size, 1 to ${MAX_LIMIT}; default ${DEFAULT_LIMIT}` })),
    cursor: Type.Optional(Type.String({ maxLength: 1024, description: 'the next_cursor of the previous page' })),
  },
  { additionalProperties: false },
);
export type ListQuery = Static<typeof ListQuery>;

/** `{items, next_cursor}` of an item shape. */
export const Page = <T extends TSchema>(item: T) =>
  Type.Object({
    items: Type.Array(item),
    next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'pass as cursor for the next page; null on the last page' }),
  });
