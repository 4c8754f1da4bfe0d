// One set of value parsers for both databases, so rows look the same on either: counts and
// money as numbers, times as ISO 8601 strings in UTC. The PostgreSQL pool takes them in this
// process; the embedded database's engine takes them in its own thread (pglite-worker.ts).

const INT8 = 20;
const NUMERIC = 1700;
const TIMESTAMPTZ = 1184;
const TIMESTAMP = 1114;

const toNumber = (v: string) => Number(v);
// What both databases send for a time in UTC: `2026-11-22 18:30:07.123456+00` (timestamptz in a
// UTC session) or without the zone (timestamp). Rewritten as text, where a Date round trip per
// value was the largest cost of decoding a page of rows; anything else goes through Date.
const UTC_TIME = /^[1-9]\d{3}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?(\+00)?$/;
export const toIso = (v: string): string => {
  const m = UTC_TIME.exec(v);
  if (m) return `${v.slice(0, 10)}T${v.slice(11, 19)}.${(m[1] ?? '.').slice(1).padEnd(3, '0').slice(0, 3)}Z`;
  return new Date(v.includes('T') || /[+-]\d\d(:?\d\d)?$/.test(v) ? v : `${v}Z`).toISOString();
};

/**
 * An amount of US dollars as the API shows it: to the micro-dollar (what a model call's price is
 * given in). A sum kept in a float column (a run's cost, added to call by call) drifts in its last
 * digits (0.000378 read as 0.00037799999999999997); this rounds the drift away.
 */
export const toUsd = (v: number | string): number => Math.round(Number(v) * 1e6) / 1e6;

/** By type oid; a type not named here is read as each driver reads it. */
export const parsers: Record<number, (v: string) => unknown> = {
  [INT8]: toNumber,
  [NUMERIC]: toNumber,
  [TIMESTAMPTZ]: toIso,
  [TIMESTAMP]: toIso,
};
