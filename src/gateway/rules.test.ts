// The gateway's pure parts: the decision, the address check, the git push reader, redaction
// and the certificates. The whole gateway is tested from a network namespace in gateway.test.ts.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../config.ts';
import { effectiveEgressPolicy, type PolicyDestination } from '../egress/policy.ts';
import { issuerOf, mintCertificateAuthority, mintLeaf } from './certificates.ts';
import { checkAddress, decide, decideConnect, pathMatches, type DecisionContext, type EgressRequest } from './decide.ts';
import { readPushHead, refusedCommand, refusePushBody } from './git-push.ts';
import { createScrubber, redactStream, redactText, scrubForms } from './redact.ts';
import { BUILTIN_HOSTS } from '../egress/builtins.ts';

const dest = (name: string, extra: Partial<PolicyDestination> = {}): PolicyDestination => ({
  name, host: `${name}.example.com`, methods: [], paths: [], header_allowlist: [], inject_secret: null, git_push_ref_globs: [],
  what: name, builtin: false, github_scope: null, dev_only: false, policy_name: null, ...extra,
});
const ctxOf = (mode: 'allow_all' | 'allowlist', destinations: PolicyDestination[], extra: Partial<DecisionContext> = {}): DecisionContext => ({
  policy: effectiveEgressPolicy({ egress: { mode, destinations: destinations.map((d) => d.name), upstream_deny_cidrs: ['203.0.113.0/24', '8.8.4.0/24'] }, destinations, devDestinations: true }),
  repository: 'acme/widgets',
  builtinHosts: BUILTIN_HOSTS,
  ...extra,
});
const req = (host: string, path = '/', method = 'GET', port = 443): EgressRequest => ({ method, scheme: 'https', host, port, path });

