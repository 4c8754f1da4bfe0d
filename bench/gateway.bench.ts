// The credential gateway against the same requests sent straight to the upstream, and against
// squid as a peer (Debian's: plain forwarding, CONNECT tunnelling, and with squid-openssl TLS interception), in the same run: added
// latency at p50 and p90 for plain forwarding and for intercepted HTTPS, the throughput ratio
// to squid, and the memory 1,000 open intercepted connections cost. Measured in rounds, each
// path back to back, reported as medians of the rounds.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import v8 from 'node:v8';
import vm from 'node:vm';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeTeam } from '../test/factories.ts';
import { startFakeDns } from '../test/fakes/dns-server.ts';
import { sharedServices, testApp, testConfig, uniq } from '../test/harness.ts';
import { issuerOf, mintCertificateAuthority, mintLeaf } from '../src/gateway/certificates.ts';
import { startGateway } from '../src/gateway/gateway.component.ts';
import { Registry } from '../src/metrics.ts';
import { createLogger } from '../src/logger.ts';
import type { ProxyLoadOptions } from './proxy-load-worker.ts';
import { cpuOf, serviceProcess, type BenchReport } from './lib.ts';

const SECONDS = 3;
const ROUNDS = 3;
const CONNECTIONS = 10;
const HELD = 1000;
const NAME = 'bench.crewhouse.test';
const SANDBOX_ADDRESS = '127.0.0.2';

interface Result { rps: number; p50: number; p90: number; p99: number; errors: number; non2xx: number }
const fmt = (r: Result) => `${r.rps.toFixed(0)} req/s, p50 ${r.p50.toFixed(3)} ms, p90 ${r.p90.toFixed(3)} ms${r.errors || r.non2xx ? `, ${r.errors} errors, ${r.non2xx} non-2xx` : ''}`;
const worker = fileURLToPath(new URL('./proxy-load-worker.ts', import.meta.url));

function load(o: Omit<ProxyLoadOptions, 'connections' | 'seconds'> & { seconds?: number }): Promise<Result> {
  const child = spawn(process.execPath, [worker, JSON.stringify({ connections: CONNECTIONS, seconds: SECONDS, ...o })], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  return new Promise((resolve, reject) => child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out) as Result) : reject(new Error(`load exited ${code}`)))));
}

/** Opens `HELD` tunnels and keeps them open until `release` is called. */
async function hold(o: Omit<ProxyLoadOptions, 'connections' | 'seconds'>): Promise<() => Promise<void>> {
  const child = spawn(process.execPath, [worker, JSON.stringify({ connections: 1, seconds: 1, hold: HELD, ...o })], { stdio: ['pipe', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => resolve());
    child.once('close', (code) => reject(new Error(`holder exited ${code}`)));
  });
  return async () => {
    const closed = new Promise((r) => child.once('close', r));
    child.stdin.end();
    await closed;
  };
}

const rssOf = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
// A full collection on demand, for the memory figures (the bench does not run with --expose-gc).
v8.setFlagsFromString('--expose-gc');
const collect = vm.runInNewContext('gc') as () => void;
const mid = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const squidPath = ['/usr/sbin/squid', '/usr/bin/squid'].find((p) => fs.existsSync(p)) ?? null;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
const CERTGEN = '/usr/lib/squid/security_file_certgen';
/** Whether this squid can intercept TLS (Debian's squid-openssl): a like-for-like peer for the gateway's interception. */
const squidBumps = () => squidPath !== null && fs.existsSync(CERTGEN) && /--with-openssl/.test(execFileSync(squidPath, ['-v'], { encoding: 'utf8' }));

interface Squid {
  /** Plain HTTP forwarding and CONNECT tunnelling. */
  port: number;
  /** TLS interception (ssl-bump) under `bumpCa`, where this squid can; null otherwise. */
  bumpPort: number | null;
  proc: ChildProcess;
}

