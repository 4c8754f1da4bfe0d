import { Type, type Static } from 'typebox';
import type { FieldProblem } from '../errors/problems.ts';
import { parseCidr } from './hosts.ts';

const Mode = Type.Union([Type.Literal('allow_all'), Type.Literal('allowlist')]);
const REPORT_ONLY =
  'report mode, for rolling out an allowlist: a request the destinations would refuse (no destination matches, or its method, path or repository scope does not) is let through without any credential and recorded as an egress event with enforced=false; the address checks (internal ranges, upstream_deny_cidrs) are always enforced. Default false';

/** An agent role's egress setting as stored and shown: the agent version's, or a team's role override. */
export const Egress = Type.Object({
  mode: Mode,
  destinations: Type.Array(Type.String(), { description: 'destination names (allowlist); llm, mcp and otel are always part of every egress' }),
  upstream_deny_cidrs: Type.Array(Type.String(), { description: 'IPv4 or IPv6 ranges (address/prefix) the gateway never connects to for this role' }),
  report_only: Type.Boolean({ description: REPORT_ONLY }),
});
export type Egress = Static<typeof Egress>;

/** The egress a client sends: the same fields, lists optional. Repeated entries count once. */
export const EgressInput = Type.Object(
  {
    mode: Mode,
    destinations: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 128 }), { maxItems: 100, description: 'destination names' })),
    upstream_deny_cidrs: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64, description: 'an IPv4 or IPv6 CIDR' }), { maxItems: 100 })),
    report_only: Type.Optional(Type.Boolean({ description: REPORT_ONLY })),
  },
  { additionalProperties: false },
);
export type EgressInput = Static<typeof EgressInput>;

/** The egress of a version that names none: allow-all. */
export const DEFAULT_EGRESS: Egress = { mode: 'allow_all', destinations: [], upstream_deny_cidrs: [], report_only: false };

/** An upstream_deny_cidrs entry in normal form (`10.0.0.0/8`, `fd00::/8`), or null when it is not an IPv4 or IPv6 address/prefix. */
export function denyCidr(text: string): string | null {
  return text.includes('/') ? (parseCidr(text)?.cidr ?? null) : null;
}

/**
 * The one normal form of an egress setting, from input or from a stored row of any age:
 * lists present, each destination once in the order given, each range once in normal form
 * (a malformed range is kept as given, for `checkEgress` to name).
 */
export function normalizeEgress(egress: { mode: Egress['mode']; destinations?: readonly string[] | null; upstream_deny_cidrs?: readonly string[] | null; report_only?: boolean | null } | null | undefined): Egress {
  if (!egress) return { ...DEFAULT_EGRESS, destinations: [], upstream_deny_cidrs: [] };
  return {
    mode: egress.mode === 'allowlist' ? 'allowlist' : 'allow_all',
    destinations: [...new Set(egress.destinations ?? [])],
    upstream_deny_cidrs: [...new Set((egress.upstream_deny_cidrs ?? []).map((c) => denyCidr(c) ?? c))],
    report_only: egress.report_only === true,
  };
}

/** Problems of a normalized egress that need no database: malformed ranges. `field` prefixes the field names (e.g. `egress`; '' for none). */
export function checkEgress(egress: Pick<Egress, 'upstream_deny_cidrs'>, field = 'egress'): FieldProblem[] {
  const at = field ? `${field}.` : '';
  const out: FieldProblem[] = [];
  egress.upstream_deny_cidrs.forEach((c, i) => {
    if (denyCidr(c) === null) out.push({ field: `${at}upstream_deny_cidrs.${i}`, message: `"${c}" is not an IPv4 or IPv6 CIDR` });
  });
  return out;
}
