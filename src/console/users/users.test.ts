import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';

describe('users', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  test('an admin creates a user with a one-time setup link', async () => {
    const name = uniq('ann');
    const res = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name, email: `${name}@example.com`, role: 'operator' } });
    assert.equal(res.status, 201);
    assert.equal(res.body.name, name);
    assert.equal(res.body.password_set, false);
    assert.match(res.body.setup_token, /^chu_/);
    assert.equal(res.body.setup_url, `http://crewhouse.test/#setup?token=${res.body.setup_token}`);
    assert.match(String(res.headers.etag), /^"\d+"$/);
  });

  test('only admins list and create users; viewers and operators get 403', async () => {
    for (const role of ['viewer', 'operator'] as const) {
      const u = await t.user(role);
      assert.equal((await t.request({ method: 'GET', url: '/api/v1/users', token: u.token })).status, 403);
      const res = await t.request({ method: 'POST', url: '/api/v1/users', token: u.token, body: { name: uniq(), role: 'viewer' } });
      assert.equal(res.status, 403);
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
    }
  });

  test('a user reads their own record but not another one', async () => {
    const me = await t.user('viewer');
    const other = await t.user('viewer');
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/users/${me.id}`, token: me.token })).status, 200);
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/users/${other.id}`, token: me.token })).status, 403);
    const missing = await t.request({ method: 'GET', url: '/api/v1/users/999999', token: t.adminToken });
    assert.deepEqual([missing.status, missing.body.detail], [404, 'no user with id 999999']);
  });

  test('PATCH needs If-Match: 428 without, 412 when stale, 200 when fresh', async () => {
    const u = await t.user('viewer');
    const url = `/api/v1/users/${u.id}`;
    const read = await t.request({ method: 'GET', url, token: t.adminToken });
    const etag = String(read.headers.etag);
    assert.equal((await t.request({ method: 'PATCH', url, token: t.adminToken, body: { role: 'operator' } })).status, 428);
    const ok = await t.request({ method: 'PATCH', url, token: t.adminToken, body: { role: 'operator' }, headers: { 'if-match': etag } });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.role, 'operator');
    assert.notEqual(ok.headers.etag, etag);
    const stale = await t.request({ method: 'PATCH', url, token: t.adminToken, body: { role: 'admin' }, headers: { 'if-match': etag } });
    assert.equal(stale.status, 412);
  });

  test('two writers holding one ETag: exactly one wins', async () => {
    const u = await t.user('viewer');
    const url = `/api/v1/users/${u.id}`;
    const etag = String((await t.request({ method: 'GET', url, token: t.adminToken })).headers.etag);
    const results = await Promise.all(
      ['a', 'b', 'c', 'd'].map((s) => t.request({ method: 'PATCH', url, token: t.adminToken, body: { name: uniq(s) }, headers: { 'if-match': etag } })),
    );
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 412, 412, 412]);
  });

  test('the last enabled admin cannot be demoted or disabled (409)', async () => {
    const t2 = await testApp();
    try {
      const me = await t2.request({ method: 'GET', url: '/api/v1/me', token: t2.adminToken });
      const url = `/api/v1/users/${me.body.id}`;
      const etag = String((await t2.request({ method: 'GET', url, token: t2.adminToken })).headers.etag);
      const demote = await t2.request({ method: 'PATCH', url, token: t2.adminToken, body: { role: 'viewer' }, headers: { 'if-match': etag } });
      assert.equal(demote.status, 409);
      const disable = await t2.request({ method: 'PATCH', url, token: t2.adminToken, body: { disabled: true }, headers: { 'if-match': etag } });
      assert.equal(disable.status, 409);
      // With a second admin, the first may step down.
      await t2.user('admin');
      const ok = await t2.request({ method: 'PATCH', url, token: t2.adminToken, body: { role: 'operator' }, headers: { 'if-match': etag } });
      assert.equal(ok.status, 200);
    } finally {
      await t2.close();
    }
  });

  test('disabling a user revokes their tokens', async () => {
    const u = await t.user('operator');
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/me', token: u.token })).status, 200);
    const url = `/api/v1/users/${u.id}`;
    const etag = String((await t.request({ method: 'GET', url, token: t.adminToken })).headers.etag);
    assert.equal((await t.request({ method: 'PATCH', url, token: t.adminToken, body: { disabled: true }, headers: { 'if-match': etag } })).status, 200);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/me', token: u.token })).status, 401);
  });

  test('a fresh setup token voids the older unused one', async () => {
    const created = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: uniq('sam'), role: 'viewer' } });
    const first = created.body.setup_token;
    const again = await t.request({ method: 'POST', url: `/api/v1/users/${created.body.id}/setup-token`, token: t.adminToken });
    assert.equal(again.status, 201);
    const old = await t.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: first, password: 'correct horse battery' } });
    assert.equal(old.status, 422);
    const fresh = await t.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: again.body.setup_token, password: 'correct horse battery' } });
    assert.equal(fresh.status, 201);
    // One-time: a second use fails.
    const twice = await t.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: again.body.setup_token, password: 'correct horse battery' } });
    assert.equal(twice.status, 422);
  });

  test('writes are audited in the same transaction', async () => {
    const name = uniq('aud');
    const res = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name, role: 'viewer' } });
    const rows = await t.db.selectFrom('audit_log').selectAll().where('target_type', '=', 'user').where('target', '=', String(res.body.id)).execute();
    assert.equal(rows.length, 1);
    assert.equal(rows[0].action, 'user.create');
    assert.equal(rows[0].request_id, res.headers['x-request-id']);
  });

  test('duplicate names are a 409 naming the field; bad bodies are 400 naming fields', async () => {
    const name = uniq('dup');
    await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name, role: 'viewer' } });
    const dup = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: name.toUpperCase(), role: 'viewer' } });
    assert.equal(dup.status, 409);
    assert.equal(dup.body.errors[0].field, 'name');
    const bad = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: 5, role: 'boss', extra: 1 } });
    assert.equal(bad.status, 400);
    const fields = bad.body.errors.map((e: { field: string }) => e.field).sort();
    assert.deepEqual(fields, ['extra', 'name', 'role']);
  });

  test('lists paginate with a cursor; a bad cursor is 400', async () => {
    for (let i = 0; i < 3; i++) await t.user('viewer');
    const seen = new Set<number>();
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: any = await t.request({ method: 'GET', url: `/api/v1/users?limit=2${cursor ? `&cursor=${cursor}` : ''}`, token: t.adminToken });
      assert.equal(res.status, 200);
      for (const u of res.body.items) {
        assert.ok(!seen.has(u.id));
        seen.add(u.id);
      }
      cursor = res.body.next_cursor;
      pages++;
    } while (cursor && pages < 100);
    assert.ok(pages >= 2);
    const bad = await t.request({ method: 'GET', url: '/api/v1/users?cursor=garbage', token: t.adminToken });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.errors[0].field, 'cursor');
  });
});
