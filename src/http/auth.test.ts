import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { hashToken, newSecret } from '../auth/credentials.ts';
import { testApp, uniq, type TestApp } from '../../test/harness.ts';

function assert401(res: { status: number; headers: Record<string, unknown>; body: any }) {
  assert.equal(res.status, 401);
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
  assert.match(String(res.headers['www-authenticate']), /^Bearer realm="crewhouse"/);
  assert.equal(res.body.status, 401);
}

describe('bearer tokens and roles', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  async function tokenFor(userId: number, opts: { expiresAt?: Date | null; revoked?: boolean } = {}) {
    const token = newSecret('chk_');
    await t.db
      .insertInto('api_tokens')
      .values({ user_id: userId, name: 'test', kind: 'api', prefix: token.slice(0, 8), token_hash: hashToken(token), expires_at: opts.expiresAt ?? null, ...(opts.revoked ? { revoked_at: new Date() } : {}) })
      .execute();
    return token;
  }

  test('a valid token answers GET /me with the user and "token"', async () => {
    const u = await t.user('operator');
    const res = await t.request({ method: 'GET', url: '/api/v1/me', token: u.token });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { id: u.id, name: u.name, email: null, role: 'operator', via: 'token' });
  });

  test('tokens are stored only as hashes', async () => {
    const u = await t.user('viewer');
    const rows = await t.db.selectFrom('api_tokens').selectAll().where('user_id', '=', u.id).execute();
    assert.equal(rows.length, 1);
    assert.equal(rows[0].token_hash, hashToken(u.token));
    assert.ok(!JSON.stringify(rows).includes(u.token));
  });

  test('missing credentials: 401 problem with WWW-Authenticate', async () => {
    assert401(await t.request({ method: 'GET', url: '/api/v1/me' }));
    assert401(await t.request({ method: 'GET', url: '/api/v1/users' }));
    assert401(await t.request({ method: 'POST', url: '/api/v1/users', body: { name: uniq(), role: 'viewer' } }));
  });

  test('a malformed Authorization header: 401', async () => {
    for (const authorization of ['Basic YWRtaW46YWRtaW4=', 'Bearer', 'Bearer ', `Bearer ${t.adminToken} extra`, 'bearer', 'Bearer short', `Bearer ${'x'.repeat(600)}`, `Token ${t.adminToken}`]) {
      assert401(await t.request({ method: 'GET', url: '/api/v1/me', headers: { authorization } }));
    }
  });

  test('the scheme is matched without case (RFC 9110), and a malformed token is named as such', async () => {
    for (const scheme of ['bearer', 'BEARER', 'Bearer']) {
      const res = await t.request({ method: 'GET', url: '/api/v1/me', headers: { authorization: `${scheme} ${t.adminToken}` } });
      assert.equal(res.status, 200, `${scheme}: ${res.text}`);
    }
    const short = await t.request({ method: 'GET', url: '/api/v1/me', headers: { authorization: 'Bearer short' } });
    assert401(short);
    assert.match(short.body.detail, /the bearer token is malformed/);
  });

  test('on /webhooks/*, an Authorization header that is not Bearer is left to the route (a chat server sends "Token <command token>")', async () => {
    const res = await t.request({ method: 'POST', url: '/webhooks/tracker_a', headers: { authorization: 'Token abcdefgh12345678', 'content-type': 'application/json' }, raw: '{}' });
    assert.equal(res.status, 409, res.text);
    assert.match(res.body.detail, /tracker_a integration is not enabled/);
    // A Bearer token there is still ours to check, and the API still refuses any other scheme.
    assert401(await t.request({ method: 'POST', url: '/webhooks/tracker_a', headers: { authorization: 'Bearer not-a-known-token-000', 'content-type': 'application/json' }, raw: '{}' }));
    assert401(await t.request({ method: 'GET', url: '/api/v1/me', headers: { authorization: 'Token abcdefgh12345678' } }));
  });

  test('an unknown token: 401', async () => {
    assert401(await t.request({ method: 'GET', url: '/api/v1/me', token: newSecret('chk_') }));
  });

  test('a revoked token: 401', async () => {
    const u = await t.user('viewer');
    const token = await tokenFor(u.id, { revoked: true });
    assert401(await t.request({ method: 'GET', url: '/api/v1/me', token }));
  });

  test('an expired token: 401; one not yet expired works', async () => {
    const u = await t.user('viewer');
    const expired = await tokenFor(u.id, { expiresAt: new Date(Date.now() - 1000) });
    assert401(await t.request({ method: 'GET', url: '/api/v1/me', token: expired }));
    const live = await tokenFor(u.id, { expiresAt: new Date(Date.now() + 60_000) });
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/me', token: live })).status, 200);
  });

  test("a disabled user's token: 401, even if the token itself was not revoked", async () => {
    const u = await t.user('admin');
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/me', token: u.token })).status, 200);
    await t.db.updateTable('users').set({ disabled: true }).where('id', '=', u.id).execute();
    const res = await t.request({ method: 'GET', url: '/api/v1/me', token: u.token });
    assert401(res);
    assert.match(res.body.detail, /disabled/);
  });

  test('disabling a user through the API revokes every token of theirs', async () => {
    const u = await t.user('operator');
    const second = await tokenFor(u.id);
    const url = `/api/v1/users/${u.id}`;
    const etag = String((await t.request({ method: 'GET', url, token: t.adminToken })).headers.etag);
    assert.equal((await t.request({ method: 'PATCH', url, token: t.adminToken, body: { disabled: true }, headers: { 'if-match': etag } })).status, 200);
    const live = await t.db.selectFrom('api_tokens').select('id').where('user_id', '=', u.id).where('revoked_at', 'is', null).execute();
    assert.equal(live.length, 0);
    assert401(await t.request({ method: 'GET', url: '/api/v1/me', token: second }));
    // Enabling again does not bring the old tokens back.
    const etag2 = String((await t.request({ method: 'GET', url, token: t.adminToken })).headers.etag);
    assert.equal((await t.request({ method: 'PATCH', url, token: t.adminToken, body: { disabled: false }, headers: { 'if-match': etag2 } })).status, 200);
    assert401(await t.request({ method: 'GET', url: '/api/v1/me', token: u.token }));
  });

  test('roles: a role below the route answers 403, never 401; the role itself is enough', async () => {
    const viewer = await t.user('viewer');
    const operator = await t.user('operator');
    const admin = await t.user('admin');
    for (const u of [viewer, operator]) {
      const list = await t.request({ method: 'GET', url: '/api/v1/users', token: u.token });
      assert.equal(list.status, 403);
      assert.match(String(list.headers['content-type']), /^application\/problem\+json/);
      assert.match(list.body.detail, /admin/);
      assert.equal((await t.request({ method: 'POST', url: '/api/v1/users', token: u.token, body: { name: uniq(), role: 'viewer' } })).status, 403);
      assert.equal((await t.request({ method: 'POST', url: `/api/v1/users/${u.id}/setup-token`, token: u.token })).status, 403);
      assert.equal((await t.request({ method: 'PATCH', url: `/api/v1/users/${u.id}`, token: u.token, body: { role: 'admin' }, headers: { 'if-match': '"1"' } })).status, 403);
    }
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/users', token: admin.token })).status, 200);
    // Read-only routes are open to every role.
    for (const u of [viewer, operator, admin]) {
      for (const url of ['/api/v1/me', '/api/v1/session', '/api/v1/onboarding', '/api/v1/openapi.json', `/api/v1/users/${u.id}`]) {
        assert.equal((await t.request({ method: 'GET', url, token: u.token })).status, 200, `${url} as ${u.name}`);
      }
    }
  });

  test('a forbidden write changes nothing', async () => {
    const operator = await t.user('operator');
    const name = uniq('nope');
    await t.request({ method: 'POST', url: '/api/v1/users', token: operator.token, body: { name, role: 'admin' } });
    assert.equal(await t.db.selectFrom('users').select('id').where('name', '=', name).executeTakeFirst(), undefined);
  });

  test('the CSRF header is refused with a token', async () => {
    const res = await t.request({ method: 'GET', url: '/api/v1/me', token: t.adminToken, headers: { 'x-console-csrf': 'anything' } });
    assert.equal(res.status, 400);
    assert.equal(res.body.errors[0].field, 'x-console-csrf');
  });

  test('a token wins over a stale cookie, and a bad cookie alone is a 401', async () => {
    const withCookie = await t.request({ method: 'GET', url: '/api/v1/me', token: t.adminToken, headers: { cookie: 'crewhouse_session=chs_gone' } });
    assert.equal(withCookie.status, 200);
    assert401(await t.request({ method: 'GET', url: '/api/v1/me', headers: { cookie: 'crewhouse_session=chs_gone' } }));
  });
});
