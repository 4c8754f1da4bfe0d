import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { hashToken, newSecret } from './credentials.ts';
import { insertToken } from './auth.service.ts';
import { dbKind, testApp, waitFor, type TestApp } from '../../test/harness.ts';

// On the embedded database the look-up of a token is answered from memory after its first
// use; every change must still count from the very next request, whoever writes it.
describe(`credentials answered from memory stay exact (${dbKind})`, () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  const me = (token: string) => t.request({ method: 'GET', url: '/api/v1/me', token });
  const patchUser = async (id: number, body: Record<string, unknown>) => {
    const url = `/api/v1/users/${id}`;
    const etag = String((await t.request({ method: 'GET', url, token: t.adminToken })).headers.etag);
    const res = await t.request({ method: 'PATCH', url, token: t.adminToken, body, headers: { 'if-match': etag } });
    assert.equal(res.status, 200, res.text);
  };
  // An admin's route.
  const listUsers = (token: string) => t.request({ method: 'GET', url: '/api/v1/users', token });

  test('a changed role counts on the very next request', async () => {
    const u = await t.user('admin');
    assert.equal((await me(u.token)).body.role, 'admin');
    assert.equal((await listUsers(u.token)).status, 200);
    await patchUser(u.id, { role: 'viewer' });
    assert.equal((await me(u.token)).body.role, 'viewer');
    assert.equal((await listUsers(u.token)).status, 403);
    await patchUser(u.id, { role: 'admin' });
    assert.equal((await listUsers(u.token)).status, 200);
  });

  test('a disabled user is refused on the very next request', async () => {
    const u = await t.user('viewer');
    assert.equal((await me(u.token)).status, 200);
    assert.equal((await me(u.token)).status, 200);
    await patchUser(u.id, { disabled: true });
    assert.equal((await me(u.token)).status, 401);
  });

  test('a revoked token is refused on the very next request; the user\'s other token still works', async () => {
    const u = await t.user('viewer');
    const second = newSecret('chk_');
    const row = await insertToken(t.db, { user_id: u.id, name: 'second', kind: 'api', prefix: second.slice(0, 8), token_hash: hashToken(second), expires_at: null });
    assert.equal((await me(second)).status, 200);
    assert.equal((await me(u.token)).status, 200);
    // What DELETE /session/tokens/:id does (a browser session's route).
    await t.services.sessions.revokeToken({ userId: u.id, name: u.name, email: null, role: 'viewer', via: 'session', requestId: 'test' }, row.id);
    assert.equal((await me(second)).status, 401);
    assert.equal((await me(u.token)).status, 200);
  });

  test('writes that go around the services count too: query builder, raw SQL, inside a transaction', async () => {
    const u = await t.user('viewer');
    assert.equal((await me(u.token)).body.role, 'viewer');
    await t.db.updateTable('users').set({ role: 'admin' }).where('id', '=', u.id).execute();
    assert.equal((await me(u.token)).body.role, 'admin');
    await sql`update users set name = ${`${u.name}-renamed`} where id = ${u.id}`.execute(t.db);
    assert.equal((await me(u.token)).body.name, `${u.name}-renamed`);
    await t.db.transaction().execute(async (trx) => {
      await sql`update api_tokens set revoked_at = now() where user_id = ${u.id}`.execute(trx);
    });
    assert.equal((await me(u.token)).status, 401);
  });

  test('a token stops working when it expires, though nothing was written', async () => {
    const u = await t.user('viewer');
    const token = newSecret('chk_');
    await insertToken(t.db, { user_id: u.id, name: 'short', kind: 'api', prefix: token.slice(0, 8), token_hash: hashToken(token), expires_at: new Date(Date.now() + 1500) });
    // Used while live (and so remembered), then refused once its time is up.
    const first = await me(token);
    if (first.status === 200) await waitFor('the token to expire', async () => (await me(token)).status === 401);
    else assert.equal(first.status, 401, 'a token is either live or refused as expired');
    assert.equal((await me(token)).status, 401);
  });
});
