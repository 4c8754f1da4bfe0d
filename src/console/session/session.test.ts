import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';

const PASSWORD = 'correct horse battery staple';

interface Browser {
  id: number;
  name: string;
  cookie: string;
  csrf: string;
  setCookie: string;
}

/** A person: an admin creates the account, the person sets a password with the setup token. */
async function person(t: TestApp, role: 'viewer' | 'operator' | 'admin', password = PASSWORD): Promise<Browser> {
  const name = uniq(role);
  const created = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name, role } });
  assert.equal(created.status, 201);
  const setup = await t.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: created.body.setup_token, password } });
  assert.equal(setup.status, 201);
  const setCookie = String(setup.headers['set-cookie']);
  return { id: created.body.id, name, cookie: setCookie.split(';')[0], csrf: setup.body.csrf_token, setCookie };
}

describe('browser sessions', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  test('setup: a setup token sets the password and opens a session with an HttpOnly cookie', async () => {
    const created = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: uniq('new'), role: 'operator' } });
    const short = await t.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: created.body.setup_token, password: 'short' } });
    assert.equal(short.status, 400);
    assert.equal(short.body.errors[0].field, 'password');
    const unknown = await t.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: 'chu_not-a-token', password: PASSWORD } });
    assert.equal(unknown.status, 422);
    assert.equal(unknown.body.errors[0].field, 'token');

    const res = await t.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: created.body.setup_token, password: PASSWORD } });
    assert.equal(res.status, 201);
    const cookie = String(res.headers['set-cookie']);
    assert.match(cookie, /^crewhouse_session=chs_[A-Za-z0-9_-]+; /);
    assert.match(cookie, /; HttpOnly/);
    assert.match(cookie, /; SameSite=Strict/);
    assert.match(cookie, /; Path=\//);
    assert.doesNotMatch(cookie, /Secure/, 'plain http base URL: no Secure flag');
    assert.equal(res.body.via, 'session');
    assert.equal(res.body.user.id, created.body.id);
    assert.equal(typeof res.body.csrf_token, 'string');
    assert.ok(!JSON.stringify(res.body).includes(cookie.split(';')[0].split('=')[1]), 'the session token is only in the cookie');
    // The account now has a password, and the token is spent.
    const read = await t.request({ method: 'GET', url: `/api/v1/users/${created.body.id}`, token: t.adminToken });
    assert.equal(read.body.password_set, true);
    const again = await t.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: created.body.setup_token, password: PASSWORD } });
    assert.equal(again.status, 422);
  });

  test('log in by name (any case) or email; a wrong password or unknown name is a 401', async () => {
    const p = await person(t, 'viewer');
    const login = await t.request({ method: 'POST', url: '/api/v1/session', body: { name: p.name.toUpperCase(), password: PASSWORD } });
    assert.equal(login.status, 201);
    assert.equal(login.headers.location, '/api/v1/session');
    assert.match(String(login.headers['set-cookie']), /HttpOnly/);
    assert.equal(login.body.user.name, p.name);
    const wrong = await t.request({ method: 'POST', url: '/api/v1/session', body: { name: p.name, password: 'not the password' } });
    assert.equal(wrong.status, 401);
    const nobody = await t.request({ method: 'POST', url: '/api/v1/session', body: { name: uniq('nobody'), password: PASSWORD } });
    assert.equal(nobody.status, 401);
    assert.equal(wrong.body.detail, nobody.body.detail, 'no hint which accounts exist');
    // An account that never set a password cannot log in.
    const fresh = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: uniq('fresh'), email: `${uniq('f')}@example.com`, role: 'viewer' } });
    assert.equal((await t.request({ method: 'POST', url: '/api/v1/session', body: { name: fresh.body.email, password: '' } })).status, 400);
    assert.equal((await t.request({ method: 'POST', url: '/api/v1/session', body: { name: fresh.body.email, password: PASSWORD } })).status, 401);
  });

  test('GET /me and GET /session with a session', async () => {
    const p = await person(t, 'operator');
    const me = await t.request({ method: 'GET', url: '/api/v1/me', headers: { cookie: p.cookie } });
    assert.equal(me.status, 200);
    assert.deepEqual(me.body, { id: p.id, name: p.name, email: null, role: 'operator', via: 'session' });
    const session = await t.request({ method: 'GET', url: '/api/v1/session', headers: { cookie: p.cookie } });
    assert.equal(session.status, 200);
    assert.equal(session.body.csrf_token, p.csrf);
    assert.equal(session.body.via, 'session');
    assert.equal(session.body.user.id, p.id);
    const withToken = await t.request({ method: 'GET', url: '/api/v1/session', token: t.adminToken });
    assert.equal(withToken.body.via, 'token');
    assert.equal(withToken.body.csrf_token, null);
  });

  test('unsafe requests of a session need the CSRF token in X-Console-CSRF', async () => {
    const p = await person(t, 'admin');
    const body = { name: uniq('csrf'), role: 'viewer' };
    const none = await t.request({ method: 'POST', url: '/api/v1/users', headers: { cookie: p.cookie }, body });
    assert.equal(none.status, 403);
    assert.match(none.body.detail, /X-Console-CSRF/i);
    const wrong = await t.request({ method: 'POST', url: '/api/v1/users', headers: { cookie: p.cookie, 'x-console-csrf': p.csrf.slice(0, -1) + (p.csrf.endsWith('x') ? 'y' : 'x') }, body });
    assert.equal(wrong.status, 403);
    // Another session's CSRF token does not fit this one.
    const other = await person(t, 'admin');
    assert.equal((await t.request({ method: 'POST', url: '/api/v1/users', headers: { cookie: p.cookie, 'x-console-csrf': other.csrf }, body })).status, 403);
    assert.equal(await t.db.selectFrom('users').select('id').where('name', '=', body.name).executeTakeFirst(), undefined);
    const ok = await t.request({ method: 'POST', url: '/api/v1/users', headers: { cookie: p.cookie, 'x-console-csrf': p.csrf }, body });
    assert.equal(ok.status, 201);
    // Safe requests need none.
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/users', headers: { cookie: p.cookie } })).status, 200);
    // The audit log records the session as the way in.
    const audit = await t.db.selectFrom('audit_log').selectAll().where('action', '=', 'user.create').where('target', '=', String(ok.body.id)).executeTakeFirstOrThrow();
    assert.equal(audit.via, 'session');
    assert.equal(audit.actor_user_id, p.id);
  });

  test('roles hold for sessions too', async () => {
    const p = await person(t, 'viewer');
    const res = await t.request({ method: 'POST', url: '/api/v1/users', headers: { cookie: p.cookie, 'x-console-csrf': p.csrf }, body: { name: uniq(), role: 'viewer' } });
    assert.equal(res.status, 403);
  });

  test('session-only routes refuse a token', async () => {
    const u = await t.user('admin');
    const routes: Array<[string, string, unknown]> = [
      ['POST', '/api/v1/session', { name: u.name, password: PASSWORD }],
      ['POST', '/api/v1/session/setup', { token: 'chu_x', password: PASSWORD }],
      ['DELETE', '/api/v1/session', undefined],
      ['GET', '/api/v1/session/tokens', undefined],
      ['POST', '/api/v1/session/tokens', { name: 'mine' }],
      ['DELETE', '/api/v1/session/tokens/1', undefined],
      ['POST', '/api/v1/session/onboarding-token', undefined],
    ];
    for (const [method, url, body] of routes) {
      const res = await t.request({ method, url, token: u.token, body });
      assert.equal(res.status, 403, `${method} ${url}`);
      assert.match(res.body.detail, /browser session/);
    }
    assert.equal(await t.db.selectFrom('api_tokens').select('id').where('user_id', '=', u.id).where('name', '=', 'mine').executeTakeFirst(), undefined);
  });

  test('own tokens: create (value once), list (never the value, paginated), revoke', async () => {
    const p = await person(t, 'operator');
    const h = { cookie: p.cookie, 'x-console-csrf': p.csrf };
    const made = [];
    for (const name of ['one', 'two', 'three']) {
      const res = await t.request({ method: 'POST', url: '/api/v1/session/tokens', headers: h, body: { name, expires_in_days: name === 'three' ? 30 : null } });
      assert.equal(res.status, 201);
      assert.equal(res.headers.location, `/api/v1/session/tokens/${res.body.id}`);
      assert.match(res.body.token, /^chk_/);
      assert.equal(res.body.prefix, res.body.token.slice(0, 8));
      made.push(res.body);
    }
    assert.ok(Math.abs(Date.parse(made[2].expires_at) - Date.now() - 30 * 86400_000) < 60_000);
    // The token works as a bearer token with the account's role.
    const me = await t.request({ method: 'GET', url: '/api/v1/me', token: made[0].token });
    assert.deepEqual([me.body.id, me.body.role, me.body.via], [p.id, 'operator', 'token']);

    const page1 = await t.request({ method: 'GET', url: '/api/v1/session/tokens?limit=2', headers: { cookie: p.cookie } });
    assert.equal(page1.status, 200);
    assert.deepEqual(page1.body.items.map((i: { name: string }) => i.name), ['three', 'two']);
    assert.equal(typeof page1.body.next_cursor, 'string');
    const page2 = await t.request({ method: 'GET', url: `/api/v1/session/tokens?limit=2&cursor=${page1.body.next_cursor}`, headers: { cookie: p.cookie } });
    assert.deepEqual(page2.body.items.map((i: { name: string }) => i.name), ['one']);
    assert.equal(page2.body.next_cursor, null);
    for (const item of [...page1.body.items, ...page2.body.items]) assert.equal(item.token, undefined);
    assert.ok(!JSON.stringify([page1.body, page2.body]).includes(made[0].token));
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/session/tokens?cursor=bogus', headers: { cookie: p.cookie } })).status, 400);

    // Revoking needs the CSRF token, works once, and only on one's own tokens.
    assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/session/tokens/${made[0].id}`, headers: { cookie: p.cookie } })).status, 403);
    assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/session/tokens/${made[0].id}`, headers: h })).status, 204);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/me', token: made[0].token })).status, 401);
    assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/session/tokens/${made[0].id}`, headers: h })).status, 404);
    const other = await person(t, 'admin');
    const theirs = await t.request({ method: 'POST', url: '/api/v1/session/tokens', headers: { cookie: other.cookie, 'x-console-csrf': other.csrf }, body: { name: 'theirs' } });
    assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/session/tokens/${theirs.body.id}`, headers: h })).status, 404);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/me', token: theirs.body.token })).status, 200);
    const listed = await t.request({ method: 'GET', url: '/api/v1/session/tokens', headers: { cookie: p.cookie } });
    assert.deepEqual(listed.body.items.map((i: { name: string }) => i.name), ['three', 'two']);
    // Writes are audited without the token value.
    const audit = await t.db.selectFrom('audit_log').selectAll().where('actor_user_id', '=', p.id).where('action', 'in', ['token.create', 'token.revoke']).execute();
    assert.equal(audit.length, 4);
    assert.ok(!JSON.stringify(audit).includes(made[0].token));
  });

  test('log out ends the session and clears the cookie; it needs the CSRF token', async () => {
    const p = await person(t, 'viewer');
    assert.equal((await t.request({ method: 'DELETE', url: '/api/v1/session', headers: { cookie: p.cookie } })).status, 403);
    const out = await t.request({ method: 'DELETE', url: '/api/v1/session', headers: { cookie: p.cookie, 'x-console-csrf': p.csrf } });
    assert.equal(out.status, 204);
    assert.match(String(out.headers['set-cookie']), /^crewhouse_session=; .*Max-Age=0/);
    const after = await t.request({ method: 'GET', url: '/api/v1/me', headers: { cookie: p.cookie } });
    assert.equal(after.status, 401);
    assert.match(String(after.headers['www-authenticate']), /Bearer/);
    // Logging in again opens a new session.
    const again = await t.request({ method: 'POST', url: '/api/v1/session', body: { name: p.name, password: PASSWORD } });
    assert.equal(again.status, 201);
    const cookie = String(again.headers['set-cookie']).split(';')[0];
    assert.notEqual(cookie, p.cookie);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/me', headers: { cookie } })).status, 200);
  });

  test('disabling a user ends their sessions', async () => {
    const p = await person(t, 'operator');
    const url = `/api/v1/users/${p.id}`;
    const etag = String((await t.request({ method: 'GET', url, token: t.adminToken })).headers.etag);
    assert.equal((await t.request({ method: 'PATCH', url, token: t.adminToken, body: { disabled: true }, headers: { 'if-match': etag } })).status, 200);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/me', headers: { cookie: p.cookie } })).status, 401);
    assert.equal((await t.request({ method: 'POST', url: '/api/v1/session', body: { name: p.name, password: PASSWORD } })).status, 401);
  });

  test('an expired session is a 401', async () => {
    const p = await person(t, 'viewer');
    await t.db.updateTable('sessions').set({ expires_at: new Date(Date.now() - 1000) }).where('user_id', '=', p.id).execute();
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/me', headers: { cookie: p.cookie } })).status, 401);
  });

  test('log-in throttling: after 10 failures the account answers 429 with Retry-After, even for the right password', async () => {
    const p = await person(t, 'viewer');
    const other = await person(t, 'viewer');
    for (let i = 0; i < 10; i++) {
      assert.equal((await t.request({ method: 'POST', url: '/api/v1/session', body: { name: p.name, password: `wrong-${i}` } })).status, 401);
    }
    const blocked = await t.request({ method: 'POST', url: '/api/v1/session', body: { name: p.name, password: PASSWORD } });
    assert.equal(blocked.status, 429);
    assert.match(String(blocked.headers['content-type']), /^application\/problem\+json/);
    assert.ok(Number(blocked.headers['retry-after']) > 0);
    // The name is matched regardless of case; other accounts are not affected.
    assert.equal((await t.request({ method: 'POST', url: '/api/v1/session', body: { name: p.name.toUpperCase(), password: PASSWORD } })).status, 429);
    assert.equal((await t.request({ method: 'POST', url: '/api/v1/session', body: { name: other.name, password: PASSWORD } })).status, 201);
  });

  test('log-in throttling holds for parallel guesses', async () => {
    const p = await person(t, 'viewer');
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) => t.request({ method: 'POST', url: '/api/v1/session', body: { name: p.name, password: `parallel-${i}` } })),
    );
    const statuses = results.map((r) => r.status);
    assert.equal(statuses.filter((s) => s === 401).length, 10);
    assert.equal(statuses.filter((s) => s === 429).length, 6);
  });

  test('a successful log-in resets the failure count', async () => {
    const p = await person(t, 'viewer');
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 9; i++) await t.request({ method: 'POST', url: '/api/v1/session', body: { name: p.name, password: 'nope nope nope' } });
      assert.equal((await t.request({ method: 'POST', url: '/api/v1/session', body: { name: p.name, password: PASSWORD } })).status, 201);
    }
  });
});

