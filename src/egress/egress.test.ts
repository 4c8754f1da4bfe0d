import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BUILTIN_DESTINATIONS } from './builtins.ts';
import { GATEWAY_KEYS, isGatewayKey, parseInjectSecret } from './gateway-keys.ts';
import { cidrContains, classifyAddress, parseCidr, parseHost } from './hosts.ts';
import { effectiveEgressPolicy, type PolicyDestination } from './policy.ts';
import { checkEgress, normalizeEgress } from './setting.ts';

describe('host classification', () => {
  const kindOf = (h: string) => {
    const p = parseHost(h);
    assert.ok(p.ok, `${h} should parse`);
    return p.kind;
  };

  test('loopback in every spelling', () => {
    for (const h of ['127.0.0.1', '127.1', '0x7f.0.0.1', '0x7f000001', '2130706433', '017700000001', '0177.0.0.1', '127.0.0.1.', '127.255.255.254',
      '[::1]', '::1', '0:0:0:0:0:0:0:1', '[::ffff:127.0.0.1]', '::ffff:7f00:1', '[::ffff:7f00:1]:80', '::127.0.0.1', '2002:7f00:1::',
      'localhost', 'LOCALHOST', 'localhost.', 'api.localhost', 'a.b.localhost..', '*.localhost', 'localhost:8080']) {
      assert.equal(kindOf(h), 'loopback', h);
    }
  });

  test('private, link-local, CGNAT, unique-local and unspecified ranges', () => {
    const cases: Array<[string, string]> = [
      ['10.0.0.1', 'private'], ['10.255.255.255', 'private'], ['172.16.0.1', 'private'], ['172.31.255.255', 'private'], ['192.168.1.1', 'private'],
      ['0xa.1', 'private'], ['167772161', 'private'], ['[::ffff:10.0.0.1]', 'private'], ['64:ff9b::192.168.0.1', 'private'],
      ['169.254.169.254', 'link_local'], ['[fe80::1]', 'link_local'], ['febf::1', 'link_local'], ['[::ffff:169.254.169.254]', 'link_local'],
      ['100.64.0.1', 'cgnat'], ['100.127.255.255', 'cgnat'],
      ['fc00::1', 'unique_local'], ['fd12:3456::1', 'unique_local'],
      ['0.0.0.0', 'unspecified'], ['0', 'unspecified'], ['::', 'unspecified'], ['[::]:80', 'unspecified'],
      ['224.0.0.1', 'reserved'], ['255.255.255.255', 'reserved'], ['ff02::1', 'reserved'],
      ['db', 'private'], ['printer.local', 'private'], ['metadata.google.internal.', 'private'], ['nas.home.arpa', 'private'],
    ];
    for (const [h, kind] of cases) assert.equal(kindOf(h), kind, h);
  });

  test('public hosts and the edges of each range', () => {
    for (const h of ['8.8.8.8', '172.15.255.255', '172.32.0.0', '100.63.255.255', '100.128.0.0', '11.0.0.0', '169.253.255.255', '192.169.0.1',
      'api.github.com', 'API.GitHub.com.', '*.github.com', 'example.com:443', '[2606:4700::1111]', '2606:4700::1111', 'fe00::1', 'fbff::1',
      'localhost.example.com', 'bücher.example']) {
      assert.equal(kindOf(h), 'public', h);
    }
  });

  test('normal forms', () => {
    assert.deepEqual(parseHost('API.GitHub.com.'), { ok: true, host: 'api.github.com', port: null, wildcard: false, ip: null, kind: 'public' });
    assert.deepEqual(parseHost('0x7f.1:8080'), { ok: true, host: '127.0.0.1', port: 8080, wildcard: false, ip: 4, kind: 'loopback' });
    assert.deepEqual(parseHost('[0:0::FFFF:127.0.0.1]'), { ok: true, host: '::ffff:7f00:1', port: null, wildcard: false, ip: 6, kind: 'loopback' });
    assert.equal((parseHost('*.Example.COM') as { host: string }).host, '*.example.com');
    assert.equal((parseHost('bücher.example') as { host: string }).host, 'xn--bcher-kva.example');
  });

  test('what is not a host is refused with a reason', () => {
    for (const h of ['', ' ', '1.2.3.4.5', '256.0.0.1', 'a..b', '-a.com', 'a-.com', '*.*.x', 'a.*.com', '*.127.0.0.1', '*.', 'a@b.com', 'a/b', 'a?b', 'ex ample.com',
      'example.com:0', 'example.com:65536', '[::1', '[zz::1]', ':::1', 'http://x.com', 'x'.repeat(64) + '.com', 'a.'.repeat(130) + 'com']) {
      const p = parseHost(h);
      assert.equal(p.ok, false, JSON.stringify(h));
      if (!p.ok) assert.ok(p.reason.length > 0);
    }
  });

  test('resolved addresses and CIDRs (for the gateway)', () => {
    assert.equal(classifyAddress('127.0.0.1'), 'loopback');
    assert.equal(classifyAddress('::ffff:a00:1'), 'private');
    assert.equal(classifyAddress('1.1.1.1'), 'public');
    assert.equal(classifyAddress('not an ip'), null);
    assert.equal(parseCidr('10.1.2.3/8')?.cidr, '10.0.0.0/8');
    assert.equal(parseCidr('FD12::1/8')?.cidr, 'fd00::/8');
    assert.equal(parseCidr('1.2.3.4')?.cidr, '1.2.3.4/32');
    assert.equal(parseCidr('::1')?.cidr, '::1/128');
    for (const bad of ['1.2.3.4/33', '::/129', 'nope', '10.0.0.0/8/8', '']) assert.equal(parseCidr(bad), null, bad);
    assert.ok(cidrContains('10.0.0.0/8', '10.9.9.9'));
    assert.ok(cidrContains('10.0.0.0/8', '::ffff:10.0.0.1'));
    assert.ok(cidrContains('fc00::/7', 'fd00::1'));
    assert.ok(!cidrContains('10.0.0.0/8', '11.0.0.1'));
    assert.ok(!cidrContains('fc00::/7', 'fe00::1'));
  });
});

