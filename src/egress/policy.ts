import { BUILTIN_DESTINATIONS, isBuiltinDestination } from './builtins.ts';
import { INTERNAL_CIDRS } from './hosts.ts';
import { denyCidr, normalizeEgress } from './setting.ts';

/** An agent role's egress setting as any caller has it (lists may be missing): normalized here. */
export type EgressSetting = Parameters<typeof normalizeEgress>[0];

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
  /** Report mode: what the destinations would refuse passes, uncredentialed, and is recorded (the address checks still hold). */
  report_only: boolean;
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

/**
 * The effective egress policy of an agent role: the built-in destinations, then the named
 * ones of `egress` (the agent version's, or the team's role override, which the caller
 * chose), with dev-only destinations left out unless `devDestinations`
 * (SERVICE_EGRESS_DEV_DESTINATIONS=1). `destinations` are the stored destination rows.
 */
export function effectiveEgressPolicy(input: { egress: EgressSetting | null; destinations: readonly PolicyDestination[]; devDestinations: boolean }): EffectivePolicy {
  const egress = normalizeEgress(input.egress);
  const byName = new Map(input.destinations.filter((d) => !isBuiltinDestination(d.name)).map((d) => [d.name, d]));
  const chosen: PolicyDestination[] = BUILTIN_DESTINATIONS.map((d) => ({ ...d, methods: [...d.methods] }));
  const dropped: EffectivePolicy['dropped'] = [];
  const seen = new Set<string>(chosen.map((d) => d.name));
  for (const name of egress.destinations) {
    if (seen.has(name)) continue;
    seen.add(name);
    const d = byName.get(name);
    if (!d) dropped.push({ name, reason: 'unknown' });
    else if (d.dev_only && !input.devDestinations) dropped.push({ name, reason: 'dev_only' });
    else chosen.push({ ...d, builtin: false });
  }
  // A malformed range cannot be stored (checkEgress refuses it); one that got in never reaches the gateway.
  const deny = egress.upstream_deny_cidrs.filter((c) => denyCidr(c) !== null);
  return { mode: egress.mode, report_only: egress.report_only, destinations: chosen, upstream_deny_cidrs: deny, internal_deny_cidrs: [...INTERNAL_CIDRS], dropped };
}