async function startSquid(dir: string, upstreamCaFile: string, bumpCa: { certPem: string; keyPem: string }): Promise<Squid> {
  const port = await freePort();
  const bumpPort = squidBumps() ? await freePort() : null;
  const bump: string[] = [];
  if (bumpPort !== null) {
    fs.writeFileSync(path.join(dir, 'bump-ca.pem'), bumpCa.certPem);
    fs.writeFileSync(path.join(dir, 'bump-ca.key'), bumpCa.keyPem);
    const db = path.join(dir, 'ssl_db');
    execFileSync(CERTGEN, ['-c', '-s', db, '-M', '16MB'], { stdio: 'ignore' });
    // squid started as root works as its own user: the certificate store must be its to write.
    execFileSync('chmod', ['-R', 'a+rwX', db]);
    bump.push(
      `http_port 127.0.0.1:${bumpPort} ssl-bump generate-host-certificates=on dynamic_cert_mem_cache_size=16MB tls-cert=${path.join(dir, 'bump-ca.pem')} tls-key=${path.join(dir, 'bump-ca.key')}`,
      `sslcrtd_program ${CERTGEN} -s ${db} -M 16MB`,
      'sslcrtd_children 2 startup=1 idle=1',
      'acl step1 at_step SslBump1',
      'ssl_bump peek step1',
      'ssl_bump bump all',
      `tls_outgoing_options cafile=${upstreamCaFile}`,
    );
  }
  fs.writeFileSync(path.join(dir, 'hosts'), `127.0.0.1 ${NAME}\n`);
  fs.writeFileSync(
    path.join(dir, 'squid.conf'),
    [
      `http_port 127.0.0.1:${port}`,
      ...bump,
      'http_access allow all',
      'cache deny all',
      'access_log none',
      `cache_log ${path.join(dir, 'cache.log')}`,
      `pid_filename ${path.join(dir, 'squid.pid')}`,
      `coredump_dir ${dir}`,
      `hosts_file ${path.join(dir, 'hosts')}`,
      'dns_nameservers 127.0.0.1',
      'max_filedescriptors 8192',
      'shutdown_lifetime 0 seconds',
      '',
    ].join('\n'),
  );
  const proc = spawn(squidPath!, ['-N', '-f', path.join(dir, 'squid.conf')], { stdio: 'ignore' });
  for (let i = 0; i < 200; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (up) return { port, bumpPort, proc };
    await new Promise((r) => setTimeout(r, 50));
  }
  proc.kill('SIGKILL');
  throw new Error(`squid did not start; see ${path.join(dir, 'cache.log')}`);
}

/**
 * The floor for interception in this runtime: a relay that terminates TLS and makes it again,
 * with no policy, no parsing and no pool (bytes piped both ways). What the gateway adds above it
 * is its own; what it shows below squid is Node's TLS.
 */