describe('onboarding', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  test('GET /onboarding is for the caller role and this deployment, and never holds a token', async () => {
    const viewer = await t.user('viewer');
    const operator = await t.user('operator');
    const bodies: Record<string, any> = {};
    for (const [role, token] of [['viewer', viewer.token], ['operator', operator.token], ['admin', t.adminToken]] as const) {
      const res = await t.request({ method: 'GET', url: '/api/v1/onboarding', token });
      assert.equal(res.status, 200);
      assert.equal(res.body.role, role);
      assert.equal(res.body.console_url, 'http://crewhouse.test');
      assert.equal(res.body.openapi_url, 'http://crewhouse.test/api/v1/openapi.json');
      assert.match(res.body.prompt, /http:\/\/crewhouse\.test\/api\/v1/);
      assert.equal(res.body.prompt.split(/(?<=\.)\s+/).length, 2, 'two sentences');
      assert.ok(!res.text.includes(token));
      assert.doesNotMatch(res.text, /ch[ksu]_[A-Za-z0-9_-]{8,}/);
      bodies[role] = res.body;
    }
    assert.notEqual(bodies.viewer.instructions, bodies.operator.instructions);
    assert.notEqual(bodies.operator.instructions, bodies.admin.instructions);
    assert.match(bodies.viewer.instructions, /403/);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/onboarding' })).status, 401);
  });

  test('a session mints an onboarding token: short-lived, the account role, the prompt filled in', async () => {
    const created = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: uniq('ob'), role: 'operator' } });
    const setup = await t.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: created.body.setup_token, password: PASSWORD } });
    const cookie = String(setup.headers['set-cookie']).split(';')[0];
    assert.equal((await t.request({ method: 'POST', url: '/api/v1/session/onboarding-token', headers: { cookie } })).status, 403);
    const res = await t.request({ method: 'POST', url: '/api/v1/session/onboarding-token', headers: { cookie, 'x-console-csrf': setup.body.csrf_token } });
    assert.equal(res.status, 201);
    assert.equal(res.body.kind, 'onboarding');
    assert.ok(res.body.prompt.includes(res.body.token));
    const hours = (Date.parse(res.body.expires_at) - Date.now()) / 3600_000;
    assert.ok(hours > 23 && hours <= 24, `expires in ${hours} h`);
    const me = await t.request({ method: 'GET', url: '/api/v1/me', token: res.body.token });
    assert.equal(me.body.role, 'operator');
    assert.equal(me.body.via, 'token');
  });

  test('with an https base URL the cookie is Secure', async () => {
    const t2 = await testApp({ config: { SERVICE_PUBLIC_BASE_URL: 'https://console.example.com' } });
    try {
      const created = await t2.request({ method: 'POST', url: '/api/v1/users', token: t2.adminToken, body: { name: uniq('sec'), role: 'viewer' } });
      assert.match(created.body.setup_url, /^https:\/\/console\.example\.com\/#setup\?token=chu_/);
      const setup = await t2.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: created.body.setup_token, password: PASSWORD } });
      assert.match(String(setup.headers['set-cookie']), /; Secure/);
    } finally {
      await t2.close();
    }
  });
});