describe('gateway keys', () => {
  test('a fixed list; inject_secret values parse into gateway, mcp and secret references', () => {
    assert.ok(GATEWAY_KEYS.length >= 2);
    assert.ok(isGatewayKey('code_host_installation_token') && isGatewayKey('model_proxy_key'));
    assert.ok(!isGatewayKey('something_else'));
    assert.deepEqual(parseInjectSecret('model_proxy_key'), { kind: 'gateway', name: 'model_proxy_key' });
    assert.deepEqual(parseInjectSecret('mcp:linear'), { kind: 'mcp', name: 'linear' });
    assert.deepEqual(parseInjectSecret('secret:integrations/code_host/key'), { kind: 'secret', name: 'integrations/code_host/key' });
    for (const bad of ['secret:', 'mcp:', 'other:x', 'plain']) assert.deepEqual(parseInjectSecret(bad), { kind: 'invalid' });
  });
});

describe('effective egress policy', () => {
  const dest = (name: string, extra: Partial<PolicyDestination> = {}): PolicyDestination => ({
    name, host: `${name}.example.com`, methods: ['GET'], paths: ['/'], header_allowlist: [], inject_secret: null, git_push_ref_globs: [],
    what: name, builtin: false, github_scope: null, dev_only: false, policy_name: null, ...extra,
  });
  const rows = [dest('github'), dest('pypi'), dest('local-llm', { host: '127.0.0.1:11434', dev_only: true }), dest('npm')];
  const names = (p: ReturnType<typeof effectiveEgressPolicy>) => p.destinations.map((d) => d.name);

  test('the built-ins llm, mcp, otel are always in, first, in every mode, even when the role names none', () => {
    for (const egress of [null, { mode: 'allow_all' as const }, { mode: 'allowlist' as const, destinations: [] }, { mode: 'allowlist' as const, destinations: ['github'] }]) {
      const p = effectiveEgressPolicy({ egress, destinations: rows, devDestinations: false });
      assert.deepEqual(names(p).slice(0, 3), ['llm', 'mcp', 'otel']);
      assert.ok(p.destinations.slice(0, 3).every((d) => d.builtin));
    }
  });

  test('no egress means allow-all (the version default)', () => {
    const p = effectiveEgressPolicy({ egress: null, destinations: rows, devDestinations: false });
    assert.equal(p.mode, 'allow_all');
    assert.deepEqual(names(p), ['llm', 'mcp', 'otel']);
    assert.deepEqual(p.upstream_deny_cidrs, []);
  });

  test('allowlist: exactly the built-ins and the named destinations, in order, each once', () => {
    const p = effectiveEgressPolicy({ egress: { mode: 'allowlist', destinations: ['npm', 'github', 'npm', 'llm'] }, destinations: rows, devDestinations: false });
    assert.equal(p.mode, 'allowlist');
    assert.deepEqual(names(p), ['llm', 'mcp', 'otel', 'npm', 'github']);
    assert.equal(p.destinations[3].host, 'npm.example.com');
  });

  test('allow_all keeps the named destinations for their rules and credentials', () => {
    const p = effectiveEgressPolicy({ egress: { mode: 'allow_all', destinations: ['pypi'] }, destinations: rows, devDestinations: false });
    assert.equal(p.mode, 'allow_all');
    assert.deepEqual(names(p), ['llm', 'mcp', 'otel', 'pypi']);
  });

  test('dev-only destinations are dropped unless SERVICE_EGRESS_DEV_DESTINATIONS is on', () => {
    const egress = { mode: 'allowlist' as const, destinations: ['local-llm', 'github'] };
    const off = effectiveEgressPolicy({ egress, destinations: rows, devDestinations: false });
    assert.deepEqual(names(off), ['llm', 'mcp', 'otel', 'github']);
    assert.deepEqual(off.dropped, [{ name: 'local-llm', reason: 'dev_only' }]);
    const on = effectiveEgressPolicy({ egress, destinations: rows, devDestinations: true });
    assert.deepEqual(names(on), ['llm', 'mcp', 'otel', 'local-llm', 'github']);
    assert.deepEqual(on.dropped, []);
  });

  test('unknown names are dropped and reported; stored rows cannot replace a built-in', () => {
    const fake = dest('llm', { host: 'evil.example.com' });
    const p = effectiveEgressPolicy({ egress: { mode: 'allowlist', destinations: ['gone', 'github'] }, destinations: [...rows, fake], devDestinations: false });
    assert.deepEqual(names(p), ['llm', 'mcp', 'otel', 'github']);
    assert.equal(p.destinations[0].host, null);
    assert.deepEqual(p.dropped, [{ name: 'gone', reason: 'unknown' }]);
  });

  test('a team role override is just another egress: the caller passes it instead of the version\'s', () => {
    const version = { mode: 'allow_all' as const, destinations: ['pypi'] };
    const override = { mode: 'allowlist' as const, destinations: ['github'], upstream_deny_cidrs: ['203.0.113.0/24'] };
    assert.deepEqual(names(effectiveEgressPolicy({ egress: version, destinations: rows, devDestinations: false })), ['llm', 'mcp', 'otel', 'pypi']);
    const p = effectiveEgressPolicy({ egress: override, destinations: rows, devDestinations: false });
    assert.equal(p.mode, 'allowlist');
    assert.deepEqual(names(p), ['llm', 'mcp', 'otel', 'github']);
    assert.deepEqual(p.upstream_deny_cidrs, ['203.0.113.0/24']);
  });

  test('upstream_deny_cidrs are normalized and deduplicated; internal ranges are always denied', () => {
    const p = effectiveEgressPolicy({ egress: { mode: 'allow_all', upstream_deny_cidrs: ['1.2.3.4/16', '1.2.0.0/16', 'FD00::1/8', 'junk'] }, destinations: rows, devDestinations: false });
    assert.deepEqual(p.upstream_deny_cidrs, ['1.2.0.0/16', 'fd00::/8']);
    for (const c of ['127.0.0.0/8', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10', '::1/128', 'fe80::/10', 'fc00::/7']) {
      assert.ok(p.internal_deny_cidrs.includes(c), c);
    }
    assert.deepEqual(checkEgress({ upstream_deny_cidrs: ['10.0.0.0/8', 'junk'] }), [{ field: 'egress.upstream_deny_cidrs.1', message: '"junk" is not an IPv4 or IPv6 CIDR' }]);
  });

  test('one normal form and one check of an egress setting, for every module that stores one', () => {
    assert.deepEqual(normalizeEgress(null), { mode: 'allow_all', destinations: [], upstream_deny_cidrs: [], report_only: false });
    assert.deepEqual(normalizeEgress({ mode: 'allowlist', destinations: ['npm', 'github', 'npm'] }), { mode: 'allowlist', destinations: ['npm', 'github'], upstream_deny_cidrs: [], report_only: false });
    const n = normalizeEgress({ mode: 'allow_all', upstream_deny_cidrs: ['10.1.2.3/8', '10.0.0.0/8', 'FD00::1/8', '10.0.0.0/33', '10.0.0.1'] });
    assert.deepEqual(n.upstream_deny_cidrs, ['10.0.0.0/8', 'fd00::/8', '10.0.0.0/33', '10.0.0.1']);
    // A range needs its prefix length; a bad prefix or a bare address is named by its place in the normal form.
    assert.deepEqual(checkEgress(n, '').map((p) => p.field), ['upstream_deny_cidrs.2', 'upstream_deny_cidrs.3']);
    assert.deepEqual(checkEgress(normalizeEgress({ mode: 'allow_all', upstream_deny_cidrs: ['::/0', '0.0.0.0/0'] })), []);
  });

  test('the policy does not share arrays with the built-in definitions', () => {
    const p = effectiveEgressPolicy({ egress: null, destinations: [], devDestinations: false });
    p.destinations[0].methods.push('POST');
    assert.deepEqual(BUILTIN_DESTINATIONS[0].methods, []);
  });
});
