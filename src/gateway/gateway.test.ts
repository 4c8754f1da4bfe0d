// The credential gateway from inside a sandbox's network: real clients (curl, git, Node's fetch)
// in a network namespace whose only way out is the gateway, against real upstreams on loopback
// (a TLS web server, a git server running `git http-backend`, the model proxy), names served by
// a DNS server of the test. Runs as root (namespaces); skips with the reason elsewhere.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { captureLogger, dbKind, sharedServices, testApp, testConfig, uniq, waitFor, type TestApp } from '../../test/harness.ts';
import { makeTeam } from '../../test/factories.ts';
import { startFakeDns, type FakeDns } from '../../test/fakes/dns-server.ts';
import { startEchoUpstream } from '../../test/fakes/echo-upstream.ts';
import { startGitServer } from '../../test/fakes/git-server.ts';
import { startFakeCollector, type FakeCollector } from '../../test/fakes/otlp-collector.ts';
import { createNetns, netnsSkipReason, type Netns } from '../../test/netns.ts';
import { Registry } from '../metrics.ts';
import { issuerOf, mintCertificateAuthority, mintLeaf } from './certificates.ts';
import { egressEventsOf } from './events.ts';
import { startGateway, type RunningGateway } from './gateway.component.ts';
import { sandboxProxyEnv } from './sandbox-env.ts';
import { BUILTIN_HOSTS } from '../egress/builtins.ts';

