import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { systemActor } from '../audit/audit.ts';
import { testApp, testDb, uniq, type TestApp } from '../../test/harness.ts';
import { CipherError, keyFilePath, loadCipher, readKeyFile } from './cipher.ts';
import { rotateSecretKey } from './rotate.ts';
import { createSecretsService } from './secrets.service.ts';

const key = (n: number) => Buffer.alloc(32, n).toString('base64');

describe('cipher', () => {
  test('seals with AES-256-GCM under a key id and opens only with the same name', () => {
    const c = loadCipher({ secretKey: key(1), secretKeyPrevious: [], dataDir: ':memory:' });
    const sealed = c.seal('hunter2', 'a');
    assert.equal(sealed.keyId, c.keyId);
    assert.ok(!sealed.blob.includes('hunter2'));
    assert.notEqual(c.seal('hunter2', 'a').blob, sealed.blob, 'a fresh IV each time');
    assert.equal(c.open(sealed, 'a'), 'hunter2');
    assert.throws(() => c.open(sealed, 'b'), CipherError);
    const tampered = { ...sealed, blob: sealed.blob.slice(0, -4) + (sealed.blob.endsWith('AAAA') ? 'BBBB' : 'AAAA') };
    assert.throws(() => c.open(tampered, 'a'), CipherError);
  });

  test('a key that is not base64 of 32 bytes is refused', () => {
    assert.throws(() => loadCipher({ secretKey: Buffer.alloc(16).toString('base64'), secretKeyPrevious: [], dataDir: ':memory:' }), /32 bytes/);
    assert.throws(() => loadCipher({ secretKey: 'not base64!!', secretKeyPrevious: [], dataDir: ':memory:' }), /base64/);
  });

  test('without a key: ephemeral in memory, a 0600 key file on disk that the next start reuses', () => {
    const a = loadCipher({ secretKey: null, secretKeyPrevious: [], dataDir: ':memory:' });
    const b = loadCipher({ secretKey: null, secretKeyPrevious: [], dataDir: ':memory:' });
    assert.equal(a.source, 'ephemeral');
    assert.notEqual(a.keyId, b.keyId);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chk-'));
    try {
      const first = loadCipher({ secretKey: null, secretKeyPrevious: [], dataDir: path.join(dir, 'data') });
      const file = keyFilePath(path.join(dir, 'data'));
      assert.equal(fs.statSync(file).mode & 0o777, 0o600);
      const again = loadCipher({ secretKey: null, secretKeyPrevious: [], dataDir: path.join(dir, 'data') });
      assert.equal(again.keyId, first.keyId);
      assert.equal(again.open(first.seal('v', 'n'), 'n'), 'v');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a value sealed under an unknown key says which key is missing', () => {
    const a = loadCipher({ secretKey: key(1), secretKeyPrevious: [], dataDir: ':memory:' });
    const b = loadCipher({ secretKey: key(2), secretKeyPrevious: [], dataDir: ':memory:' });
    assert.throws(() => b.open(a.seal('v', 'n'), 'n'), new RegExp(a.keyId));
    const both = loadCipher({ secretKey: key(2), secretKeyPrevious: [key(1)], dataDir: ':memory:' });
    assert.equal(both.open(a.seal('v', 'n'), 'n'), 'v');
  });
});

describe('secret service and rotation', () => {
  test('rotate-key with SERVICE_SECRET_KEY: re-encrypts under the new key using the previous one', async () => {
    const { db, close } = await testDb();
    try {
      const oldConfig = { secretKey: key(3), secretKeyPrevious: [], dataDir: ':memory:' };
      const s1 = createSecretsService({ db, cipher: loadCipher(oldConfig) });
      await s1.put(systemActor(), 'a', 'alpha');
      await s1.put(systemActor(), 'integrations/code_host/app_key', 'beta');
      const newConfig = { secretKey: key(4), secretKeyPrevious: [key(3)], dataDir: ':memory:' };
      const r = await rotateSecretKey(db, newConfig);
      assert.deepEqual([r.resealed, r.total], [2, 2]);
      // The new key alone now opens everything.
      const s2 = createSecretsService({ db, cipher: loadCipher({ secretKey: key(4), secretKeyPrevious: [], dataDir: ':memory:' }) });
      assert.equal(await s2.reveal('a'), 'alpha');
      assert.equal(await s2.reveal('integrations/code_host/app_key'), 'beta');
      const ids = await db.selectFrom('secrets').select('key_id').distinct().execute();
      assert.deepEqual(ids.map((x) => x.key_id), [loadCipher(newConfig).keyId]);
    } finally {
      await close();
    }
  });

  test('rotate-key with a key file: a new current key, values re-encrypted, the old key kept for values sealed elsewhere', async () => {
    const { db, close } = await testDb();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chk-'));
    try {
      const config = { secretKey: null, secretKeyPrevious: [], dataDir: dir };
      const before = loadCipher(config);
      await createSecretsService({ db, cipher: before }).put(systemActor(), 'x', 'value-x');
      const r = await rotateSecretKey(db, config);
      assert.notEqual(r.keyId, before.keyId);
      assert.equal(r.resealed, 1);
      const file = readKeyFile(keyFilePath(dir));
      assert.equal(file!.current, r.keyId);
      assert.deepEqual(Object.keys(file!.keys).sort(), [before.keyId, r.keyId].sort());
      const row = await db.selectFrom('secrets').select('key_id').where('name', '=', 'x').executeTakeFirstOrThrow();
      assert.equal(row.key_id, r.keyId);
      assert.equal(fs.statSync(keyFilePath(dir)).mode & 0o777, 0o600);
      assert.equal(await createSecretsService({ db, cipher: loadCipher(config) }).reveal('x'), 'value-x');
      await assert.rejects(rotateSecretKey(db, { secretKey: null, secretKeyPrevious: [], dataDir: ':memory:' }), /ephemeral/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
      await close();
    }
  });

  test('reveal gives the value; unknown and unset references give null; a row moved to another name does not open', async () => {
    const { db, close } = await testDb();
    try {
      const s = createSecretsService({ db, cipher: loadCipher({ secretKey: key(5), secretKeyPrevious: [], dataDir: ':memory:' }) });
      await s.put(systemActor(), 'p', 'pv');
      assert.equal(await s.reveal('p'), 'pv');
      assert.equal(await s.reveal('nope'), null);
      assert.equal(await s.declare(systemActor(), 'integrations/tracker_a/api_key'), true);
      assert.equal(await s.declare(systemActor(), 'integrations/tracker_a/api_key'), false);
      assert.equal(await s.reveal('integrations/tracker_a/api_key'), null);
      const row = await db.selectFrom('secrets').selectAll().where('name', '=', 'p').executeTakeFirstOrThrow();
      await db.insertInto('secrets').values({ name: 'q', value_sealed: row.value_sealed, key_id: row.key_id, created_by: 'x', updated_by: 'x' }).execute();
      await assert.rejects(s.reveal('q'), CipherError);
    } finally {
      await close();
    }
  });
});

describe('secrets API', () => {
  let t: TestApp;
  const values: string[] = [];
  const secretValue = () => {
    const v = `sv-${uniq('value')}-${Math.random().toString(36).slice(2)}`;
    values.push(v);
    return v;
  };
  const transcript: string[] = [];
  const req = async (opts: Parameters<TestApp['request']>[0]) => {
    const res = await t.request(opts);
    transcript.push(JSON.stringify(res.headers), res.text);
    return res;
  };
  before(async () => {
    t = await testApp();
  });
  after(async () => {
    // Nothing the service logged, answered or audited holds a value written during these tests.
    const audit = JSON.stringify(await t.db.selectFrom('audit_log').selectAll().execute());
    const all = [...t.logs, ...transcript, audit].join('\n');
    assert.ok(values.length >= 5);
    for (const v of values) assert.ok(!all.includes(v), 'a secret value leaked into logs, answers or the audit log');
    assert.ok(t.logs.length > 0);
    await t.close();
  });

  test('PUT creates (201), GET answers metadata without the value, replace needs If-Match (428, 412, 200)', async () => {
    const name = uniq('api-key');
    const url = `/api/v1/secrets/${name}`;
    const created = await req({ method: 'PUT', url, token: t.adminToken, body: { value: secretValue() } });
    assert.equal(created.status, 201);
    assert.equal(created.headers.location, url);
    assert.equal(created.body.name, name);
    assert.equal(created.body.set, true);
    assert.equal(created.body.kind, 'platform');
    assert.equal(created.body.value, undefined);
    assert.match(String(created.headers.etag), /^"\d+\.[0-9a-f]{16}"$/, 'the row version and a digest of the body (used_by is derived)');
    const got = await req({ method: 'GET', url, token: t.adminToken });
    assert.equal(got.status, 200);
    assert.deepEqual(Object.keys(got.body).sort(), ['created_at', 'created_by', 'kind', 'name', 'set', 'updated_at', 'updated_by', 'used_by', 'value_set_at']);
    assert.equal(got.body.updated_by, 'admin');
    assert.equal((await req({ method: 'PUT', url, token: t.adminToken, body: { value: secretValue() } })).status, 428);
    const v2 = secretValue();
    const replaced = await req({ method: 'PUT', url, token: t.adminToken, body: { value: v2 }, headers: { 'if-match': String(got.headers.etag) } });
    assert.equal(replaced.status, 200);
    assert.equal(await t.services.secrets.reveal(name), v2);
    const stale = await req({ method: 'PUT', url, token: t.adminToken, body: { value: secretValue() }, headers: { 'if-match': String(got.headers.etag) } });
    assert.equal(stale.status, 412);
    assert.equal(await t.services.secrets.reveal(name), v2);
  });

  test('the value is encrypted at rest', async () => {
    const name = uniq('rest');
    const v = secretValue();
    await req({ method: 'PUT', url: `/api/v1/secrets/${name}`, token: t.adminToken, body: { value: v } });
    const row = await t.db.selectFrom('secrets').selectAll().where('name', '=', name).executeTakeFirstOrThrow();
    assert.ok(row.value_sealed && !row.value_sealed.includes(v) && !Buffer.from(row.value_sealed.slice(3), 'base64').toString('latin1').includes(v));
    assert.equal(row.key_id, t.services.secrets ? loadCipher(t.config).keyId : null);
  });

  test('names may contain "/" (as is or %2F); integration secrets stay as unset references after DELETE', async () => {
    // A role's own chat_a bot: a secret chat_a takes, and one no other test writes.
    const name = `integrations/chat_a/bots/${uniq('team')}/lead`;
    const put = await req({ method: 'PUT', url: `/api/v1/secrets/${name}`, token: t.adminToken, body: { value: secretValue() } });
    assert.equal(put.status, 201);
    assert.equal(put.headers.location, `/api/v1/secrets/${name}`, 'a 201 says where the secret is');
    assert.equal(put.body.kind, 'integration');
    const encoded = await req({ method: 'GET', url: `/api/v1/secrets/${encodeURIComponent(name)}`, token: t.adminToken });
    assert.equal(encoded.status, 200);
    assert.equal(encoded.body.name, name);
    assert.equal((await req({ method: 'DELETE', url: `/api/v1/secrets/${name}`, token: t.adminToken })).status, 428);
    const del = await req({ method: 'DELETE', url: `/api/v1/secrets/${name}`, token: t.adminToken, headers: { 'if-match': String(encoded.headers.etag) } });
    assert.equal(del.status, 204);
    const after = await req({ method: 'GET', url: `/api/v1/secrets/${name}`, token: t.adminToken });
    assert.equal(after.status, 200);
    assert.equal(after.body.set, false);
    assert.equal(after.body.value_set_at, null);
    assert.equal(await t.services.secrets.reveal(name), null);
    // Setting it again is a replace of the existing reference.
    assert.equal((await req({ method: 'PUT', url: `/api/v1/secrets/${name}`, token: t.adminToken, body: { value: secretValue() }, headers: { 'if-match': String(after.headers.etag) } })).status, 200);
  });

  test('a name under integrations/ must be a secret an integration takes: another kind or secret is 404 naming those there are; one stored before still lists, reads and deletes', async () => {
    const refused = [
      ['integrations/nosuch/token', /no integration named "nosuch".*chat_a \(Mattermost\), chat_b \(Slack\), code_host \(GitHub\), tracker_a \(Linear\), tracker_b \(Jira\)/],
      ['integrations/code_host/nosuch', /the code_host integration \(GitHub\) takes no secret named "nosuch": its secrets are app_key, webhook_secret$/],
      ['integrations/code_host/app_id', /takes no secret named "app_id" \(app_id is one of its settings, not a secret: it is set with the integration's settings\)/],
      ['integrations/chat_a/bots/only-team', /its secrets are bot_token, command_token, and bots\/<team>\/<role> for a role's own bot/],
    ] as const;
    for (const [name, words] of refused) {
      const res = await req({ method: 'PUT', url: `/api/v1/secrets/${name}`, token: t.adminToken, body: { value: secretValue() } });
      assert.equal(res.status, 404, `${name}: ${res.text}`);
      assert.match(res.body.detail, words);
      assert.equal(await t.services.secrets.get(name), null, 'nothing is stored');
    }
    // With If-Match too (a replace): refused before the precondition is looked at.
    const withIfMatch = await req({ method: 'PUT', url: '/api/v1/secrets/integrations/nosuch/token', token: t.adminToken, body: { value: secretValue() }, headers: { 'if-match': '"1"' } });
    assert.equal(withIfMatch.status, 404);
    // A reference stored before the rule (written past the route) still lists, reads and is removed.
    const old = `integrations/${uniq('gone')}/token`;
    await t.services.secrets.put(systemActor(), old, secretValue());
    const listed = await req({ method: 'GET', url: `/api/v1/secrets?prefix=${encodeURIComponent(old)}`, token: t.adminToken });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(listed.body.items.map((i: { name: string }) => i.name), [old]);
    const one = await req({ method: 'GET', url: `/api/v1/secrets/${old}`, token: t.adminToken });
    assert.equal(one.status, 200);
    const all = await req({ method: 'GET', url: '/api/v1/integrations', token: t.adminToken });
    assert.equal(all.status, 200, all.text);
    assert.equal((await req({ method: 'DELETE', url: `/api/v1/secrets/${old}`, token: t.adminToken, headers: { 'if-match': String(one.headers.etag) } })).status, 204);
    // No integration takes it, so no reference is kept for one: it is gone.
    assert.equal((await req({ method: 'GET', url: `/api/v1/secrets/${old}`, token: t.adminToken })).status, 404);
    // The secrets an integration takes are written as before.
    const ok = await req({ method: 'PUT', url: `/api/v1/secrets/integrations/chat_a/bots/${uniq('team')}/dev`, token: t.adminToken, body: { value: secretValue() } });
    assert.equal(ok.status, 201, ok.text);
  });

  test('DELETE of a platform secret removes its reference; a second DELETE is 404; stale is 412', async () => {
    const name = uniq('plat');
    const url = `/api/v1/secrets/${name}`;
    const put = await req({ method: 'PUT', url, token: t.adminToken, body: { value: secretValue() } });
    assert.equal((await req({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': '"1"' } })).status, 412);
    assert.equal((await req({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': String(put.headers.etag) } })).status, 204);
    assert.equal((await req({ method: 'GET', url, token: t.adminToken })).status, 404);
    assert.equal((await req({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': String(put.headers.etag) } })).status, 404);
    assert.equal(await t.services.secrets.reveal(name), null);
  });

  test('viewers and operators read metadata; only admins write (403)', async () => {
    const name = uniq('roles');
    const put = await req({ method: 'PUT', url: `/api/v1/secrets/${name}`, token: t.adminToken, body: { value: secretValue() } });
    for (const role of ['viewer', 'operator'] as const) {
      const u = await t.user(role);
      assert.equal((await req({ method: 'GET', url: '/api/v1/secrets', token: u.token })).status, 200);
      assert.equal((await req({ method: 'GET', url: `/api/v1/secrets/${name}`, token: u.token })).status, 200);
      assert.equal((await req({ method: 'PUT', url: `/api/v1/secrets/${uniq('no')}`, token: u.token, body: { value: secretValue() } })).status, 403);
      assert.equal((await req({ method: 'DELETE', url: `/api/v1/secrets/${name}`, token: u.token, headers: { 'if-match': String(put.headers.etag) } })).status, 403);
    }
    assert.equal((await req({ method: 'GET', url: '/api/v1/secrets' })).status, 401);
  });

  test('bad names and bodies are 400 naming the field, without echoing the value', async () => {
    const v = secretValue();
    const extra = await req({ method: 'PUT', url: `/api/v1/secrets/${uniq('b')}`, token: t.adminToken, body: { value: v, other: 1 } });
    assert.equal(extra.status, 400);
    assert.equal(extra.body.errors[0].field, 'other');
    const empty = await req({ method: 'PUT', url: `/api/v1/secrets/${uniq('b')}`, token: t.adminToken, body: { value: '' } });
    assert.equal(empty.status, 400);
    assert.equal(empty.body.errors[0].field, 'value');
    const wrongType = await req({ method: 'PUT', url: `/api/v1/secrets/${uniq('b')}`, token: t.adminToken, body: { value: 12345 } });
    assert.equal(wrongType.status, 400);
    for (const bad of ['a//b', '../x', 'a/.b', '%20x', 'a'.repeat(201)]) {
      const res = await req({ method: 'PUT', url: `/api/v1/secrets/${bad}`, token: t.adminToken, body: { value: v } });
      assert.ok([400, 404].includes(res.status), `${bad}: ${res.status}`);
    }
    // The path's name is named as the contract names it, not as the router's `*`.
    const badName = await req({ method: 'PUT', url: '/api/v1/secrets/a%2F.b', token: t.adminToken, body: { value: v } });
    assert.equal(badName.status, 400, badName.text);
    assert.deepEqual(badName.body.errors.map((e: { field: string }) => e.field), ['name']);
    assert.doesNotMatch(badName.body.detail, /\*/);
    const big = await req({ method: 'PUT', url: `/api/v1/secrets/${uniq('big')}`, token: t.adminToken, body: { value: 'x'.repeat(64 * 1024 + 1) } });
    assert.equal(big.status, 400);
  });

  test('the list pages by name, filters by prefix, and holds no values', async () => {
    const prefix = `${uniq('list')}/`;
    for (let i = 0; i < 3; i++) await req({ method: 'PUT', url: `/api/v1/secrets/${prefix}s${i}`, token: t.adminToken, body: { value: secretValue() } });
    const first = await req({ method: 'GET', url: `/api/v1/secrets?limit=2&prefix=${encodeURIComponent(prefix)}`, token: t.adminToken });
    assert.equal(first.status, 200);
    assert.deepEqual(first.body.items.map((i: { name: string }) => i.name), [`${prefix}s0`, `${prefix}s1`]);
    const second = await req({ method: 'GET', url: `/api/v1/secrets?limit=2&prefix=${encodeURIComponent(prefix)}&cursor=${first.body.next_cursor}`, token: t.adminToken });
    assert.deepEqual(second.body.items.map((i: { name: string }) => i.name), [`${prefix}s2`]);
    assert.equal(second.body.next_cursor, null);
    assert.equal((await req({ method: 'GET', url: '/api/v1/secrets?cursor=zzz', token: t.adminToken })).status, 400);
  });

  test('writes are audited without the value', async () => {
    const name = uniq('aud');
    const v = secretValue();
    const res = await req({ method: 'PUT', url: `/api/v1/secrets/${name}`, token: t.adminToken, body: { value: v } });
    const rows = await t.db.selectFrom('audit_log').selectAll().where('target_type', '=', 'secret').where('target', '=', name).execute();
    assert.equal(rows.length, 1);
    assert.equal(rows[0].action, 'secret.put');
    assert.equal(rows[0].request_id, res.headers['x-request-id']);
    assert.ok(!JSON.stringify(rows).includes(v));
  });
});
