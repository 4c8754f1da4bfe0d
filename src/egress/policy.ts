import type { FieldProblem } from '../http/problems.ts';
import { BUILTIN_DESTINATIONS, isBuiltinDestination } from './builtins.ts';
import { INTERNAL_CIDRS, parseCidr } from './hosts.ts';

/** An agent role's egress setting: the agent version's, or a team's role override. */
export interface EgressSetting {
  mode: 'allow_all' | 'allowlist';
  destinations?: string[] | null;
  upstream_deny_cidrs?: string[] | null;
}

export type GithubScope = 'api' | 'git' | 'repo_metadata' | 'mcp';

/** A destination as the gateway enforces it. */
export interface PolicyDestination {
  name: string;
  host: string | null;
  methods: string[];
  paths: string[];
  header_allowlist: string[];
  inject_secret: string | null;
  git_push_ref_globs: string[];
  what: string;
  builtin: boolean;
  github_scope: GithubScope | null;
  dev_only: boolean;
  policy_name: string | null;
}

/** The policy the gateway enforces for one agent role. */
export interface EffectivePolicy {
  /** `allow_all`: any public host, named destinations add their rules and credentials; `allowlist`: only the destinations. */
  mode: 'allow_all' | 'allowlist';
  /** Built-ins first (llm, mcp, otel), then the named destinations in the order given, each once. */
  destinations: PolicyDestination[];
  /** The role's own denied ranges, in normal form. */
  upstream_deny_cidrs: string[];
  /**
   * Ranges the gateway never connects to, whatever the mode: every loopback, private,
   * link-local, CGNAT and unique-local range. Only a dev-only destination in `destinations`
   * (present only with SERVICE_EGRESS_DEV_DESTINATIONS=1) reaches an address in them.
   */
  internal_deny_cidrs: string[];
  /** Named destinations left out, and why. */
  dropped: Array<{ name: string; reason: 'dev_only' | 'unknown' }>;
}

/** The default egress of a version that names none: allow-all. */
export const DEFAULT_EGRESS: EgressSetting = { mode: 'allow_all', destinations: [], upstream_deny_cidrs: [] };

/**
 * The effective egress policy of an agent role: the built-in destinations, then the named
 * ones of `egress` (the agent version's, or the team's role override, which the caller
 * chose), with dev-only destinations left out unless `devDestinations`
 * (SERVICE_EGRESS_DEV_DESTINATIONS=1). `destinations` are the stored destination rows.
 */
export function effectiveEgressPolicy(input: { egress: EgressSetting | null; destinations: readonly PolicyDestination[]; devDestinations: boolean }): EffectivePolicy {
  const egress = input.egress ?? DEFAULT_EGRESS;
  const byName = new Map(input.destinations.filter((d) => !isBuiltinDestination(d.name)).map((d) => [d.name, d]));
  const chosen: PolicyDestination[] = BUILTIN_DESTINATIONS.map((d) => ({ ...d, methods: [...d.methods] }));
  const dropped: EffectivePolicy['dropped'] = [];
  const seen = new Set<string>(chosen.map((d) => d.name));
  for (const name of egress.destinations ?? []) {
    if (seen.has(name)) continue;
    seen.add(name);
    const d = byName.get(name);
    if (!d) dropped.push({ name, reason: 'unknown' });
    else if (d.dev_only && !input.devDestinations) dropped.push({ name, reason: 'dev_only' });
    else chosen.push({ ...d, builtin: false });
  }
  const deny: string[] = [];
  for (const raw of egress.upstream_deny_cidrs ?? []) {
    const c = parseCidr(raw);
    if (c && !deny.includes(c.cidr)) deny.push(c.cidr);
  }
  return { mode: egress.mode === 'allowlist' ? 'allowlist' : 'allow_all', destinations: chosen, upstream_deny_cidrs: deny, internal_deny_cidrs: [...INTERNAL_CIDRS], dropped };
}

/** Problems of an egress input that need no database: malformed CIDRs. `field` prefixes the field names (e.g. `egress`). */
export function checkEgressCidrs(cidrs: readonly string[] | null | undefined, field = 'egress'): FieldProblem[] {
  const out: FieldProblem[] = [];
  (cidrs ?? []).forEach((c, i) => {
    if (!parseCidr(c)) out.push({ field: `${field}.upstream_deny_cidrs.${i}`, message: `"${c}" is not an IPv4 or IPv6 CIDR` });
  });
  return out;
}
