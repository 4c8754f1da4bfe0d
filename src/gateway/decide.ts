import { classifyAddress, cidrContains, parseHost, type ParsedHost } from '../egress/hosts.ts';
import type { EffectivePolicy, PolicyDestination } from '../egress/policy.ts';

/**
 * The gateway's decisions, as values: one pure function of the request and the policy says
 * allow or deny, which rule, which destination, and why; the server logs it once and turns it
 * into the wire answer in one place.
 */

/** Why a request was refused; also the label of the refusal metric. */
export type Rule =
  | 'unknown_sandbox'
  | 'bad_request'
  | 'host_mismatch'
  | 'sni_mismatch'
  | 'ip_literal'
  | 'no_destination'
  | 'method'
  | 'path'
  | 'github_scope'
  | 'not_configured'
  | 'credential'
  | 'internal_address'
  | 'deny_cidr'
  | 'dns'
  | 'git_push'
  | 'cleartext'
  | 'encoding'
  | 'connections'
  | 'upstream';

/** A request as the gateway sees it, after parsing; nothing here identifies the sandbox. */
export interface EgressRequest {
  method: string;
  scheme: 'http' | 'https';
  /** Normal form of the host (parseHost), without the port. */
  host: string;
  port: number;
  /** The path without the query. */
  path: string;
}

/** What the decision needs besides the policy: the team's repository and the names the gateway answers for itself. */
export interface DecisionContext {
  policy: EffectivePolicy;
  /** The team's code-host repository, `owner/repo`, or null when it has none. */
  repository: string | null;
  /** Built-in destination name to the host name sandboxes reach it at (`llm` to `llm.crewhouse.internal`). */
  builtinHosts: Readonly<Record<string, string>>;
}

export type Decision =
  | { allow: true; rule: 'destination' | 'allow_all'; destination: PolicyDestination | null; reason: string }
  /**
   * Report mode let through what enforcement would refuse (`would`). `destination` is the one
   * whose method, path or scope refused it (its address rules apply), or null; never a credential.
   */
  | { allow: true; rule: 'report'; destination: PolicyDestination | null; reason: string; would: Refusal }
  | { allow: false; rule: Rule; destination: string | null; reason: string };

export type Refusal = Extract<Decision, { allow: false }>;

export const deny = (rule: Rule, reason: string, destination: string | null = null): Refusal => ({ allow: false, rule, destination, reason });

const DEFAULT_PORTS = [80, 443];

// Destination hosts are few and parsed on every request: keep their parsed form.
const parsedHosts = new Map<string, ParsedHost>();
function parsedHost(host: string): ParsedHost {
  let p = parsedHosts.get(host);
  if (!p) {
    p = parseHost(host);
    if (parsedHosts.size >= 10_000) parsedHosts.clear();
    parsedHosts.set(host, p);
  }
  return p;
}

/** Whether a destination's host (exact, `*.` wildcard, optional port) covers the request's host and port. */
function hostMatches(d: PolicyDestination, req: EgressRequest, builtinHosts: DecisionContext['builtinHosts']): boolean {
  const builtin = builtinHosts[d.name];
  if (d.builtin) return builtin !== undefined && builtin === req.host && DEFAULT_PORTS.includes(req.port);
  if (!d.host) return false;
  const parsed = parsedHost(d.host);
  if (!parsed.ok) return false;
  if (parsed.port !== null ? parsed.port !== req.port : !DEFAULT_PORTS.includes(req.port)) return false;
  if (parsed.wildcard) return req.host.endsWith(parsed.host.slice(1)) && req.host.length > parsed.host.length - 1;
  return parsed.host === req.host;
}

/**
 * A path pattern: without `*` a prefix at a segment boundary (`/api/x` is `/api/x` and what is
 * below it, `/api/x/…`, never `/api/x-other`; a pattern ending in `/` is everything below it);
 * with it a whole-path glob where `*` stays inside a segment and `**` does not. The query is
 * not part of the path.
 */