const has = (cmd: string) => {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const skip = netnsSkipReason() ?? (has('curl') && has('git') ? null : 'needs curl and git');

type Upstream = Awaited<ReturnType<typeof startEchoUpstream>>;

describe(`credential gateway, from a sandbox network (${dbKind})`, { skip: skip ?? false }, () => {
  let t: TestApp;
  let ns: Netns;
  let gw: RunningGateway;
  let dns: FakeDns;
  let echo: Upstream;
  let plain: Upstream;
  let git: Awaited<ReturnType<typeof startGitServer>>;
  let internal: net.Server;
  let internalPort = 0;
  let collector: FakeCollector;
  let internalHits = 0;
  let tmp: string;
  let env: Record<string, string>;
  let team: { name: string };
  let sandboxId: string;
  let metrics: Registry;
  let gatewayLog: string[];
  const echoSecret = `echo-secret-${crypto.randomBytes(12).toString('hex')}`;
  /** Everything the sandbox received: every client's output. */
  const received: string[] = [];

  const inside = async (argv: string[], opts: { cwd?: string; input?: string } = {}) => {
    const r = await ns.exec(argv, { env, ...opts });
    received.push(r.stdout, r.stderr);
    return r;
  };
  /** curl through the gateway: the body, then the status on the last line. */
  const curl = async (url: string, args: string[] = []) => {
    const r = await inside(['curl', '-sS', '--max-time', '20', '-w', '\n%{http_code}', ...args, url]);
    const lines = r.stdout.split('\n');
    return { status: Number(lines.pop()), body: lines.join('\n'), stderr: r.stderr, code: r.code };
  };
  /** Gives the sandbox another role, and waits (bounded) until the gateway, which looks the link up at most every second, answers as that role. */
  const setRole = async (role: string) => {
    await t.db.updateTable('sandboxes').set({ role }).where('id', '=', sandboxId).execute();
    await waitFor(`the gateway to see role ${role}`, async () => (await ns.exec(['curl', '-sS', 'http://169.254.169.254/'], { env })).stdout.includes(`(role ${role})`));
  };
  const events = async (rule: string) => (await egressEventsOf(t.db, sandboxId, '0', 1000)).filter((e) => e.rule === rule);

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-gw-'));
    const upstreamCa = mintCertificateAuthority('Test upstream CA');
    const issuer = issuerOf(upstreamCa);
    fs.writeFileSync(path.join(tmp, 'upstream-ca.pem'), upstreamCa.certPem);
    echo = await startEchoUpstream(mintLeaf(issuer, 'echo.crewhouse.test'));
    plain = await startEchoUpstream(null);
    git = await startGitServer(mintLeaf(issuer, 'git.crewhouse.test'));
    collector = await startFakeCollector();
    internal = net.createServer((s) => {
      internalHits++;
      s.destroy();
    });
    await new Promise<void>((r) => internal.listen(0, '127.0.0.1', () => r()));
    internalPort = (internal.address() as net.AddressInfo).port;
    const loop = ['127.0.0.1'];
    dns = await startFakeDns({
      'echo.crewhouse.test': loop,
      'plain.crewhouse.test': loop,
      'git.crewhouse.test': loop,
      'ch.crewhouse.test': loop,
      'wrong.crewhouse.test': loop,
      'other.crewhouse.test': loop,
      'loop.crewhouse.test': loop,
      'cleartext.crewhouse.test': loop,
      'optin.crewhouse.test': loop,
      'rebind.crewhouse.test': (n) => (n === 1 ? loop : ['93.184.216.34']),
    });

    t = await testApp({ modelProxy: true, config: { SERVICE_EGRESS_DEV_DESTINATIONS: '1' } });
    const admin = (method: string, url: string, body?: unknown, headers?: Record<string, string>) => t.request({ method, url: `/api/v1${url}`, token: t.adminToken, body, headers });
    assert.equal((await admin('PUT', '/secrets/echo-token', { value: echoSecret })).status, 201);
    const dest = async (body: Record<string, unknown>) => {
      const r = await admin('POST', '/destinations', { methods: [], paths: [], header_allowlist: [], git_push_ref_globs: [], dev_only: true, what: 'test', ...body });
      assert.equal(r.status, 201, r.text);
    };
    await dest({ name: 'echo', host: `echo.crewhouse.test:${echo.port}`, methods: ['GET', 'POST'], paths: ['/allowed/', '/files/*/raw', '/reflect'], header_allowlist: ['X-Allowed', 'accept'], inject_secret: 'secret:echo-token' });
    await dest({ name: 'echo-plain', host: `plain.crewhouse.test:${plain.port}` });
    await dest({ name: 'git', host: `git.crewhouse.test:${git.port}`, header_allowlist: ['git-protocol', 'accept', 'user-agent'], git_push_ref_globs: ['agent/*', 'refs/tags/v*', 'delete:agent/*'] });
    await dest({ name: 'codehost', host: `ch.crewhouse.test:${plain.port}`, inject_secret: 'code_host_installation_token' });
    await dest({ name: 'wrong-cert', host: `wrong.crewhouse.test:${echo.port}` });
    // A credential toward a plain-HTTP server, and one whose host:port the operator lists as a cleartext host.
    await dest({ name: 'plain-secret', host: `cleartext.crewhouse.test:${plain.port}`, inject_secret: 'secret:echo-token' });
    await dest({ name: 'opt-in', host: `optin.crewhouse.test:${plain.port}`, inject_secret: 'secret:echo-token' });
    team = await makeTeam(t);
    for (const [role, egress] of [
      ['lead', { mode: 'allowlist', destinations: ['echo', 'echo-plain', 'git', 'codehost', 'wrong-cert', 'plain-secret', 'opt-in'] }],
      ['dev', { mode: 'allow_all', destinations: ['echo-plain'] }],
    ] as const) {
      const url = `/teams/${team.name}/roles/${role}/egress`;
      const etag = String((await admin('GET', url)).headers.etag);
      const put = await admin('PUT', url, egress, { 'if-match': etag });
      assert.equal(put.status, 200, put.text);
    }

    ns = await createNetns();
    sandboxId = uniq('sbx');
    const teamRow = await t.db.selectFrom('teams').select('id').where('name', '=', team.name).executeTakeFirstOrThrow();
    await t.db
      .insertInto('sandboxes')
      .values({ id: sandboxId, team_id: teamRow.id, role: 'lead', replica: 0, provider: 'local', state: 'running', host_id: 'test', host_address: ns.hostAddress, sandbox_address: ns.sandboxAddress })
      .execute();

    metrics = new Registry();
    const config = testConfig({
      SERVICE_MODEL_PROXY_URL: t.modelProxy!.url,
      SERVICE_EGRESS_DEV_DESTINATIONS: '1',
      SERVICE_GATEWAY_DNS: dns.server,
      SERVICE_GATEWAY_UPSTREAM_CA_FILE: path.join(tmp, 'upstream-ca.pem'),
      SERVICE_OTLP_ENDPOINT: collector.url,
      SERVICE_GATEWAY_CLEARTEXT_HOSTS: `optin.crewhouse.test:${plain.port}`,
    });
    const captured = captureLogger();
    gatewayLog = captured.lines;
    gw = await startGateway({ config, db: t.db, logger: captured.logger, metrics, ...sharedServices(config, t.db), listen: { host: ns.hostAddress, port: 0 } });
    fs.writeFileSync(path.join(tmp, 'gateway-ca.pem'), gw.caPem);
    fs.mkdirSync(path.join(tmp, 'home'));
    env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: path.join(tmp, 'home'), GIT_TERMINAL_PROMPT: '0', ...sandboxProxyEnv(gw.url, path.join(tmp, 'gateway-ca.pem')) };
  });

  after(async () => {
    await gw?.stop();
    await ns?.close();
    await Promise.all([collector?.close(), echo?.close(), plain?.close(), git?.close(), dns?.close(), new Promise((r) => (internal ? internal.close(r) : r(null)))]);
    await t?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('the sandbox has no other way out: without the proxy nothing connects', async () => {
    const r = await ns.exec(['curl', '-sS', '--max-time', '5', '--noproxy', '*', `http://127.0.0.1:${internalPort}/`], { env });
    assert.notEqual(r.code, 0);
    const direct = await ns.exec(['curl', '-sS', '--max-time', '5', '--noproxy', '*', `http://${ns.hostAddress}:${echo.port}/`], { env });
    assert.notEqual(direct.code, 0);
  });

  test('allowlist over intercepted TLS: methods, paths, headers; the credential reaches the upstream and never the sandbox', async () => {
    await setRole('lead');
    const base = `https://echo.crewhouse.test:${echo.port}`;
    const ok = await curl(`${base}/allowed/x?q=1`, ['-H', 'X-Allowed: yes', '-H', 'X-Other: no', '-H', 'Authorization: Bearer sandbox-own', '-H', 'Cookie: a=b']);
    assert.equal(ok.status, 200, ok.stderr + ok.body);
    const seen = echo.seen.at(-1)!;
    assert.equal(seen.url, '/allowed/x?q=1');
    assert.equal(seen.headers.authorization, `Bearer ${echoSecret}`);
    assert.equal(seen.headers['x-allowed'], 'yes');
    assert.equal(seen.headers['x-other'], undefined);
    assert.equal(seen.headers.cookie, undefined);
    // The upstream echoed the credential back; the gateway took it out.
    assert.ok(!ok.body.includes(echoSecret));
    assert.ok(ok.body.includes('[redacted by the gateway]'));
    const reflect = await curl(`${base}/reflect`, ['-D', '-']);
    assert.equal(reflect.status, 200);
    assert.ok(!reflect.body.includes(echoSecret) && reflect.body.includes('x-reflected-authorization: [redacted by the gateway]'), reflect.body);

    const glob = await curl(`${base}/files/abc/raw`);
    assert.equal(glob.status, 200);
    for (const [url, args, rule] of [
      [`${base}/allowed/x`, ['-X', 'DELETE'], 'method'],
      [`${base}/private`, [], 'path'],
      [`${base}/files/a/b/raw`, [], 'path'],
      [`${base}/allowed/../private`, ['--path-as-is'], 'path'],
    ] as const) {
      const r = await curl(url, [...args]);
      assert.equal(r.status, 403, `${url}: ${r.body}`);
      assert.match(r.body, new RegExp(`\\[rule: ${rule}\\]`));
    }
    const elsewhere = await curl(`https://other.crewhouse.test:${echo.port}/`);
    assert.notEqual(elsewhere.code, 0);
    assert.match(elsewhere.stderr, /403/);
    const events = await waitFor('the refusals', async () => (await egressEventsOf(t.db, sandboxId, '0', 1000)).filter((e) => e.rule === 'no_destination').length > 0 && egressEventsOf(t.db, sandboxId, '0', 1000));
    const byRule = new Set(events.map((e) => e.rule));
    for (const rule of ['method', 'path', 'no_destination']) assert.ok(byRule.has(rule), rule);
    const method = events.find((e) => e.rule === 'method')!;
    assert.deepEqual([method.method, method.host, method.path, method.destination, method.role], ['DELETE', `echo.crewhouse.test:${echo.port}`, '/allowed/x', 'echo', 'lead']);
    assert.match(method.reason, /allows GET, POST, not DELETE/);
    assert.match(metrics.render(), /gateway_refusals_total\{rule="method"\} \d+/);
  });

  test("Node's fetch through the proxy variables, and plain HTTP forwarding", async () => {
    await setRole('lead');
    const script = `const r = await fetch('https://echo.crewhouse.test:${echo.port}/allowed/node', { headers: { 'x-allowed': 'node' } }); console.log(r.status, await r.text());`;
    const r = await inside([process.execPath, '--input-type=module', '-e', script]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^200 /);
    assert.equal(echo.seen.at(-1)!.headers['x-allowed'], 'node');
    const p = await curl(`http://plain.crewhouse.test:${plain.port}/anything`);
    assert.equal(p.status, 200, p.body);
    assert.equal(plain.seen.at(-1)!.url, '/anything');
    // Plain HTTP inside a CONNECT tunnel is decided per request too.
    const tunnelled = await curl(`http://plain.crewhouse.test:${plain.port}/tunnelled`, ['--proxytunnel']);
    assert.equal(tunnelled.status, 200, tunnelled.stderr + tunnelled.body);
    assert.equal(plain.seen.at(-1)!.url, '/tunnelled');
  });

  test("the model proxy with the role's key, which the sandbox never holds", async () => {
    await setRole('lead');
    const key = await t.services.teamsDirectory.roleModelKey(team.name, 'lead');
    assert.ok(key);
    const r = await curl(`http://${BUILTIN_HOSTS.llm}/v1/models`);
    assert.equal(r.status, 200, r.body);
    const tls = await curl(`https://${BUILTIN_HOSTS.llm}/v1/models`);
    assert.equal(tls.status, 200, tls.body + tls.stderr);
    const bad = await t.modelProxy!.app.inject({ method: 'GET', url: '/v1/models' });
    assert.equal(bad.statusCode, 401, 'the proxy needs a key: the 200 above carried the role key');
    received.push(JSON.stringify(env));
    for (const text of received) assert.ok(!text.includes(key!), 'the model key reached the sandbox');
  });

  test('upstream certificates are verified: a certificate for another name is a 502 naming the failure', async () => {
    await setRole('lead');
    const r = await curl(`https://wrong.crewhouse.test:${echo.port}/`);
    assert.equal(r.status, 502, r.body);
    assert.match(r.body, /ERR_TLS_CERT_ALTNAME_INVALID/);
    assert.equal(echo.seen.filter((s) => s.headers.host?.startsWith('wrong.')).length, 0);
  });

  test('what is not HTTP gets a 400, and an origin-form request is told to use the proxy', async () => {
    const garbage = await inside(['sh', '-c', `printf 'NOT HTTP\\r\\n\\r\\n' | curl -sS --max-time 5 telnet://${ns.hostAddress}:${gw.port}`]);
    assert.match(garbage.stdout, /400 Bad Request/);
    const origin = await inside(['curl', '-sS', '--noproxy', '*', '-w', '\n%{http_code}', `http://${ns.hostAddress}:${gw.port}/some/path`]);
    assert.match(origin.stdout, /send absolute URLs[\s\S]*400$/);
    // A CONNECT inside a plain-HTTP tunnel: refused, not a tunnel within the tunnel.
    const nested = `
      import http from 'node:http';
      const u = new URL(process.env.HTTPS_PROXY);
      const req = http.request({ host: u.hostname, port: u.port, method: 'CONNECT', path: 'plain.crewhouse.test:${plain.port}' });
      req.on('connect', (res, socket) => {
        console.log('outer', res.statusCode);
        socket.write('CONNECT echo.crewhouse.test:${echo.port} HTTP/1.1\\r\\nHost: echo.crewhouse.test:${echo.port}\\r\\n\\r\\n');
        let got = '';
        socket.on('data', (c) => (got += c));
        socket.on('close', () => console.log('inner', got.split('\\r\\n')[0], got.includes('CONNECT inside a tunnel')));
      });
      req.end();`;
    const inner = await inside([process.execPath, '--input-type=module', '-e', nested]);
    assert.match(inner.stdout, /outer 200/);
    assert.match(inner.stdout, /inner HTTP\/1\.1 400 Bad Request true/);
  });

  test('a credential never travels in cleartext: absolute http:// and plain HTTP inside a CONNECT tunnel are refused, saying why; a listed dev-only host is the visible exception', async () => {
    await setRole('lead');
    const reached = plain.seen.length;
    for (const [url, args] of [
      // Absolute-form http:// toward a destination with a credential (the gateway would dial port 80 or the named port in the clear).
      [`http://cleartext.crewhouse.test:${plain.port}/absolute`, []],
      // CONNECT, then plain HTTP inside the tunnel instead of TLS.
      [`http://cleartext.crewhouse.test:${plain.port}/tunnelled`, ['--proxytunnel']],
      // The same toward a TLS destination's own port: the gateway would speak plain HTTP to it.
      [`http://echo.crewhouse.test:${echo.port}/allowed/x`, ['--proxytunnel']],
      [`http://echo.crewhouse.test:${echo.port}/allowed/x`, []],
    ] as const) {
      const r = await curl(url, [...args]);
      assert.equal(r.status, 403, `${url} ${args.join(' ')}: ${r.stderr}${r.body}`);
      assert.match(r.body, /would carry it unencrypted over plain HTTP/);
      assert.match(r.body, /only over TLS it verified itself/);
      assert.match(r.body, /\[rule: cleartext\]/);
    }
    assert.equal(plain.seen.length, reached, 'nothing reached the plain-HTTP upstream');
    const recorded = await waitFor('the cleartext refusals', async () => {
      const e = await events('cleartext');
      return e.length >= 4 && e;
    });
    assert.deepEqual(new Set(recorded.map((e) => e.destination)), new Set(['plain-secret', 'echo']));

    // The opt-in: a dev-only destination whose host:port the operator listed, said in the log at start.
    assert.ok(gatewayLog.some((l) => l.includes('unencrypted') && l.includes(`optin.crewhouse.test:${plain.port}`)), 'the opt-in is logged at start');
    const opted = await curl(`http://optin.crewhouse.test:${plain.port}/opted`);
    assert.equal(opted.status, 200, opted.body);
    assert.equal(plain.seen.at(-1)!.headers.authorization, `Bearer ${echoSecret}`);
    assert.ok(!opted.body.includes(echoSecret));
  });

  test('an echoed credential is taken out whatever the encoding: compressed answers are decoded, encoded echoes masked; a coding the gateway cannot read is refused', async () => {
    await setRole('lead');
    const base = `https://echo.crewhouse.test:${echo.port}`;
    for (const as of ['gzip', 'deflate', 'deflate-raw', 'br']) {
      const r = await curl(`${base}/reflect/encoded?as=${as}`);
      assert.equal(r.status, 200, `${as}: ${r.stderr}`);
      assert.equal(echo.seen.at(-1)!.headers.authorization, `Bearer ${echoSecret}`);
      // Decoded by the gateway (curl was not asked to decompress): plain JSON, the credential masked.
      const echoed = JSON.parse(r.body);
      assert.equal(echoed.headers.authorization, '[redacted by the gateway]', as);
    }
    const zstd = await curl(`${base}/reflect/encoded?as=zstd`);
    assert.equal(zstd.status, 502, zstd.body);
    assert.match(zstd.body, /content encoding "zstd", which the gateway cannot decode/);
    assert.match(zstd.body, /\[rule: encoding\]/);
    await waitFor('the encoding refusal', async () => (await events('encoding')).length > 0);

    const text = await curl(`${base}/reflect/encoded?as=text`, ['-D', '-']);
    assert.equal(text.status, 200, text.stderr);
    const forms = [`Bearer ${echoSecret}`, echoSecret].flatMap((v) => {
      const b = Buffer.from(v);
      return [b.toString('base64'), b.toString('base64').replace(/=+$/, ''), b.toString('base64url'), b.toString('hex'), b.toString('hex').toUpperCase(), encodeURIComponent(v), v];
    });
    for (const f of forms) assert.ok(!text.body.includes(f), `the answer holds ${f}`);
    // Decoding what is left of each encoded line does not give the credential back either.
    for (const line of text.body.split('\n')) {
      const value = line.split(' ').slice(1).join(' ').trim();
      if (!value) continue;
      for (const decoded of [Buffer.from(value, 'base64').toString('latin1'), Buffer.from(value, 'base64url').toString('latin1'), Buffer.from(value, 'hex').toString('latin1'), (() => { try { return decodeURIComponent(value); } catch { return ''; } })()]) {
        assert.ok(!decoded.includes(echoSecret.slice(0, 16)), `${line} decodes to the credential`);
      }
    }
    assert.match(text.body, /x-reflected-base64: \[redacted by the gateway\]/i);
  });

  test('a path pattern without * is matched at segment boundaries: a longer name that starts the same is refused', async () => {
    await setRole('lead');
    const base = `https://echo.crewhouse.test:${echo.port}`;
    const neighbour = await curl(`${base}/reflect-not-really`);
    assert.equal(neighbour.status, 403, neighbour.body);
    assert.match(neighbour.body, /\[rule: path\]/);
    assert.equal((await curl(`${base}/reflect?x=1`)).status, 200);
    assert.equal((await curl(`${base}/reflect/below`)).status, 200);
  });

  test('a destination needing the code-host token is refused, saying why', async () => {
    await setRole('lead');
    const r = await curl(`https://ch.crewhouse.test:${plain.port}/`);
    assert.equal(r.status, 403, r.stderr + r.body);
    assert.match(r.body, /code-host integration is not set up/);
    assert.match(r.body, /\[rule: credential\]/);
  });

  test('git: clone, push to allowed refs, tags and deletions; refused refs refuse the whole push with the reason', async () => {
    await setRole('lead');
    git.makeRepo('repo.git');
    const url = `https://git.crewhouse.test:${git.port}/repo.git`;
    const work = path.join(tmp, 'work');
    const g = (args: string[], cwd = work) => inside(['git', '-c', 'user.name=Agent', '-c', 'user.email=agent@crewhouse.test', '-c', 'init.defaultBranch=main', ...args], { cwd });
    assert.equal((await g(['clone', url, work], tmp)).code, 0);
    fs.writeFileSync(path.join(work, 'a.txt'), 'one\n');
    assert.equal((await g(['add', '.'])).code, 0);
    assert.equal((await g(['commit', '-qm', 'one'])).code, 0);

    const allowed = await g(['push', 'origin', 'HEAD:refs/heads/agent/one']);
    assert.equal(allowed.code, 0, allowed.stderr);
    assert.ok(git.refs('repo.git')['refs/heads/agent/one']);

    const main = await g(['push', 'origin', 'HEAD:refs/heads/main']);
    assert.notEqual(main.code, 0);
    assert.match(main.stderr, /pushing to refs\/heads\/main is not allowed/);
    assert.equal(git.refs('repo.git')['refs/heads/main'], undefined);

    assert.equal((await g(['tag', 'v1'])).code, 0);
    assert.equal((await g(['push', 'origin', 'refs/tags/v1'])).code, 0);
    assert.ok(git.refs('repo.git')['refs/tags/v1']);
    assert.equal((await g(['tag', 'release'])).code, 0);
    const tag = await g(['push', 'origin', 'refs/tags/release']);
    assert.notEqual(tag.code, 0);
    assert.match(tag.stderr, /refs\/tags\/release is not allowed/);

    // Several refs at once, one of them refused: nothing of the push lands.
    fs.writeFileSync(path.join(work, 'b.txt'), 'two\n');
    await g(['add', '.']);
    await g(['commit', '-qm', 'two']);
    const before = git.refs('repo.git');
    const several = await g(['push', 'origin', 'HEAD:refs/heads/agent/two', 'HEAD:refs/heads/agent/one', 'HEAD:refs/heads/other']);
    assert.notEqual(several.code, 0);
    assert.match(several.stderr, /refs\/heads\/other is not allowed/);
    assert.deepEqual(git.refs('repo.git'), before);

    const del = await g(['push', 'origin', '--delete', 'refs/heads/agent/one']);
    assert.equal(del.code, 0, del.stderr);
    assert.equal(git.refs('repo.git')['refs/heads/agent/one'], undefined);
    const delTag = await g(['push', 'origin', '--delete', 'refs/tags/v1']);
    assert.notEqual(delTag.code, 0);
    assert.match(delTag.stderr, /deleting refs\/tags\/v1 is not allowed/);
    assert.ok(git.refs('repo.git')['refs/tags/v1']);

    const pushes = await waitFor('the push refusals', async () => (await events('git_push')).length >= 4 && events('git_push'));
    assert.ok(pushes.some((e) => e.path === '/repo.git/git-receive-pack' && /refs\/heads\/main/.test(e.reason)));
  });

  test('SSRF corpus: every internal target is refused with the reason, and nothing reaches the internal listener', async () => {
    await setRole('dev'); // allow_all: only the address rules stand in the way
    const since = (await egressEventsOf(t.db, sandboxId, '0', 100_000)).at(-1)?.id ?? '0';
    const hits = internalHits;
    const p = internalPort;
    const corpus: Array<[string, RegExp]> = [
      [`http://127.1:${p}/`, /127\.0\.0\.1 is a loopback address/],
      [`http://0x7f.1:${p}/`, /127\.0\.0\.1 is a loopback address/],
      [`http://2130706433:${p}/`, /127\.0\.0\.1 is a loopback address/],
      [`http://[::ffff:127.0.0.1]:${p}/`, /loopback address/],
      [`http://169.254.169.254/latest/meta-data/`, /169\.254\.169\.254 is a link-local address/],
      [`http://100.64.0.1:${p}/`, /cgnat address/],
      [`http://[fc00::1]:${p}/`, /unique-local address/],
      [`http://[64:ff9b::7f00:1]:${p}/`, /loopback address/],
      [`http://loop.crewhouse.test:${p}/`, /loop\.crewhouse\.test resolves to 127\.0\.0\.1, a loopback address/],
      [`http://LOOP.Crewhouse.TEST.:${p}/`, /loop\.crewhouse\.test resolves to 127\.0\.0\.1, a loopback address/],
      [`http://rebind.crewhouse.test:${p}/`, /rebind\.crewhouse\.test resolves to 127\.0\.0\.1/],
    ];
    for (const [url, reason] of corpus) {
      const r = await curl(url);
      assert.equal(r.status, 403, `${url}: ${r.body}`);
      assert.match(r.body, reason, url);
      assert.match(r.body, /\[rule: internal_address\]/, url);
    }
    // The name whose answer changes was looked up once; the checked answer is the one dialled.
    assert.equal(dns.asked('rebind.crewhouse.test', 'A'), 1);

    // A redirect is the client's to follow: the gateway passes it on, and checks the next hop again.
    const redirect = await curl(`http://plain.crewhouse.test:${plain.port}/redirect?to=${encodeURIComponent(`http://127.0.0.1:${p}/`)}`, ['-L']);
    assert.equal(redirect.status, 403);
    assert.match(redirect.body, /loopback address/);

    // CONNECT to an IP literal, with and without TLS inside.
    for (const url of [`https://127.0.0.1:${p}/`, `https://[::1]:${p}/`]) {
      const c = await curl(url);
      assert.notEqual(c.code, 0);
      assert.match(c.stderr, /403/);
    }
    const tunnel = await curl(`http://127.0.0.1:${p}/`, ['--proxytunnel']);
    assert.match(tunnel.stderr, /403/);

    // A TLS server name that differs from the CONNECT target.
    const script = `
      import http from 'node:http'; import tls from 'node:tls';
      const u = new URL(process.env.HTTPS_PROXY);
      const req = http.request({ host: u.hostname, port: u.port, method: 'CONNECT', path: 'plain.crewhouse.test:${plain.port}' });
      req.on('connect', (res, socket) => {
        console.log('connect', res.statusCode);
        const s = tls.connect({ socket, servername: 'loop.crewhouse.test' }, () => { console.log('handshake done'); s.end(); });
        s.on('error', (e) => { console.log('tls refused', e.code || e.message); });
      });
      req.end();`;
    const sni = await inside([process.execPath, '--input-type=module', '-e', script]);
    assert.match(sni.stdout, /connect 200/);
    assert.match(sni.stdout, /tls refused/);
    assert.doesNotMatch(sni.stdout, /handshake done/);
    const mismatch = await waitFor('the SNI refusal', async () => (await events('sni_mismatch'))[0]);
    assert.match(mismatch.reason, /loop\.crewhouse\.test differs from the CONNECT target plain\.crewhouse\.test/);

    // A Host header that differs from the CONNECT target, inside an allowed tunnel.
    const host = await curl(`https://echo.crewhouse.test:${echo.port}/allowed/`, ['-H', 'Host: loop.crewhouse.test']);
    assert.equal(host.status, 403);
    assert.match(host.body, /\[rule: host_mismatch\]/);

    assert.equal(internalHits, hits, 'a refused request reached the internal listener');
    const recorded = await waitFor('the SSRF refusals', async () => {
      const after = (await egressEventsOf(t.db, sandboxId, since, 1000)).filter((e) => e.rule === 'internal_address');
      return after.length >= corpus.length && after;
    });
    assert.ok(recorded.every((e) => e.role === 'dev'));
  });

  test('report mode: what the allowlist would refuse reaches the upstream without the credential, recorded as not enforced; the address rules still refuse', async () => {
    const url = `/api/v1/teams/${team.name}/roles/dev/egress`;
    const etag = String((await t.request({ method: 'GET', url, token: t.adminToken })).headers.etag);
    const put = await t.request({ method: 'PUT', url, token: t.adminToken, body: { mode: 'allowlist', destinations: ['echo'], report_only: true }, headers: { 'if-match': etag } });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.body.override.report_only, true);
    await setRole('dev');
    const base = `https://echo.crewhouse.test:${echo.port}`;
    // The gateway re-reads a role's policy at most every second.
    const reported = await waitFor('the report-mode policy', async () => {
      const r = await curl(`${base}/private/report`, ['-X', 'DELETE']);
      return r.status === 200 && r;
    });
    const seen = echo.seen.at(-1)!;
    assert.equal(seen.url, '/private/report');
    assert.equal(seen.headers.authorization, undefined, 'a reported request carries no credential');
    assert.ok(!reported.body.includes(echoSecret));
    const allowed = await curl(`${base}/allowed/x`);
    assert.equal(allowed.status, 200);
    assert.equal(echo.seen.at(-1)!.headers.authorization, `Bearer ${echoSecret}`, 'what the allowlist allows keeps its credential');
    const loop = await curl(`https://loop.crewhouse.test:${echo.port}/`);
    assert.notEqual(loop.status, 200, 'an internal address is refused in report mode too');
    const rows = await waitFor('the reported request', async () => {
      // (Tries before the gateway saw the new policy were refused for the address, and recorded as enforced.)
      const all = (await egressEventsOf(t.db, sandboxId, '0', 1000)).filter((e) => e.role === 'dev' && e.path === '/private/report' && !e.enforced);
      return all.length > 0 && all;
    });
    assert.equal(rows[0].rule, 'method');
    assert.match(rows[0].reason, /allows GET, POST, not DELETE/);
    assert.match(metrics.render(), /gateway_reported_total\{rule="method"\} \d+/);
  });

  test("the built-in otel reaches the deployment's collector, whatever the role's allowlist; the sandbox is told where it is", async () => {
    await setRole('lead');
    assert.equal(env.OTEL_EXPORTER_OTLP_ENDPOINT, `http://${BUILTIN_HOSTS.otel}`);
    const span = { traceId: '5b8efff798038103d269b633813fc60c', spanId: 'eee19b7ec3c1b174', name: 'sandbox-work', kind: 1, startTimeUnixNano: '1700000000000000000', endTimeUnixNano: '1700000001000000000' };
    const body = JSON.stringify({ resourceSpans: [{ resource: { attributes: [] }, scopeSpans: [{ scope: { name: 'test' }, spans: [span] }] }] });
    const r = await curl(`${env.OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces`, ['-X', 'POST', '-H', 'content-type: application/json', '--data-binary', body]);
    assert.equal(r.status, 200, r.body);
    assert.ok(collector.spans.some((s) => s.name === 'sandbox-work'), 'the collector took the span');
  });

  test('a connection from an address no sandbox owns is refused', async () => {
    await t.db.updateTable('sandboxes').set({ state: 'destroyed' }).where('id', '=', sandboxId).execute();
    try {
      // The gateway looks the link up again at most every second: wait (bounded) for it to see the change.
      const r = await waitFor('the destroyed sandbox to be refused', async () => {
        const out = await ns.exec(['curl', '-sS', '-w', '\n%{http_code}', `http://plain.crewhouse.test:${plain.port}/`], { env });
        return /unknown_sandbox/.test(out.stdout) && out;
      });
      assert.match(r.stdout, /403$/);
    } finally {
      await t.db.updateTable('sandboxes').set({ state: 'running' }).where('id', '=', sandboxId).execute();
    }
  });

  test('nothing the sandbox received, nor its environment or files, holds a secret', async () => {
    const key = await t.services.teamsDirectory.roleModelKey(team.name, 'lead');
    const files = execFileSync('sh', ['-c', `cat $(find ${JSON.stringify(tmp)} -type f -not -name '*.pem') 2>/dev/null || true`], { maxBuffer: 64 * 1024 * 1024 }).toString('latin1');
    for (const text of [...received, JSON.stringify(env), files]) {
      assert.ok(!text.includes(echoSecret), 'the destination secret reached the sandbox');
      assert.ok(!text.includes(key!), 'the model key reached the sandbox');
    }
    const rows = await sql<{ n: number }>`select count(*)::int as n from egress_events where reason like ${'%' + echoSecret + '%'}`.execute(t.db);
    assert.equal(rows.rows[0].n, 0);
  });
});