describe('the decision', () => {
  const api = dest('api', { host: 'api.example.com', methods: ['GET'], paths: ['/v1/', '/files/*/raw', '/deep/**/end'] });
  const wild = dest('wild', { host: '*.cdn.example.com' });
  const port = dest('port', { host: 'svc.example.com:8443' });
  const gh = dest('gh', { host: 'github.com', github_scope: 'git' });
  const ghApi = dest('gh-api', { host: 'api.github.com', github_scope: 'api' });
  const meta = dest('gh-meta', { host: 'meta.github.com', github_scope: 'repo_metadata' });
  const ctx = ctxOf('allowlist', [api, wild, port, gh, ghApi, meta]);

  test('host, method and path rules, each refusal naming its rule and destination', () => {
    assert.equal(decide(req('api.example.com', '/v1/x'), ctx).allow, true);
    assert.deepEqual(decide(req('api.example.com', '/v1/x', 'POST'), ctx), { allow: false, rule: 'method', destination: 'api', reason: 'destination "api" allows GET, not POST' });
    const path = decide(req('api.example.com', '/v2'), ctx);
    assert.equal(path.allow ? null : path.rule, 'path');
    assert.equal(decide(req('nope.example.com'), ctx).allow ? null : (decide(req('nope.example.com'), ctx) as { rule: string }).rule, 'no_destination');
  });

  test('path patterns: prefixes, one-segment and any-depth globs; dot segments and encoded slashes never pass', () => {
    assert.ok(pathMatches('/v1/', '/v1/a/b'));
    assert.ok(!pathMatches('/v1/', '/v10'));
    assert.ok(pathMatches('/files/*/raw', '/files/abc/raw'));
    assert.ok(!pathMatches('/files/*/raw', '/files/a/b/raw'));
    assert.ok(pathMatches('/deep/**/end', '/deep/a/b/c/end'));
    assert.ok(!pathMatches('/a.b', '/axb'), 'a dot is literal');
  });

  test('a pattern without `*` matches at segment boundaries, never a longer name that starts the same', () => {
    assert.ok(pathMatches('/api/allowed', '/api/allowed'));
    assert.ok(pathMatches('/api/allowed', '/api/allowed/'));
    assert.ok(pathMatches('/api/allowed', '/api/allowed/deeper/still'));
    for (const p of ['/api/allowed-not-really', '/api/allowedx', '/api/allowed.json', '/api/allowed%2f', '/api/allowe', '/api']) assert.ok(!pathMatches('/api/allowed', p), p);
    assert.ok(pathMatches('/', '/anything/at/all'), '`/` is every path');
    assert.ok(pathMatches('/api/', '/api/x') && !pathMatches('/api/', '/api') && !pathMatches('/api/', '/apix'));
    // Through decide: the query is not part of the path, and the credential's destination is not matched by a neighbour.
    const narrow = ctxOf('allowlist', [dest('narrow', { paths: ['/api/allowed'], inject_secret: 'secret:narrow' })]);
    assert.equal(decide(req('narrow.example.com', '/api/allowed'), narrow).allow, true);
    assert.equal(decide(req('narrow.example.com', '/api/allowed/x'), narrow).allow, true);
    const neighbour = decide(req('narrow.example.com', '/api/allowed-not-really'), narrow);
    assert.equal(neighbour.allow ? 'allow' : neighbour.rule, 'path');
    for (const p of ['/v1/../admin', '/v1/%2e%2e/admin', '/v1/./x', '/v1/a%2fb', '/v1/a%5cb', '/v1/a\\b']) {
      const d = decide(req('api.example.com', p), ctx);
      assert.equal(d.allow ? 'allow' : d.rule, 'path', p);
    }
  });

  test('wildcards cover subdomains only; a port in the host is the only port, otherwise 80 and 443', () => {
    assert.equal(decide(req('a.cdn.example.com'), ctx).allow, true);
    assert.equal(decide(req('a.b.cdn.example.com'), ctx).allow, true);
    assert.equal(decide(req('cdn.example.com'), ctx).allow, false);
    assert.equal(decide(req('evilcdn.example.com'), ctx).allow, false);
    assert.equal(decide(req('svc.example.com', '/', 'GET', 8443), ctx).allow, true);
    assert.equal(decide(req('svc.example.com', '/', 'GET', 443), ctx).allow, false);
    assert.equal(decide(req('api.example.com', '/v1/', 'GET', 8080), ctx).allow, false);
  });

  test("github_scope narrows to the team's repository", () => {
    assert.equal(decide(req('github.com', '/acme/widgets.git/info/refs'), ctx).allow, true);
    assert.equal(decide(req('github.com', '/ACME/Widgets/git-upload-pack'), ctx).allow, true);
    const other = decide(req('github.com', '/acme/other.git/info/refs'), ctx);
    assert.equal(other.allow ? null : other.rule, 'github_scope');
    assert.equal(decide(req('github.com', '/acme/widgets-evil/info/refs'), ctx).allow, false);
    assert.equal(decide(req('api.github.com', '/repos/acme/widgets/pulls'), ctx).allow, true);
    assert.equal(decide(req('api.github.com', '/repos/acme/other/pulls'), ctx).allow, false);
    assert.equal(decide(req('api.github.com', '/user'), ctx).allow, false);
    assert.equal(decide(req('meta.github.com', '/repos/acme/widgets'), ctx).allow, true);
    assert.equal(decide(req('meta.github.com', '/repos/acme/widgets', 'POST'), ctx).allow, false);
    assert.equal(decide(req('meta.github.com', '/repos/acme/widgets/issues'), ctx).allow, false);
    const none = decide(req('github.com', '/acme/widgets.git/info/refs'), { ...ctx, repository: null });
    assert.match(none.allow ? '' : none.reason, /no linked code-host repository/);
  });

  test('allow_all: any name, but IP literals only when a destination names them; built-in hosts only as built-ins', () => {
    const all = ctxOf('allow_all', [dest('ip', { host: '198.51.100.5' })]);
    assert.deepEqual(decide(req('anything.example.org'), all), { allow: true, rule: 'allow_all', destination: null, reason: 'allow_all' });
    const literal = decide(req('1.1.1.1'), all);
    assert.equal(literal.allow ? null : literal.rule, 'ip_literal');
    const loop = decide(req('127.0.0.1'), all);
    assert.equal(loop.allow ? null : loop.rule, 'internal_address');
    assert.equal(decide(req('198.51.100.5'), all).allow, true);
    assert.equal((decide(req(BUILTIN_HOSTS.llm), all) as { destination: { name: string } }).destination.name, 'llm');
    const otel = decide(req(BUILTIN_HOSTS.otel), ctxOf('allowlist', []));
    assert.equal(otel.allow, true, 'the built-ins are in every policy');
    assert.equal(decide(req(BUILTIN_HOSTS.llm, '/', 'GET', 8080), all).allow, false);
  });

  test('report mode lets through what the allowlist would refuse, with no destination (so no credential), and names the rule; safety rules still refuse', () => {
    const keyed = dest('keyed', { host: 'api.example.com', methods: ['GET'], inject_secret: 'secret:k' });
    const policy = effectiveEgressPolicy({ egress: { mode: 'allowlist', destinations: ['keyed'], report_only: true }, destinations: [keyed], devDestinations: false });
    const report = { policy, repository: null, builtinHosts: BUILTIN_HOSTS };
    assert.equal(policy.report_only, true);
    const allowed = decide(req('api.example.com'), report);
    assert.ok(allowed.allow && allowed.rule === 'destination' && allowed.destination?.name === 'keyed', 'a request the allowlist allows keeps its destination and credential');
    for (const [r, rule] of [[req('elsewhere.example.org'), 'no_destination'], [req('api.example.com', '/', 'POST'), 'method']] as const) {
      const d = decide(r, report);
      assert.ok(d.allow && d.rule === 'report', `${rule} is reported, not refused`);
      assert.equal(d.destination?.name ?? null, rule === 'method' ? 'keyed' : null, 'the destination that refused it, for its address rules');
      assert.equal(d.would.rule, rule);
      assert.match(d.reason, /^report mode: would refuse: /);
    }
    for (const r of [req('127.0.0.1'), req('1.1.1.1'), req('api.example.com', '/a/../b')]) assert.equal(decide(r, report).allow, false, `${r.host}${r.path} is still refused`);
    assert.equal(decideConnect('elsewhere.example.org', 443, report).allow, true, 'a tunnel opens; each request inside is decided (and reported) again');
    assert.equal(checkAddress('10.1.2.3', 'elsewhere.example.org', policy, null)?.rule, 'internal_address', 'the address check is enforced in report mode');
    assert.equal(decide(req('elsewhere.example.org'), ctxOf('allowlist', [keyed])).allow, false, 'without report mode the same request is refused');
  });

  test('CONNECT is let through only where a request could go', () => {
    assert.equal(decideConnect('api.example.com', 443, ctx).allow, true);
    assert.equal(decideConnect('nope.example.com', 443, ctx).allow, false);
    assert.equal(decideConnect('10.0.0.1', 443, ctxOf('allow_all', [])).allow, false);
    assert.equal(decideConnect('anything.example.org', 443, ctxOf('allow_all', [])).allow, true);
  });
});

