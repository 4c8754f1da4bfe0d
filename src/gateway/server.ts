import net from 'node:net';
import type { Readable } from 'node:stream';
import tls from 'node:tls';
import zlib from 'node:zlib';
import type { Logger } from 'pino';
import { hostPortKey } from '../config.ts';
import type { Db } from '../db/database.ts';
import { parseHost } from '../egress/hosts.ts';
import { BUILTIN_HOSTS } from '../egress/builtins.ts';
import type { PolicyDestination } from '../egress/policy.ts';
import { localHandlers } from '../http/local-handlers.ts';
import type { Registry } from '../metrics.ts';
import type { SandboxIdentity } from '../runtime/sandboxes/identify.ts';
import { ttlCache } from '../ttl-cache.ts';
import type { LeafIssuer } from './ca.ts';
import { checkAddress, decide, decideConnect, deny, type Decision, type DecisionContext, type EgressRequest, type Refusal } from './decide.ts';
import { recordEgressEvent } from './events.ts';
import { pushRecorder } from './pushes.ts';
import { sandboxRequestId } from '../modelproxy/sandbox-spend.ts';
import { answerAndClose, forward, handOff, serveConnection, type ConnectionHooks, type Exchange } from './exchange.ts';
import { readPushHead, refusedCommand, refusePushBody, type PushCommand } from './git-push.ts';
import type { Head, Headers } from './http1.ts';
import type { Resolve } from './resolve.ts';
import type { Credential, GatewaySources } from './sources.ts';
import { createUpstreamPool, type UpstreamAddress } from './upstreams.ts';

export interface GatewayOptions {
  sources: GatewaySources;
  db: Db;
  logger: Logger;
  metrics: Registry;
  leaves: LeafIssuer;
  resolve: Resolve;
  /** Trust anchors for upstream TLS: the system store, plus SERVICE_GATEWAY_UPSTREAM_CA_FILE. */
  upstreamCa: string[];
  /** Where the `llm` destination goes: the model proxy. */
  modelProxyUrl: string;
  /** The OpenTelemetry collector sandboxes export to at otel.crewhouse.internal (OTLP/HTTP), or null when there is none. */
  otlpEndpoint: string | null;
  /** `host:port` pairs (hostPortKey) of dev-only destinations whose credential may go over plain HTTP (SERVICE_GATEWAY_CLEARTEXT_HOSTS). */
  cleartextHosts?: readonly string[];
  /** Connections one sandbox may hold open at once (SERVICE_GATEWAY_MAX_CONNECTIONS_PER_SANDBOX). */
  maxConnectionsPerSandbox?: number;
}

/** What the gateway knows about a connection: the addresses of the link it came in on and, inside a CONNECT tunnel, where it was going. */
interface ConnMeta {
  link: { local: string; remote: string };
  tunnel: { host: string; port: number; scheme: 'http' | 'https' } | null;
}

const POLICY_TTL_MS = 1000;
const IDENTITY_TTL_MS = 1000;
const UPSTREAM_IDLE_MS = 300_000;
// A sandbox that keeps knocking on closed doors is recorded this many times a minute; the metric counts all.
const EVENTS_PER_MINUTE = 120;
const CREDENTIAL_TTL_MS = 10_000;
// A sandbox's identity, policy and credentials in use are read again in the background in the last
// quarter of their time, so a model request seldom waits on those reads; none is used past its time.
const REFRESH_WITHIN = (ttlMs: number) => ({ refreshWithinMs: ttlMs / 4 });
// The gateway frames bodies itself and speaks for its own hop: none of these pass.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'content-length', 'upgrade', 'host', 'expect']);
// What a body needs to be understood; every other header only through the destination's header_allowlist.
const FRAMING = ['content-type', 'content-encoding'];

/**
 * The credential gateway: an explicit HTTP proxy (absolute-form requests and CONNECT, whose
 * TLS it terminates under the deployment CA) that knows a sandbox by the addresses of its link,
 * decides every request against the role's egress, resolves names itself, dials exactly the
 * address it checked and injects the destination's credential.
 */