export function pathMatches(pattern: string, path: string): boolean {
  if (!pattern.includes('*')) {
    if (pattern.endsWith('/')) return path.startsWith(pattern);
    return path === pattern || (path.startsWith(pattern) && path[pattern.length] === '/');
  }
  return globToRegExp(pattern).test(path);
}

const globCache = new Map<string, RegExp>();
/** `*` matches within one `/`-separated segment, `**` across them; everything else is literal. */
export function globToRegExp(glob: string): RegExp {
  let re = globCache.get(glob);
  if (!re) {
    const body = glob
      .split('**')
      .map((part) => part.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*'))
      .join('.*');
    re = new RegExp(`^${body}$`);
    if (globCache.size < 10_000) globCache.set(glob, re);
  }
  return re;
}

const DOT_SEGMENT = /(^|\/)(\.|%2e){1,2}(\/|$)/i;
const ENCODED_SEPARATOR = /%2f|%5c|\\/i;

/** The `github_scope` rule: the destination reaches only the team's own repository. */
function scopeRefusal(d: PolicyDestination, req: EgressRequest, repository: string | null): string | null {
  if (!d.github_scope || d.github_scope === 'mcp') return null;
  if (!repository) return `destination "${d.name}" is scoped to the team's repository (${d.github_scope}), and the team has no linked code-host repository`;
  const repo = repository.toLowerCase();
  const path = req.path.toLowerCase();
  const ok =
    d.github_scope === 'git'
      ? new RegExp(`^/${escape(repo)}(\\.git)?(/|$)`).test(path)
      : d.github_scope === 'api'
        ? new RegExp(`^/repos/${escape(repo)}(/|$)`).test(path)
        : ['GET', 'HEAD'].includes(req.method) && new RegExp(`^/repos/${escape(repo)}/?$`).test(path);
  return ok ? null : `destination "${d.name}" is scoped (${d.github_scope}) to the team's repository ${repository}; ${req.method} ${req.path} is outside it`;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Decides one request (each request of a kept-alive connection): which destination of the
 * policy allows it, or why none does. The address check comes after the gateway resolves the
 * name (`checkAddress`).
 */
export function decide(req: EgressRequest, ctx: DecisionContext): Decision {
  // A path that could mean two things to two servers is refused before any rule, in every mode.
  if (DOT_SEGMENT.test(req.path)) return deny('path', `the path ${req.path} has "." or ".." segments`);
  if (ENCODED_SEPARATOR.test(req.path)) return deny('path', `the path ${req.path} has an encoded or backward slash`);
  return reportMode(enforced(req, ctx), ctx.policy);
}

/** The refusals report mode lets through: the allowlist's own rules. Safety rules (addresses, names, TLS, credentials, pushes) always hold. */
export const REPORTABLE_RULES: ReadonlySet<Rule> = new Set(['no_destination', 'method', 'path', 'github_scope']);

function reportMode(d: Decision, policy: EffectivePolicy): Decision {
  if (d.allow || !policy.report_only || !REPORTABLE_RULES.has(d.rule)) return d;
  const destination = d.destination === null ? null : (policy.destinations.find((x) => x.name === d.destination) ?? null);
  return { allow: true, rule: 'report', destination, reason: `report mode: would refuse: ${d.reason}`, would: d };
}

function enforced(req: EgressRequest, ctx: DecisionContext): Decision {
  const candidates = ctx.policy.destinations.filter((d) => hostMatches(d, req, ctx.builtinHosts));
  let first: Decision | null = null;
  for (const d of candidates) {
    let refusal: Decision | null = null;
    if (!d.builtin && d.methods.length > 0 && !d.methods.some((m) => m.toUpperCase() === req.method)) {
      refusal = deny('method', `destination "${d.name}" allows ${d.methods.join(', ')}, not ${req.method}`, d.name);
    } else if (!d.builtin && d.paths.length > 0 && !d.paths.some((p) => pathMatches(p, req.path))) {
      refusal = deny('path', `destination "${d.name}" allows the paths ${d.paths.join(', ')}, not ${req.path}`, d.name);
    } else {
      const scope = scopeRefusal(d, req, ctx.repository);
      if (scope) refusal = deny('github_scope', scope, d.name);
    }
    if (!refusal) return { allow: true, rule: 'destination', destination: d, reason: `destination "${d.name}"` };
    first ??= refusal;
  }
  if (first) return first;
  const reserved = Object.entries(ctx.builtinHosts).find(([, host]) => host === req.host);
  if (reserved) return deny('not_configured', `${req.host} is the built-in destination "${reserved[0]}", which is not available to this role`, reserved[0]);
  const literal = classifyAddress(req.host);
  if (literal !== null && literal !== 'public') return deny('internal_address', `${req.host} is a ${literal.replace('_', '-')} address`);
  if (literal !== null) return deny('ip_literal', `${req.host} is an IP address; only a destination naming that address allows one, connect by name`);
  if (ctx.policy.mode === 'allowlist') return deny('no_destination', `no destination of the role's allowlist matches ${req.host}:${req.port}`);
  return { allow: true, rule: 'allow_all', destination: null, reason: 'allow_all' };
}

/**
 * Whether a CONNECT to host:port can lead anywhere: a destination's host covers it, or the
 * mode is allow_all and it is a name. Each request inside the tunnel is decided again.
 */
export function decideConnect(host: string, port: number, ctx: DecisionContext): Decision {
  const probe: EgressRequest = { method: 'CONNECT', scheme: 'https', host, port, path: '/' };
  const d = ctx.policy.destinations.find((x) => hostMatches(x, probe, ctx.builtinHosts));
  if (d) return { allow: true, rule: 'destination', destination: d, reason: `destination "${d.name}"` };
  return decide({ ...probe, method: 'GET' }, ctx);
}

/**
 * Checks an address the gateway resolved (or was given) before it connects to exactly it:
 * internal ranges (loopback, private, link-local, CGNAT, unique-local, unspecified, reserved,
 * and IPv6 forms carrying them) only for a dev-only destination; the role's own denied ranges never.
 */
export function checkAddress(ip: string, host: string, policy: EffectivePolicy, destination: PolicyDestination | null): Refusal | null {
  // The answer depends only on these and the policy object (replaced whenever the policy is re-read).
  let memo = addressMemo.get(policy);
  if (!memo) addressMemo.set(policy, (memo = new Map()));
  const key = `${ip}\n${host}\n${destination?.name ?? ''}`;
  let found = memo.get(key);
  if (found === undefined) {
    found = checkAddressOnce(ip, host, policy, destination);
    if (memo.size < 10_000) memo.set(key, found);
  }
  return found;
}

const addressMemo = new WeakMap<EffectivePolicy, Map<string, Refusal | null>>();

function checkAddressOnce(ip: string, host: string, policy: EffectivePolicy, destination: PolicyDestination | null): Refusal | null {
  const kind = classifyAddress(ip);
  if (kind === null) return deny('dns', `${host} resolved to "${ip}", which is not an IP address`, destination?.name ?? null);
  const own = policy.upstream_deny_cidrs.find((c) => cidrContains(c, ip));
  if (own) return deny('deny_cidr', `${host} resolves to ${ip}, inside the role's denied range ${own}`, destination?.name ?? null);
  if (destination?.dev_only) return null;
  if (kind !== 'public') return deny('internal_address', `${host} resolves to ${ip}, a ${kind.replace('_', '-')} address`, destination?.name ?? null);
  const internal = policy.internal_deny_cidrs.find((c) => cidrContains(c, ip));
  if (internal) return deny('internal_address', `${host} resolves to ${ip}, inside the internal range ${internal}`, destination?.name ?? null);
  return null;
}