describe('the address check', () => {
  const policy = ctxOf('allow_all', []).policy;
  const devOnly = dest('dev', { host: 'localhost:11434', dev_only: true });
  test('internal addresses in every form are refused, unless the destination is dev-only; denied ranges always', () => {
    for (const ip of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '::1', 'fc00::1', 'fe80::1', '::ffff:127.0.0.1', '64:ff9b::7f00:1', '2002:7f00:1::', '0.0.0.0', '::', '198.51.100.1', '224.0.0.1']) {
      const d = checkAddress(ip, 'h.example.com', policy, null);
      assert.equal(d?.rule, 'internal_address', ip);
      assert.equal(checkAddress(ip, 'h.example.com', policy, devOnly), null, ip);
    }
    assert.equal(checkAddress('1.1.1.1', 'h.example.com', policy, null), null);
    assert.equal(checkAddress('2606:4700::1111', 'h.example.com', policy, null), null);
    assert.equal(checkAddress('8.8.4.4', 'h.example.com', policy, null)?.rule, 'deny_cidr');
    assert.equal(checkAddress('8.8.4.4', 'h.example.com', policy, devOnly)?.rule, 'deny_cidr');
    assert.match(checkAddress('8.8.4.4', 'h.example.com', policy, null)!.reason, /8\.8\.4\.0\/24/);
  });
});

const pkt = (s: string | Buffer) => {
  const b = Buffer.isBuffer(s) ? s : Buffer.from(s);
  return Buffer.concat([Buffer.from((b.length + 4).toString(16).padStart(4, '0')), b]);
};
const Z = '0'.repeat(40);
const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const PACK = Buffer.from('PACK\x00\x00\x00\x02...');

