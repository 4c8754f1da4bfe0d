/** Reading a tracker's webhook payload, which is untrusted JSON: what is not of the expected type is absent. */

export type Obj = Record<string, unknown>;
/** The value as an object, or an empty one. */
export const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
/** The value as a non-empty string, or null. */
export const str = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v : null);
/** At most `n` characters, an ellipsis where it was cut. */
export const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
