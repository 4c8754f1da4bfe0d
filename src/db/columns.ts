import type { ColumnType, Generated } from 'kysely';

/** A timestamp column: read as an ISO string, written as a Date, an ISO string or left to its default. */
export type Timestamp = ColumnType<string, Date | string | undefined, Date | string>;
/** A timestamp that may be null. */
export type NullableTimestamp = ColumnType<string | null, Date | string | null | undefined, Date | string | null>;
/** The row version from row_version_seq; the resource's ETag. */
export type RowVersion = ColumnType<number, never, never>;
/** A jsonb column: written as JSON text, read as the parsed value. */
export type Json<T> = ColumnType<T, string, string>;
export type { Generated };