describe('git push commands', () => {
  test('several refs with capabilities, shallow lines, then the pack', () => {
    const body = Buffer.concat([pkt(`shallow ${A}\n`), pkt(`${A} ${B} refs/heads/agent/x\0 report-status side-band-64k agent=git/2.39\n`), pkt(`${Z} ${B} refs/tags/v1\n`), pkt(`${A} ${Z} refs/heads/old\n`), Buffer.from('0000'), PACK]);
    const head = readPushHead(body);
    assert.equal(head.state, 'done');
    if (head.state !== 'done') return;
    assert.deepEqual(head.commands.map((c) => [c.ref, c.kind]), [['refs/heads/agent/x', 'update'], ['refs/tags/v1', 'create'], ['refs/heads/old', 'delete']]);
    assert.deepEqual(head.capabilities, ['report-status', 'side-band-64k', 'agent=git/2.39']);
    for (let cut = 0; cut < body.length - PACK.length; cut++) assert.equal(readPushHead(body.subarray(0, cut)).state, 'more', `cut at ${cut}`);
  });

  test('push options and a push certificate (its commands, not its signature)', () => {
    const body = Buffer.concat([
      pkt(`push-cert\0 report-status push-options\n`),
      pkt('certificate version 0.1\n'), pkt('pusher Agent <a@b> 1 +0000\n'), pkt('pushee https://x/r.git\n'), pkt('nonce 123\n'), pkt('\n'),
      pkt(`${A} ${B} refs/heads/agent/x\n`), pkt(`${A} ${Z} refs/heads/main\n`),
      pkt('-----BEGIN PGP SIGNATURE-----\n'), pkt('\n'), pkt(`${A} ${B} refs/heads/hidden\n`), pkt('-----END PGP SIGNATURE-----\n'), pkt('push-cert-end\n'),
      Buffer.from('0000'), pkt('ci.skip\n'), Buffer.from('0000'), PACK,
    ]);
    const head = readPushHead(body);
    assert.equal(head.state, 'done');
    if (head.state !== 'done') return;
    assert.deepEqual(head.commands.map((c) => c.ref), ['refs/heads/agent/x', 'refs/heads/main']);
    assert.equal(readPushHead(body.subarray(0, body.length - PACK.length - 6)).state, 'more', 'push options are read too');
  });

  test('what is not a push is refused', () => {
    assert.equal(readPushHead(Buffer.from('zzzz')).state, 'bad');
    assert.equal(readPushHead(Buffer.concat([pkt('hello\n'), Buffer.from('0000')])).state, 'bad');
    assert.equal(readPushHead(Buffer.from('0000')).state, 'bad');
    const endless = Buffer.concat(Array.from({ length: 20_000 }, (_, i) => pkt(`${A} ${B} refs/heads/agent/${i}\n`)));
    assert.equal(readPushHead(endless).state, 'bad', 'commands beyond the limit');
  });

  test('refs against the globs: branches by short glob, tags in full, deletions only with delete:', () => {
    const c = (ref: string, kind: 'create' | 'update' | 'delete' = 'update') => ({ old: A, new: B, ref, kind });
    const globs = ['agent/*', 'refs/tags/v*', 'delete:agent/*'];
    assert.equal(refusedCommand([c('refs/heads/agent/x'), c('refs/tags/v1', 'create'), c('refs/heads/agent/y', 'delete')], globs), null);
    assert.equal(refusedCommand([c('refs/heads/agent/x/y')], globs)?.ref, 'refs/heads/agent/x/y');
    assert.match(refusedCommand([c('refs/heads/agent/x'), c('refs/heads/main')], globs)!.reason, /pushing to refs\/heads\/main is not allowed/);
    assert.match(refusedCommand([c('refs/tags/v1', 'delete')], globs)!.reason, /deleting refs\/tags\/v1/);
    assert.match(refusedCommand([c('refs/heads/agent/x')], [])!.reason, /allows no push/);
  });

  test('a refusal in the git protocol: report-status in side band 1, the reason as progress', () => {
    const commands = [{ old: A, new: B, ref: 'refs/heads/main', kind: 'update' as const }];
    const body = refusePushBody(commands, ['report-status', 'side-band-64k'], { ref: 'refs/heads/main', reason: 'no' }).toString('latin1');
    assert.ok(body.includes('\x02gateway: no\n'), 'the reason in band 2');
    assert.ok(body.includes('\x010022unpack refused by the gateway\n001ang refs/heads/main no\n0000'), 'the report in band 1');
    assert.ok(body.endsWith('0000'));
    assert.match(refusePushBody(commands, ['report-status'], { ref: 'refs/heads/main', reason: 'no' }).toString(), /^[0-9a-f]{4}unpack refused/);
  });
});