export function createGatewayServer(opts: GatewayOptions) {
  const { logger, sources } = opts;
  const requests = opts.metrics.counter('gateway_requests_total', 'Requests through the credential gateway, by decision');
  const refusals = opts.metrics.counter('gateway_refusals_total', 'Requests the credential gateway refused, by rule');
  const reports = opts.metrics.counter('gateway_reported_total', 'Requests a role in report mode sent that enforcement would refuse, by rule');
  const policyOf = ttlCache<DecisionContext>(POLICY_TTL_MS, REFRESH_WITHIN(POLICY_TTL_MS));
  const credentialOf = ttlCache<Awaited<ReturnType<GatewaySources['credential']>>>(CREDENTIAL_TTL_MS, REFRESH_WITHIN(CREDENTIAL_TTL_MS));
  const mcpServerOf = ttlCache<Awaited<ReturnType<GatewaySources['mcpServer']>>>(CREDENTIAL_TTL_MS, REFRESH_WITHIN(CREDENTIAL_TTL_MS));
  // Kept-alive upstream connections, with one TLS context for all of them (building one from the CA list costs milliseconds).
  const pool = createUpstreamPool(opts.upstreamCa, UPSTREAM_IDLE_MS);
  const modelProxy = new URL(opts.modelProxyUrl);
  const collector = opts.otlpEndpoint ? new URL(opts.otlpEndpoint) : null;
  /** Where a service of this deployment (the model proxy, the collector) is reached: as configured, not through the address rules. */
  const ownService = (url: URL) => ({
    scheme: url.protocol === 'https:' ? ('https' as const) : ('http' as const),
    address: url.hostname.replace(/^\[|\]$/g, ''),
    port: Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
    servername: net.isIP(url.hostname.replace(/^\[|\]$/g, '')) ? null : url.hostname,
    hostHeader: url.host,
    pathPrefix: url.pathname.replace(/\/+$/, ''),
  });

  // A turn begun in a sandbox may pin another agent version (another egress): its next request is decided under that one, not the cached one.
  const stopStaleWatch = sources.onPolicyStale?.((sandboxId) => policyOf.forget(`${sandboxId}\n`)) ?? (() => {});
  const contextFor = (who: SandboxIdentity) =>
    policyOf(`${who.sandboxId}\n${who.role}`, async () => {
      const { policy, repository } = await sources.policyFor(who);
      return { policy, repository, builtinHosts: BUILTIN_HOSTS };
    });

  const identityOf = ttlCache<SandboxIdentity | null>(IDENTITY_TTL_MS, REFRESH_WITHIN(IDENTITY_TTL_MS));
  const linkOf = (socket: net.Socket) => ({ local: socket.localAddress ?? '', remote: socket.remoteAddress ?? '' });
  /** The sandbox at the other end of the link, looked up again (at most every second) for each request, so a destroyed sandbox's open connections stop too. */
  const identify = (link: ConnMeta['link']) => (link.local && link.remote ? identityOf(`${link.local}\n${link.remote}`, () => sources.identify(link.local, link.remote)) : Promise.resolve(null));

  const recorded = new Map<string, { minute: number; count: number }>();
  function mayRecord(sandboxId: string): boolean {
    const minute = Math.floor(Date.now() / 60_000);
    const r = recorded.get(sandboxId);
    if (!r || r.minute !== minute) {
      if (recorded.size >= 10_000) recorded.clear();
      recorded.set(sandboxId, { minute, count: 1 });
      return true;
    }
    return ++r.count <= EVENTS_PER_MINUTE;
  }

  /** Counts, logs and records a request report mode let through (enforced=false); it goes on. */
  function reported(who: SandboxIdentity, req: { method: string; host: string; path: string }, would: Refusal) {
    reports.inc({ rule: would.rule });
    logger.info({ sandbox: who.sandboxId, team: who.teamName, role: who.role, method: req.method, host: req.host, path: req.path, decision: 'report', rule: would.rule, destination: would.destination, reason: would.reason }, 'egress allowed in report mode');
    if (mayRecord(who.sandboxId)) {
      recordEgressEvent(opts.db, who, { ...req, destination: would.destination, rule: would.rule, reason: would.reason, enforced: false }).catch((err) => logger.error({ err }, 'could not record an egress report'));
    }
  }

  /** Counts, logs and records one refusal; the caller writes the wire answer. */
  function refused(who: SandboxIdentity | null, req: { method: string; host: string; path: string }, d: Refusal) {
    requests.inc({ decision: 'deny' });
    refusals.inc({ rule: d.rule });
    logger.info({ sandbox: who?.sandboxId, team: who?.teamName, role: who?.role, method: req.method, host: req.host, path: req.path, decision: 'deny', rule: d.rule, destination: d.destination, reason: d.reason }, 'egress refused');
    if (who && d.rule !== 'upstream' && d.rule !== 'dns' && mayRecord(who.sandboxId)) {
      recordEgressEvent(opts.db, who, { ...req, destination: d.destination, rule: d.rule, reason: d.reason }).catch((err) => logger.error({ err }, 'could not record an egress refusal'));
    }
  }

  const refusalText = (req: { method: string; host: string; path: string }, d: Refusal, who: SandboxIdentity | null) =>
    `Crewhouse gateway refused ${req.method} ${req.host}${req.path}${who ? ` (role ${who.role})` : ''}: ${d.reason} [rule: ${d.rule}]\n`;
  const statusOf = (d: Refusal) => (d.rule === 'upstream' || d.rule === 'dns' || d.rule === 'encoding' ? 502 : d.rule === 'bad_request' ? 400 : 403);

  function answerRefusal(x: Exchange, req: { method: string; host: string; path: string }, d: Refusal, who: SandboxIdentity | null) {
    x.answer(statusOf(d), [['content-type', 'text/plain; charset=utf-8'], ['x-crewhouse-gateway-rule', d.rule]], refusalText(req, d, who));
  }

  /** The request's target from its absolute-form URL, or inside a tunnel from the CONNECT and its Host header (which must agree). */
  function targetOf(x: Exchange, conn: ConnMeta): { ok: true; target: EgressRequest; search: string; hostHeader: string } | { ok: false; decision: Refusal; host: string; path: string } {
    const method = x.method;
    const rawUrl = x.target;
    const hostHeader = x.get('host') ?? '';
    const bad = (rule: 'bad_request' | 'host_mismatch', reason: string, host = hostHeader, path = rawUrl) => ({ ok: false as const, decision: deny(rule, reason), host, path });
    let scheme: 'http' | 'https';
    let host: string;
    let port: number;
    let pathAndQuery: string;
    if (conn.tunnel) {
      if (!rawUrl.startsWith('/')) return bad('bad_request', 'inside a tunnel a request names a path, not a URL');
      ({ scheme, host, port } = conn.tunnel);
      pathAndQuery = rawUrl;
      const same = hostHeader === host || hostHeader === `${host}:${port}`;
      const h = same ? null : parseHost(hostHeader);
      if (h && (!h.ok || h.host !== host || (h.port !== null && h.port !== port))) return bad('host_mismatch', `the Host header "${hostHeader.slice(0, 100)}" differs from the CONNECT target ${host}:${port}`, host);
    } else {
      let url: URL;
      try {
        url = new URL(rawUrl);
      } catch {
        return bad('bad_request', 'the gateway is an HTTP proxy: send absolute URLs (http://host/path) or CONNECT');
      }
      if (url.protocol !== 'http:') return bad('bad_request', `${url.protocol} URLs go through CONNECT`);
      if (url.username || url.password) return bad('bad_request', 'URLs with user info are refused');
      const h = parseHost(url.host);
      if (!h.ok) return bad('bad_request', `the host ${url.host.slice(0, 100)} ${h.reason}`);
      scheme = 'http';
      host = h.host;
      port = h.port ?? 80;
      pathAndQuery = `${url.pathname}${url.search}`;
      const hh = parseHost(hostHeader);
      if (hostHeader && hostHeader !== url.host && (!hh.ok || hh.host !== host || (hh.port ?? 80) !== port)) return bad('host_mismatch', `the Host header "${hostHeader.slice(0, 100)}" differs from the URL's host ${host}`, host, url.pathname);
    }
    const q = pathAndQuery.indexOf('?');
    const path = q < 0 ? pathAndQuery : pathAndQuery.slice(0, q);
    const search = q < 0 ? '' : pathAndQuery.slice(q);
    return { ok: true, target: { method, scheme, host, port, path }, search, hostHeader: port === (scheme === 'https' ? 443 : 80) ? host : `${host}:${port}` };
  }

  function outgoingHeaders(x: Exchange, d: Decision & { allow: true }, credential: Credential | null, hostHeader: string): Headers {
    const named = new Set((x.get('connection') ?? '').toLowerCase().split(',').map((v) => v.trim()));
    const allow = d.destination ? new Set([...FRAMING, ...d.destination.header_allowlist.map((h) => h.toLowerCase())]) : null;
    const out: Headers = [['host', hostHeader]];
    for (const [name, value] of x.headers) {
      if (HOP_BY_HOP.has(name) || named.has(name) || name.startsWith('proxy-')) continue;
      if (allow && !allow.has(name)) continue;
      if (credential && (name === 'authorization' || name === 'cookie' || name === credential.header)) continue;
      if (credential && name === 'accept-encoding') continue;
      out.push([name, value]);
    }
    if (credential) {
      out.push([credential.header, credential.value]);
      // Bodies are scanned for the credential on the way back: ask for them uncompressed.
      out.push(['accept-encoding', 'identity']);
    }
    return out;
  }

  type Route = UpstreamAddress & { hostHeader: string; pathPrefix: string };
  /**
   * What the cleartext rule needs of a route: whether it goes to this deployment's own service
   * (the model proxy, the collector: configured by the operator, not a destination), else where
   * it goes and the destination whose rules apply there.
   */
  type Cleartext = { own: true } | { own: false; where: string; rules: PolicyDestination | null; what: string };
  const OWN: Cleartext = { own: true };
  const cleartextHosts = new Set(opts.cleartextHosts ?? []);

  /**
   * A credential goes only over TLS the gateway itself verified: plain HTTP toward a destination
   * with one (an absolute http:// URL, plain HTTP inside a CONNECT tunnel, an MCP server at an
   * http:// URL) is refused, unless the operator listed its host:port as a dev-only cleartext host.
   */
  function cleartextRefusal(route: Route, c: Cleartext): Refusal | null {
    if (c.own || route.scheme === 'https') return null;
    if (c.rules?.dev_only && cleartextHosts.has(c.where)) return null;
    const name = c.rules?.name ?? null;
    const listed = cleartextHosts.has(c.where) ? ` (${c.where} is listed as a cleartext host, but only a dev-only destination may use that)` : '';
    return deny(
      'cleartext',
      `${c.what} has a credential the gateway adds to requests, and this request would carry it unencrypted over plain HTTP to ${c.where}${listed}; the gateway sends credentials only over TLS it verified itself: use https://`,
      name,
    );
  }

  /** Resolves a name and checks every address under `destination`'s rules: the addresses, or the refusal. */
  async function dial(host: string, ctx: DecisionContext, destination: PolicyDestination | null): Promise<string[] | Refusal> {
    let addresses: string[];
    try {
      addresses = await opts.resolve(host);
    } catch (err) {
      return deny('dns', `${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'error'})`, destination?.name ?? null);
    }
    for (const ip of addresses) {
      const bad = checkAddress(ip, host, ctx.policy, destination);
      if (bad) return bad;
    }
    return addresses;
  }

  /**
   * Where an allowed request goes: the built-in destinations to this deployment's own services
   * (the model proxy, the collector) or to one of the role's MCP servers, anything else to the
   * address the gateway resolved and checked for the request's host.
   */
  async function upstreamFor(
    who: SandboxIdentity,
    ctx: DecisionContext,
    target: EgressRequest,
    decision: Decision & { allow: true },
    hostHeader: string,
  ): Promise<{ ok: true; upstream: Route; upstreamPath: string; credential?: Credential | null; cleartext: Cleartext } | { ok: false; refusal: Refusal }> {
    const refusal = (r: Refusal) => ({ ok: false as const, refusal: r });
    const d = decision.destination;
    if (!d?.builtin) {
      const addresses = await dial(target.host, ctx, d);
      if (!Array.isArray(addresses)) return refusal(addresses);
      const upstream: Route = { scheme: target.scheme, address: addresses[0], port: target.port, servername: net.isIP(target.host) ? null : target.host, hostHeader, pathPrefix: '' };
      return { ok: true, upstream, upstreamPath: target.path, cleartext: { own: false, where: hostPortKey(target.host, target.port), rules: d, what: d ? `destination "${d.name}"` : 'the destination' } };
    }
    if (d.name === 'llm') {
      // The model proxy is this service's own component: reachable wherever it listens.
      return { ok: true, upstream: ownService(modelProxy), upstreamPath: target.path, cleartext: OWN };
    }
    if (d.name === 'otel') {
      // OTLP/HTTP from the sandbox's own tools, to the deployment's collector.
      if (!collector) return refusal(deny('not_configured', 'no telemetry collector is configured on this deployment (SERVICE_OTLP_ENDPOINT)', 'otel'));
      return { ok: true, upstream: ownService(collector), upstreamPath: target.path, cleartext: OWN };
    }
    if (d.name !== 'mcp') return refusal(deny('not_configured', `the built-in destination "${d.name}" has no upstream on this gateway`, d.name));
    // http(s)://mcp.crewhouse.internal/<server>/<path>: one of the role's MCP servers, with its credential.
    const m = /^\/([A-Za-z0-9][A-Za-z0-9._-]{0,127})(\/.*)?$/.exec(target.path);
    if (!m) return refusal(deny('path', `MCP servers are reached at ${BUILTIN_HOSTS.mcp}/<server name>/…, not ${target.path}`, 'mcp'));
    const server = await mcpServerOf(`${who.sandboxId}\n${who.role}\n${m[1]}`, () => sources.mcpServer(who, m[1]));
    if (!server.ok) return refusal(deny('not_configured', server.reason, 'mcp'));
    // An allowlist must name the server's destination; its address rules (dev-only, say) apply in either mode.
    if (ctx.policy.mode === 'allowlist' && !ctx.policy.destinations.some((x) => x.name === server.destination)) {
      return refusal(deny('no_destination', `the MCP server "${m[1]}" is reached through the destination "${server.destination}", which is not in the role's egress`, 'mcp'));
    }
    const url = new URL(server.url);
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    const addresses = await dial(host, ctx, server.rules);
    if (!Array.isArray(addresses)) return refusal(addresses);
    const upstream: Route = {
      scheme: url.protocol === 'https:' ? 'https' : 'http',
      address: addresses[0],
      port: Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
      servername: net.isIP(host) ? null : host,
      hostHeader: url.host,
      pathPrefix: url.pathname.replace(/\/+$/, ''),
    };
    // `/<server>` is the server's URL itself, `/<server>/x` is below it.
    return { ok: true, upstream, upstreamPath: m[2] ?? '', credential: server.credential, cleartext: { own: false, where: hostPortKey(host, upstream.port), rules: server.rules, what: `the MCP server "${m[1]}"` } };
  }

  async function handle(x: Exchange, conn: ConnMeta) {
    if (!conn.tunnel && x.target === '/healthz' && x.method === 'GET') return x.answer(200, [['content-type', 'text/plain']], 'ok\n');
    const who = await identify(conn.link);
    const t = targetOf(x, conn);
    if (!t.ok) {
      const view = { method: x.method, host: t.host, path: t.path };
      refused(who, view, t.decision);
      return answerRefusal(x, view, t.decision, who);
    }
    const { target } = t;
    const view = { method: target.method, host: target.port === (target.scheme === 'https' ? 443 : 80) ? target.host : `${target.host}:${target.port}`, path: target.path };
    const refuse = (d: Refusal) => {
      refused(who, view, d);
      answerRefusal(x, view, d, who);
    };
    if (!who) return refuse(deny('unknown_sandbox', `no sandbox owns the link ${conn.link.remote} -> ${conn.link.local}`));
    let ctx: DecisionContext;
    try {
      ctx = await contextFor(who);
    } catch (err) {
      // The team was archived or the role removed while the sandbox still runs: it reaches nothing.
      return refuse(deny('unknown_sandbox', `sandbox ${who.sandboxId} has no egress policy: ${(err as Error).message}`));
    }
    const decision = decide(target, ctx);
    if (!decision.allow) return refuse(decision);
    if (decision.rule === 'report') reported(who, view, decision.would);

    const route = await upstreamFor(who, ctx, target, decision, t.hostHeader);
    if (!route.ok) return refuse(route.refusal);
    const { upstream, upstreamPath } = route;

    let credential: Credential | null = null;
    // Report mode passes what the rules would refuse, but never with a credential.
    const inject = decision.rule === 'report' ? null : (decision.destination?.inject_secret ?? null);
    // Decided before the credential is read: one that would travel in cleartext is never fetched.
    if (inject || route.credential) {
      const plain = cleartextRefusal(upstream, route.cleartext);
      if (plain) return refuse(plain);
    }
    if (inject) {
      // Git's smart HTTP and an API take a credential in different forms (the code host's token: basic auth for git).
      const use = /\/(info\/refs|git-upload-pack|git-receive-pack)$/.test(target.path) ? 'git' : 'api';
      // The code-host app keeps its installation tokens itself and renews them before they expire:
      // a second cache here could go on handing out one the app has replaced.
      const got = inject === 'code_host_installation_token' ? await sources.credential(who, inject, use) : await credentialOf(`${who.sandboxId}\n${inject}\n${use}`, () => sources.credential(who, inject, use));
      if (!got.ok) return refuse(deny('credential', got.reason, decision.destination!.name));
      credential = got.credential;
    }

    // An MCP server's route carries that server's credential.
    if (route.credential !== undefined) credential = route.credential;

    requests.inc({ decision: 'allow' });
    const headers = outgoingHeaders(x, decision, credential, upstream.hostHeader);
    if (decision.destination?.name === 'llm') {
      // The model proxy logs each call's cost under this id: it names the sandbox, whatever the sandbox sent.
      for (let i = headers.length - 1; i >= 0; i--) if (headers[i][0] === 'x-request-id') headers.splice(i, 1);
      headers.push(['x-request-id', sandboxRequestId(who.sandboxId)]);
    }
    const secrets = credential ? [credential.value, credential.value.replace(/^(Bearer|token|Basic) /, ''), ...(credential.bare ? [credential.bare] : [])] : [];
    let body: Readable | undefined;
    let pushed: ReturnType<typeof pushRecorder> | null = null;
    if (target.method === 'POST' && target.path.endsWith('/git-receive-pack')) {
      const push = await readPush(x);
      const globs = decision.destination?.git_push_ref_globs ?? [];
      if (push.state === 'bad') return refuse(deny('git_push', push.reason, decision.destination?.name ?? null));
      const no = refusedCommand(push.commands, globs);
      if (no) {
        const d = deny('git_push', no.reason, decision.destination?.name ?? null);
        refused(who, view, d);
        await drain(push.rest);
        x.answer(200, [['content-type', 'application/x-git-receive-pack-result'], ['cache-control', 'no-cache'], ['x-crewhouse-gateway-rule', 'git_push']], refusePushBody(push.commands, push.capabilities, no));
        return;
      }
      // The pack goes on as it was read: decompressed, and chunked.
      body = push.rest;
      // What the upstream accepts of it is recorded from its own answer (the run's delivery comes from there).
      pushed = pushRecorder(opts.db, logger, who, { destination: decision.destination?.name ?? null, repository: `${view.host}${target.path.slice(0, -'/git-receive-pack'.length)}`, commands: push.commands, capabilities: push.capabilities });
      if (push.decompressed) {
        const i = headers.findIndex(([n]) => n === 'content-encoding');
        if (i >= 0) headers.splice(i, 1);
      }
    }

    logger.info({ sandbox: who.sandboxId, team: who.teamName, role: who.role, method: target.method, host: view.host, path: target.path, decision: 'allow', rule: decision.rule, destination: decision.destination?.name ?? null }, 'egress');
    const path = (upstream.pathPrefix + upstreamPath || '/') + t.search;
    // The model proxy in this process takes the request as it was parsed here, not over a second HTTP hop.
    const local = decision.destination?.name === 'llm' && upstream.pathPrefix === '' && !body && x.minor === 1 ? localHandlers.get(modelProxy) : undefined;
    if (local) return handOff(x, local, { method: target.method, path, headers, secrets });
    const done = await forward(x, pool, {
      upstream,
      method: target.method,
      path,
      headers,
      body,
      secrets,
      ...(pushed ? { observe: pushed.observe } : {}),
    });
    if (pushed) await pushed.finish();
    if (!done.ok) {
      const err = done.error;
      if (err.code === 'EGATEWAY_ENCODING') refuse(deny('encoding', err.message, decision.destination?.name ?? null));
      else refuse(deny('upstream', `the upstream ${view.host} failed: ${err.code ?? err.message}`, decision.destination?.name ?? null));
    }
  }

  /** Reads a receive-pack body up to the end of its commands; `rest` replays what was read, then streams the remainder (the pack). */
  async function readPush(x: Exchange): Promise<{ state: 'bad'; reason: string } | { state: 'done'; commands: PushCommand[]; capabilities: string[]; rest: Readable; decompressed: boolean }> {
    const decompressed = (x.get('content-encoding') ?? '').toLowerCase() === 'gzip';
    const body = x.bodyStream();
    const source: Readable = decompressed ? body.pipe(zlib.createGunzip()) : body;
    const chunks: Buffer[] = [];
    for (;;) {
      const chunk: Buffer | null = source.read();
      if (chunk === null) {
        if (source.readableEnded) break;
        const more = await new Promise<boolean>((resolve) => {
          const onReadable = () => finish(true);
          const onEnd = () => finish(false);
          const finish = (v: boolean) => {
            source.off('readable', onReadable);
            source.off('end', onEnd);
            source.off('error', onEnd);
            resolve(v);
          };
          source.once('readable', onReadable);
          source.once('end', onEnd);
          source.once('error', onEnd);
        });
        if (!more) break;
        continue;
      }
      chunks.push(chunk);
      const head = readPushHead(Buffer.concat(chunks));
      if (head.state === 'bad') return head;
      if (head.state === 'done') {
        source.unshift(Buffer.concat(chunks));
        return { state: 'done', commands: head.commands, capabilities: head.capabilities, rest: source, decompressed };
      }
    }
    const head = readPushHead(Buffer.concat(chunks));
    if (head.state === 'done') {
      source.unshift(Buffer.concat(chunks));
      return { state: 'done', commands: head.commands, capabilities: head.capabilities, rest: source, decompressed };
    }
    return { state: 'bad', reason: head.state === 'bad' ? head.reason : 'the push ended before its commands did' };
  }

  const drain = (s: Readable) =>
    new Promise<void>((resolve) => {
      s.on('data', () => {});
      s.once('end', resolve);
      s.once('error', () => resolve());
      s.resume();
    });

  /** Every sandbox connection, to end them all when the gateway stops. */
  const open = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  };
  const hooksFor = (conn: ConnMeta): ConnectionHooks => ({
    request: (x) => handle(x, conn),
    connect: (head, socket, rest) => {
      if (conn.tunnel) {
        // A tunnel inside a tunnel would only hide what is already decided request by request.
        answerAndClose(socket, 400, 'Crewhouse gateway: CONNECT inside a tunnel is not accepted [rule: bad_request]\n', 'bad_request');
        return;
      }
      void connect(head, socket, rest, conn.link).catch((err) => {
        logger.error({ err }, 'gateway CONNECT failed');
        socket.destroy();
      });
    },
    // Requests that do not parse get a 400 saying so, never a dropped connection without a word.
    malformed: (_socket, reason) => logger.info({ link: conn.link, reason }, 'gateway request not valid HTTP'),
    failed: (err) => logger.error({ err }, 'gateway request failed'),
  });

  /** Open connections by link (one link is one sandbox), so one sandbox cannot take every descriptor the process has. */
  const maxPerLink = opts.maxConnectionsPerSandbox ?? 256;
  const perLink = new Map<string, number>();
  const outer = net.createServer((socket) => {
    track(socket);
    socket.on('error', () => socket.destroy());
    const link = linkOf(socket);
    const key = `${link.local}\n${link.remote}`;
    const held = perLink.get(key) ?? 0;
    if (held >= maxPerLink) return refuseConnection(socket, link);
    perLink.set(key, held + 1);
    socket.once('close', () => {
      const left = (perLink.get(key) ?? 1) - 1;
      if (left > 0) perLink.set(key, left);
      else perLink.delete(key);
    });
    serveConnection(socket, hooksFor({ link, tunnel: null }));
  });

  /** A connection past the sandbox's cap: answered at once (429, saying why) and closed; the sandbox's other connections and every other sandbox go on. */
  function refuseConnection(socket: net.Socket, link: ConnMeta['link']) {
    const d = deny('connections', `the sandbox already holds ${maxPerLink} connections to the gateway, the most one sandbox may hold at once; finish or close connections it no longer uses before opening more`);
    requests.inc({ decision: 'deny' });
    refusals.inc({ rule: d.rule });
    // Whatever the client sends is not read: the answer goes out and the connection closes.
    socket.on('data', () => {});
    socket.setTimeout(10_000, () => socket.destroy());
    answerAndClose(socket, 429, `Crewhouse gateway refused a new connection: ${d.reason} [rule: ${d.rule}]\n`, d.rule);
    const gateway = `${link.local.includes(':') ? `[${link.local}]` : link.local}:${socket.localPort ?? ''}`;
    void identify(link).then(
      (who) => {
        // A sandbox that keeps opening connections is logged and recorded as often as any other refusal, not once a connection.
        if (!mayRecord(who?.sandboxId ?? `link:${link.remote}`)) return;
        logger.info({ sandbox: who?.sandboxId, team: who?.teamName, role: who?.role, link, decision: 'deny', rule: d.rule, reason: d.reason }, 'egress refused');
        if (who) recordEgressEvent(opts.db, who, { method: '', host: gateway, path: '', destination: null, rule: d.rule, reason: d.reason }).catch((err) => logger.error({ err }, 'could not record an egress refusal'));
      },
      (err) => logger.error({ err }, 'could not identify a refused connection'),
    );
  }

  async function connect(req: Head, socket: net.Socket, head: Buffer, link: ConnMeta['link']) {
    const who = await identify(link);
    const target = req.target;
    const parsed = parseHost(target);
    const view = { method: 'CONNECT', host: target.slice(0, 300), path: '' };
    const refuseTunnel = (d: Refusal) => {
      refused(who, view, d);
      answerAndClose(socket, d.rule === 'bad_request' ? 400 : 403, refusalText(view, d, who), d.rule);
    };
    if (!who) return refuseTunnel(deny('unknown_sandbox', `no sandbox owns the link ${link.remote} -> ${link.local}`));
    if (!parsed.ok || parsed.port === null || parsed.wildcard) return refuseTunnel(deny('bad_request', `CONNECT needs host:port, got "${target.slice(0, 100)}"`));
    let ctx: DecisionContext;
    try {
      ctx = await contextFor(who);
    } catch (err) {
      return refuseTunnel(deny('unknown_sandbox', `sandbox ${who.sandboxId} has no egress policy: ${(err as Error).message}`));
    }
    const d = decideConnect(parsed.host, parsed.port, ctx);
    if (!d.allow) return refuseTunnel(d);
    const tunnelHost = parsed.host;
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length) socket.unshift(head);
    socket.once('readable', () => {
      const first: Buffer | null = socket.read(1);
      if (first === null) return;
      socket.unshift(first);
      if (first[0] !== 0x16) {
        // Plain HTTP inside the tunnel: each request is still decided, against the tunnel's target.
        serveConnection(socket, hooksFor({ link, tunnel: { host: tunnelHost, port: parsed.port!, scheme: 'http' } }));
        return;
      }
      const secure = new tls.TLSSocket(socket, {
        isServer: true,
        secureContext: opts.leaves.contextFor(tunnelHost),
        ALPNProtocols: ['http/1.1'],
        SNICallback: (servername, cb) => {
          const sni = servername.toLowerCase().replace(/\.+$/, '');
          if (sni !== tunnelHost) {
            const d = deny('sni_mismatch', `the TLS server name ${sni.slice(0, 100)} differs from the CONNECT target ${tunnelHost}`);
            refused(who, { method: 'CONNECT', host: tunnelHost, path: '' }, d);
            cb(new Error(d.reason));
            return;
          }
          cb(null, opts.leaves.contextFor(tunnelHost));
        },
      });
      secure.on('error', () => secure.destroy());
      serveConnection(secure, hooksFor({ link, tunnel: { host: tunnelHost, port: parsed.port!, scheme: 'https' } }));
    });
  }

  return {
    server: outer,
    async close() {
      await new Promise<void>((resolve) => {
        outer.close(() => resolve());
        for (const socket of open) socket.destroy();
      });
      pool.close();
      stopStaleWatch();
    },
  };
}