async function startRelay(leaf: { certPem: string; keyPem: string }, upstreamCaPem: string, upstream: { port: number; name: string }): Promise<net.Server> {
  const serverContext = tls.createSecureContext({ cert: leaf.certPem, key: leaf.keyPem });
  const clientContext = tls.createSecureContext({ ca: upstreamCaPem });
  const relay = net.createServer((socket) => {
    socket.setNoDelay(true);
    socket.on('error', () => socket.destroy());
    socket.once('data', () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      const inside = new tls.TLSSocket(socket, { isServer: true, secureContext: serverContext });
      const out = tls.connect({ host: '127.0.0.1', port: upstream.port, servername: upstream.name, secureContext: clientContext });
      out.setNoDelay(true);
      inside.on('error', () => out.destroy());
      out.on('error', () => inside.destroy());
      inside.pipe(out).pipe(inside);
    });
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  return relay;
}

export default async function gatewayBench(): Promise<BenchReport[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-gw-bench-'));
  fs.chmodSync(dir, 0o777);
  const upstreamCa = mintCertificateAuthority('Bench upstream CA');
  fs.writeFileSync(path.join(dir, 'upstream-ca.pem'), upstreamCa.certPem);
  const upstream = await serviceProcess<never>('./tls-upstream-worker.ts', mintLeaf(issuerOf(upstreamCa), NAME));
  const ports = JSON.parse(upstream.url) as { https: number; http: number };
  const dns = await startFakeDns({ [NAME]: ['127.0.0.1'] });
  const t = await testApp({ modelProxy: true, config: { SERVICE_EGRESS_DEV_DESTINATIONS: '1', SERVICE_LOG_LEVEL: 'warn' } });
  const reports: BenchReport[] = [];
  let squid: Squid | null = null;
  const bumpCa = mintCertificateAuthority('Bench squid CA');
  let gw: Awaited<ReturnType<typeof startGateway>> | null = null;
  const relayCa = mintCertificateAuthority('Bench relay CA');
  const relay = await startRelay(mintLeaf(issuerOf(relayCa), NAME), upstreamCa.certPem, { port: ports.https, name: NAME });
  try {
    for (const [name, port] of [['bench-https', ports.https], ['bench-http', ports.http]] as const) {
      const r = await t.request({ method: 'POST', url: '/api/v1/destinations', token: t.adminToken, body: { name, host: `${NAME}:${port}`, dev_only: true, methods: ['GET'], paths: ['/bench'], header_allowlist: ['accept'] } });
      if (r.status !== 201) throw new Error(r.text);
    }
    const team = await makeTeam(t);
    const url = `/api/v1/teams/${team.name}/roles/lead/egress`;
    const etag = String((await t.request({ method: 'GET', url, token: t.adminToken })).headers.etag);
    await t.request({ method: 'PUT', url, token: t.adminToken, body: { mode: 'allowlist', destinations: ['bench-https', 'bench-http'] }, headers: { 'if-match': etag } });
    const teamRow = await t.db.selectFrom('teams').select('id').where('name', '=', team.name).executeTakeFirstOrThrow();
    await t.db.insertInto('sandboxes').values({ id: uniq('bench'), team_id: teamRow.id, role: 'lead', replica: 0, provider: 'local', state: 'running', host_id: 'bench', host_address: '127.0.0.1', sandbox_address: SANDBOX_ADDRESS }).execute();
    const config = testConfig({ SERVICE_MODEL_PROXY_URL: t.modelProxy!.url, SERVICE_EGRESS_DEV_DESTINATIONS: '1', SERVICE_GATEWAY_DNS: dns.server, SERVICE_GATEWAY_UPSTREAM_CA_FILE: path.join(dir, 'upstream-ca.pem') });
    gw = await startGateway({ config, db: t.db, logger: createLogger({ level: 'warn' }), metrics: new Registry(), ...sharedServices(config, t.db), listen: { host: '127.0.0.1', port: 0 } });
    const proxy = { host: '127.0.0.1', port: gw.port };
    const secure = { host: '127.0.0.1', port: ports.https, name: NAME };
    const plain = { host: '127.0.0.1', port: ports.http, name: NAME };
    const paths = {
      direct: () => load({ mode: 'direct', tls: true, upstream: secure, ca: upstreamCa.certPem }),
      gateway: () => load({ mode: 'tunnel', tls: true, upstream: secure, proxy, ca: gw!.caPem, localAddress: SANDBOX_ADDRESS }),
      squid: () => load({ mode: 'tunnel', tls: true, upstream: secure, proxy: { host: '127.0.0.1', port: squid!.port }, ca: upstreamCa.certPem, localAddress: SANDBOX_ADDRESS }),
      squidBump: () => load({ mode: 'tunnel', tls: true, upstream: secure, proxy: { host: '127.0.0.1', port: squid!.bumpPort! }, ca: bumpCa.certPem, localAddress: SANDBOX_ADDRESS }),
      squidPlain: () => load({ mode: 'forward', tls: false, upstream: plain, proxy: { host: '127.0.0.1', port: squid!.port }, localAddress: SANDBOX_ADDRESS }),
      relay: () => load({ mode: 'tunnel', tls: true, upstream: secure, proxy: { host: '127.0.0.1', port: (relay.address() as net.AddressInfo).port }, ca: relayCa.certPem, localAddress: SANDBOX_ADDRESS }),
      plainDirect: () => load({ mode: 'direct', tls: false, upstream: plain }),
      plainGateway: () => load({ mode: 'forward', tls: false, upstream: plain, proxy, localAddress: SANDBOX_ADDRESS }),
    };
    if (squidPath) squid = await startSquid(dir, path.join(dir, 'upstream-ca.pem'), bumpCa);
    const bumps = squid?.bumpPort != null;
    // Warm every path (JIT, leaf certificate, kept-alive upstreams, the policy cache).
    for (const run of [paths.direct, paths.gateway, paths.relay, paths.plainDirect, paths.plainGateway, ...(squid ? [paths.squid, paths.squidPlain] : []), ...(bumps ? [paths.squidBump] : [])]) await run();

    const plainRounds: Array<{ direct: Result; gateway: Result; squid: Result | null }> = [];
    const tlsRounds: Array<{ direct: Result; gateway: Result; relay: Result; squid: Result | null; bump: Result | null }> = [];
    // CPU time per request, besides wall-clock figures: on a machine shared with other work,
    // what each proxy spends on a request is the steadier comparison.
    const kinds = ['plain', 'squidPlain', 'tls', 'relay', 'squid', 'bump'] as const;
    const cpu = Object.fromEntries(kinds.map((k) => [k, { s: 0, n: 0 }])) as Record<(typeof kinds)[number], { s: number; n: number }>;
    const measured = async (kind: (typeof kinds)[number], run: () => Promise<Result>) => {
      const pid = kind === 'squid' || kind === 'bump' || kind === 'squidPlain' ? squid!.proc.pid! : process.pid;
      const before = cpuOf(pid);
      const r = await run();
      cpu[kind].s += cpuOf(pid) - before;
      cpu[kind].n += r.rps * SECONDS;
      return r;
    };
    for (let i = 0; i < ROUNDS; i++) {
      plainRounds.push({ direct: await paths.plainDirect(), gateway: await measured('plain', paths.plainGateway), squid: squid ? await measured('squidPlain', paths.squidPlain) : null });
      tlsRounds.push({
        direct: await paths.direct(),
        gateway: await measured('tls', paths.gateway),
        relay: await measured('relay', paths.relay),
        squid: squid ? await measured('squid', paths.squid) : null,
        bump: bumps ? await measured('bump', paths.squidBump) : null,
      });
    }
    const us = (k: (typeof kinds)[number]) => (cpu[k].n ? `${((cpu[k].s / cpu[k].n) * 1e6).toFixed(0)} µs` : 'n/a');
    const clean = (rs: Result[]) => rs.every((r) => r.errors === 0 && r.non2xx === 0);
    const ratio = <R extends { gateway: Result }>(rs: R[], of: (r: R) => Result | null) => mid(rs.map((r) => r.gateway.rps / of(r)!.rps));
    const noSquid = 'squid is not installed (apt-get install squid-openssl, or squid): no peer measured';

    const pAdded50 = mid(plainRounds.map((r) => r.gateway.p50 - r.direct.p50));
    const pAdded90 = mid(plainRounds.map((r) => r.gateway.p90 - r.direct.p90));
    const plainVsSquid = squid ? ratio(plainRounds, (r) => r.squid) : NaN;
    reports.push({
      name: 'gateway, plain HTTP forwarding (allowlist decision, DNS, address check) against direct and against squid forwarding',
      lines: [
        `${CONNECTIONS} keep-alive connections, ${SECONDS} s each, ${ROUNDS} rounds; 1 KiB answers`,
        ...plainRounds.map((r, i) => `round ${i + 1}: direct ${fmt(r.direct)} | gateway ${fmt(r.gateway)}${r.squid ? ` | squid ${fmt(r.squid)}` : ''}`),
        `median added: p50 ${pAdded50.toFixed(3)} ms, p90 ${pAdded90.toFixed(3)} ms; throughput against direct ${mid(plainRounds.map((r) => r.gateway.rps / r.direct.rps)).toFixed(3)}`,
        squid ? `median throughput ratio gateway/squid (both forwarding plain HTTP): ${plainVsSquid.toFixed(3)}` : noSquid,
        `CPU per request: gateway ${us('plain')}${squid ? `, squid ${us('squidPlain')}` : ''}`,
      ],
      goal: "at most 1 ms added at p90 (median of the rounds), throughput at least squid's forwarding the same requests, no errors",
      met: pAdded90 <= 1 && squid !== null && plainVsSquid >= 1 && clean(plainRounds.map((r) => r.gateway)),
    });

    const tAdded50 = mid(tlsRounds.map((r) => r.gateway.p50 - r.direct.p50));
    const tAdded90 = mid(tlsRounds.map((r) => r.gateway.p90 - r.direct.p90));
    const vsSquid = squid ? ratio(tlsRounds, (r) => r.squid) : NaN;
    reports.push({
      name: 'gateway, HTTPS intercepted (TLS terminated and made again) against direct and against squid tunnelling',
      lines: [
        `${CONNECTIONS} kept-alive tunnels, ${SECONDS} s each, ${ROUNDS} rounds`,
        ...tlsRounds.map(
          (r, i) =>
            `round ${i + 1}: direct ${fmt(r.direct)} | gateway ${fmt(r.gateway)} | bare relay ${fmt(r.relay)}${r.squid ? ` | squid tunnel ${fmt(r.squid)}` : ''}${r.bump ? ` | squid bump ${fmt(r.bump)}` : ''}`,
        ),
        `median added against direct: p50 ${tAdded50.toFixed(3)} ms, p90 ${tAdded90.toFixed(3)} ms`,
        squid ? `median throughput ratio gateway/squid tunnelling: ${vsSquid.toFixed(3)} (a bare TLS-terminating relay in Node, no policy, bytes piped: ${mid(tlsRounds.map((r) => r.relay.rps / r.squid!.rps)).toFixed(3)})` : noSquid,
        bumps ? `median throughput ratio gateway/squid intercepting too (ssl-bump, like for like): ${ratio(tlsRounds, (r) => r.bump).toFixed(3)}` : 'squid cannot intercept TLS here (apt-get install squid-openssl): no like-for-like peer measured',
        `CPU per request: gateway ${us('tls')} (TLS both ways), bare relay ${us('relay')}${squid ? `, squid tunnelling ${us('squid')} (bytes through)` : ''}${bumps ? `, squid intercepting ${us('bump')}` : ''}`,
      ],
      goal: "throughput at least squid's tunnelling (median ratio >= 1), no errors",
      met: squid !== null && vsSquid >= 1 && clean(tlsRounds.map((r) => r.gateway)),
    });

    // Memory: 1,000 intercepted tunnels open at once, each having made one request. The process's
    // resident set keeps what the load rounds grew, so what the connections hold is read as
    // live memory after a full collection: the JavaScript heap plus what lives outside it
    // (buffers, TLS state in OpenSSL is in neither, so the resident set is shown as well).
    const live = () => {
      collect();
      const m = process.memoryUsage();
      return { live: (m.heapUsed + m.external) / 1048576, rss: m.rss / 1048576 };
    };
    const gwBefore = live();
    const releaseGw = await hold({ mode: 'tunnel', tls: true, upstream: secure, proxy, ca: gw.caPem, localAddress: SANDBOX_ADDRESS });
    const gwAfter = live();
    await releaseGw();
    const per = (mib: number) => `${((mib * 1024) / HELD).toFixed(1)} KiB per connection`;
    const squidLines: string[] = [];
    for (const [what, port, ca] of [
      ['tunnels, no interception', squid?.port ?? null, upstreamCa.certPem],
      ['intercepting (ssl-bump)', squid?.bumpPort ?? null, bumpCa.certPem],
    ] as const) {
      if (!squid || port === null) continue;
      const before = rssOf(squid.proc.pid!);
      const release = await hold({ mode: 'tunnel', tls: true, upstream: secure, proxy: { host: '127.0.0.1', port }, ca, localAddress: SANDBOX_ADDRESS });
      const after = rssOf(squid.proc.pid!);
      await release();
      squidLines.push(`squid (${what}): +${(after - before).toFixed(1)} MiB RSS (${per(after - before)})`);
    }
    reports.push({
      name: `gateway memory at ${HELD} open intercepted connections (for information)`,
      lines: [
        `gateway process: +${(gwAfter.live - gwBefore.live).toFixed(1)} MiB live (${per(gwAfter.live - gwBefore.live)}), +${(gwAfter.rss - gwBefore.rss).toFixed(1)} MiB RSS; each holds a TLS session each way`,
        ...(squidLines.length ? squidLines : ['squid: not measured']),
      ],
      goal: 'none (information)',
      met: true,
    });
  } finally {
    await gw?.stop();
    squid?.proc.kill('SIGKILL');
    relay.close();
    await upstream.close();
    await dns.close();
    await t.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return reports;
}