describe('redaction', () => {
  test('a value is replaced in headers and in bodies, also across chunk boundaries', async () => {
    const secret = `s-${crypto.randomBytes(16).toString('hex')}`;
    assert.equal(redactText(`Bearer ${secret}!`, [secret]), 'Bearer [redacted by the gateway]!');
    const whole = Buffer.from(`a${secret}b${secret}${secret}c`);
    for (let size = 1; size <= whole.length; size += 3) {
      const chunks = [];
      for (let i = 0; i < whole.length; i += size) chunks.push(whole.subarray(i, i + size));
      const out = await text(Readable.from(chunks).pipe(redactStream([secret])));
      assert.equal(out, 'a[redacted by the gateway]b[redacted by the gateway][redacted by the gateway]c', `chunks of ${size}`);
    }
  });

  test('only an end that could begin a value is held back: an event ending in a blank line goes on whole, at once', () => {
    const secret = `sk-ch-${crypto.randomBytes(16).toString('hex')}`;
    const scrubber = createScrubber(scrubForms([`Bearer ${secret}`, secret]));
    const event = 'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n';
    assert.equal(scrubber.push(Buffer.from(event)).toString(), event);
    // A piece ending in what starts the value waits for the rest; the whole value is masked.
    assert.equal(scrubber.push(Buffer.from(`data: ${secret.slice(0, 10)}`)).toString(), 'data: ');
    assert.equal(scrubber.push(Buffer.from(`${secret.slice(10)}\n\n`)).toString(), '[redacted by the gateway]\n\n');
    // What waits when the body ends goes out then.
    assert.equal(scrubber.push(Buffer.from('x sk-')).toString(), 'x ');
    assert.equal(scrubber.end().toString(), 'sk-');
  });

  test('the encoded forms of a value are taken out too, wherever they sit in a longer encoded text and across chunk boundaries', async () => {
    const secret = `ghp_${crypto.randomBytes(18).toString('base64url')}`;
    const value = `Bearer ${secret}`;
    const forms = scrubForms([value, secret]);
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const encodings = [
      b64(value),
      b64(value).replace(/=+$/, ''),
      Buffer.from(value).toString('base64url'),
      b64(`a${value}`),
      b64(`ab${value}`),
      b64(`authorization: ${value}, and more`),
      Buffer.from(`{"auth":"${value}"}`).toString('base64url'),
      encodeURIComponent(value),
      encodeURIComponent(value).replace('%20', '+'),
      encodeURIComponent(value).replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()),
      Buffer.from(value).toString('hex'),
      Buffer.from(value).toString('hex').toUpperCase(),
      Buffer.from(`x${secret}`).toString('hex'),
    ];
    const body = encodings.map((e, i) => `${i}:${e}`).join('\n');
    const leaks = (out: string) =>
      out.split('\n').flatMap((line) => {
        const v = line.slice(line.indexOf(':') + 1);
        const decoded = [v, Buffer.from(v, 'base64').toString('latin1'), Buffer.from(v, 'base64url').toString('latin1'), Buffer.from(v, 'hex').toString('latin1'), Buffer.from(v.toLowerCase(), 'hex').toString('latin1')];
        try {
          decoded.push(decodeURIComponent(v.replace(/\+/g, ' ')));
        } catch {
          // a masked escape no longer decodes
        }
        // Eight characters of the secret in a row is more than the few edge bits an encoding can leave.
        return decoded.some((d) => d.includes(secret.slice(4, 12)) || d.includes(secret.slice(-8))) ? [line] : [];
      });
    assert.equal(leaks(body).length, encodings.length, 'every line holds the secret before scrubbing');
    assert.deepEqual(leaks(redactText(body, forms)), []);
    const whole = Buffer.from(body);
    for (const size of [1, 2, 5, 13, 64]) {
      const chunks = [];
      for (let i = 0; i < whole.length; i += size) chunks.push(whole.subarray(i, i + size));
      const out = await text(Readable.from(chunks).pipe(redactStream(forms)));
      assert.deepEqual(leaks(out), [], `chunks of ${size}`);
    }
    // An unrelated text is left as it is.
    const plain = 'Nothing secret here: aGVsbG8gd29ybGQ= 68656c6c6f hello%20world';
    assert.equal(redactText(plain, forms), plain);
  });

  test("a role's credential's forms are worked out once and kept for its next requests, each set of values its own", () => {
    const secret = `sk-${crypto.randomBytes(16).toString('hex')}`;
    const other = `sk-${crypto.randomBytes(16).toString('hex')}`;
    const first = scrubForms([`Bearer ${secret}`, secret]);
    // The next request's forms are the kept ones, and the same as worked out afresh.
    assert.equal(scrubForms([`Bearer ${secret}`, secret]), first);
    const fresh = scrubForms([`Bearer ${other}`, other]);
    assert.notEqual(fresh, first);
    assert.ok(fresh.includes(other) && !fresh.some((f) => f.includes(secret)));
    // Values that join the same way are still other values.
    assert.notDeepEqual(scrubForms([`${secret}\0${other}`]), scrubForms([secret, other]));
    // A caller cannot change what later requests get.
    assert.throws(() => (first as string[]).push('x'));
    // Past the most it keeps, the oldest are worked out again, the same.
    for (let i = 0; i < 300; i++) scrubForms([`sk-filler-${i}-${secret}`]);
    const again = scrubForms([`Bearer ${secret}`, secret]);
    assert.notEqual(again, first);
    assert.deepEqual(again, first);
    assert.equal(redactText(`a ${Buffer.from(secret).toString('base64')} b`, again), 'a [redacted by the gateway] b');
  });
});

describe('settings', () => {
  const load = (env: Record<string, string>) => loadConfig({ SERVICE_DATA_DIR: ':memory:', ...env });

  test('cleartext hosts: host:port pairs in normal form; anything else is refused naming the entry', () => {
    assert.deepEqual(load({}).gatewayCleartextHosts, []);
    assert.deepEqual(load({ SERVICE_GATEWAY_CLEARTEXT_HOSTS: 'Git.Test.:8080, 127.1:9000,[::1]:7000' }).gatewayCleartextHosts, ['git.test:8080', '127.0.0.1:9000', '[::1]:7000']);
    for (const bad of ['git.test', '*.test:80', 'git.test:0', 'git.test:99999', 'a b:80']) {
      assert.throws(() => load({ SERVICE_GATEWAY_CLEARTEXT_HOSTS: bad }), (err: Error) => err instanceof ConfigError && err.message.includes(`got "${bad}"`) && err.message.includes('host:port pairs'), bad);
    }
  });

  test('the connection cap: 256 by default, a whole number of at least 1', () => {
    assert.equal(load({}).gatewayMaxConnectionsPerSandbox, 256);
    assert.equal(load({ SERVICE_GATEWAY_MAX_CONNECTIONS_PER_SANDBOX: '32' }).gatewayMaxConnectionsPerSandbox, 32);
    for (const bad of ['0', '-1', 'many', '1.5']) assert.throws(() => load({ SERVICE_GATEWAY_MAX_CONNECTIONS_PER_SANDBOX: bad }), ConfigError, bad);
  });
});

describe('certificates', () => {
  test('a CA and leaves for names and addresses that verify', () => {
    const ca = mintCertificateAuthority('Test CA');
    const caCert = new crypto.X509Certificate(ca.certPem);
    assert.ok(caCert.ca);
    assert.ok(caCert.verify(caCert.publicKey));
    const issuer = issuerOf(ca);
    for (const host of ['api.example.com', '10.1.2.3', '2001:db8::1']) {
      const leaf = new crypto.X509Certificate(mintLeaf(issuer, host).certPem);
      assert.ok(leaf.verify(caCert.publicKey), host);
      assert.ok(leaf.checkIssued(caCert));
      assert.ok(!leaf.ca);
      assert.ok(host.includes('.') && !/^\d/.test(host) ? leaf.checkHost(host) : leaf.checkIP(host), host);
      assert.equal(leaf.checkHost('other.example.com'), undefined);
    }
  });
});
