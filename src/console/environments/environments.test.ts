import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';
import { manifestProblem } from './manifest.ts';

const hex = (c: string) => c.repeat(64);
const manifest = (version: string, builtAt: string) => ({
  name: 'crewhouse-agent',
  version,
  kernel: { file: `vmlinux-${version}`, sha256: hex('a') },
  rootfs: { file: `rootfs-${version}.ext4`, sha256: hex('b') },
  built_at: builtAt,
});

describe('environments, images and checkpoints', () => {
  let t: TestApp;
  let dir: string;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chi-'));
    fs.writeFileSync(path.join(dir, 'b.json'), JSON.stringify(manifest('2025.02.0', '2025-02-01T00:00:00Z')));
    fs.writeFileSync(path.join(dir, 'a.json'), JSON.stringify(manifest('2025.03.0', '2025-03-01T00:00:00Z')));
    fs.writeFileSync(path.join(dir, 'c.json'), JSON.stringify(manifest('2025.01.0', '2025-01-01T00:00:00Z')));
    fs.writeFileSync(path.join(dir, 'broken.json'), '{not json');
    fs.writeFileSync(path.join(dir, 'bad-sha.json'), JSON.stringify({ ...manifest('x', '2030-01-01T00:00:00Z'), kernel: { file: 'k', sha256: 'nope' } }));
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'ignored');
    t = await testApp({ config: { SERVICE_IMAGES_DIR: dir } });
  });
  after(async () => {
    await t.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const url = (name: string) => `/api/v1/environments/${name}`;
  const create = (body: Record<string, unknown>, token = t.adminToken) => t.request({ method: 'POST', url: '/api/v1/environments', token, body });

  test('GET /images: valid manifests newest first, the newest is current; bad manifests are skipped and logged', async () => {
    const res = await t.request({ method: 'GET', url: '/api/v1/images', token: t.adminToken });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.items.map((i: { version: string }) => i.version), ['2025.03.0', '2025.02.0', '2025.01.0']);
    assert.deepEqual(res.body.items.map((i: { current: boolean }) => i.current), [true, false, false]);
    assert.deepEqual(res.body.items[0], { ...manifest('2025.03.0', '2025-03-01T00:00:00.000Z'), current: true, manifest: 'a.json' });
    assert.ok(t.logs.some((l) => l.includes('broken.json')));
    assert.ok(t.logs.some((l) => l.includes('bad-sha.json')));
    const p1 = await t.request({ method: 'GET', url: '/api/v1/images?limit=2', token: t.adminToken });
    const p2 = await t.request({ method: 'GET', url: `/api/v1/images?limit=2&cursor=${p1.body.next_cursor}`, token: t.adminToken });
    assert.deepEqual(p2.body.items.map((i: { version: string }) => i.version), ['2025.01.0']);
    assert.equal(p2.body.next_cursor, null);
    // A cursor naming no build, or not text, is a 400 naming cursor, not the first page again.
    for (const key of ['gone.json', 1]) {
      const stale = await t.request({ method: 'GET', url: `/api/v1/images?limit=2&cursor=${Buffer.from(JSON.stringify([key])).toString('base64url')}`, token: t.adminToken });
      assert.deepEqual([stale.status, stale.body.errors?.[0]?.field], [400, 'cursor'], `${key}: ${stale.text}`);
    }
  });

  test('manifest rules', () => {
    assert.equal(manifestProblem(manifest('1', '2025-01-01T00:00:00Z')), null);
    assert.match(manifestProblem({ ...manifest('1', 'soon') })!, /built_at/);
    assert.match(manifestProblem({ ...manifest('1', '2025-01-01T00:00:00Z'), rootfs: { file: '../etc/passwd', sha256: hex('c') } })!, /rootfs.file/);
    assert.match(manifestProblem({ ...manifest('1', '2025-01-01T00:00:00Z'), name: '' })!, /name/);
    assert.match(manifestProblem([])!, /object/);
  });

  test('create a microvm environment: defaults, the current image read-only, used_by 0', async () => {
    const name = uniq('vm');
    const res = await create({ name, provider: 'microvm', profile: 'small', vcpus: 2, memory_mib: 4096, disk_gib: 20 });
    assert.equal(res.status, 201);
    assert.deepEqual(res.body, {
      name, provider: 'microvm', profile: 'small', vcpus: 2, memory_mib: 4096, disk_gib: 20, checkpoint_id: null, idle_after_seconds: 900, deep_sleep_after_seconds: 86400,
      image: { name: 'crewhouse-agent', version: '2025.03.0', built_at: '2025-03-01T00:00:00.000Z' }, used_by: 0, created_at: res.body.created_at, updated_at: res.body.updated_at,
    });
    const got = await t.request({ method: 'GET', url: url(name), token: t.adminToken });
    assert.equal(got.headers.etag, res.headers.etag);
    assert.equal((await create({ name, provider: 'microvm' })).status, 409);
    // image is read-only: not part of the body.
    const withImage = await create({ name: uniq('vm'), provider: 'microvm', image: 'other' });
    assert.equal(withImage.status, 400);
    assert.equal(withImage.body.errors[0].field, 'image');
  });

  test('checkpoint_id is required for hosted and refused for microvm (422); deep sleep not before idle (422)', async () => {
    const hosted = await create({ name: uniq('h'), provider: 'hosted', profile: 'm5' });
    assert.equal(hosted.status, 422);
    assert.equal(hosted.body.errors[0].field, 'checkpoint_id');
    const ok = await create({ name: uniq('h'), provider: 'hosted', profile: 'm5', checkpoint_id: 'ckpt-golden-1' });
    assert.equal(ok.status, 201);
    assert.equal(ok.body.image, null);
    const vm = await create({ name: uniq('v'), provider: 'microvm', checkpoint_id: 'ckpt-1' });
    assert.equal(vm.status, 422);
    assert.equal(vm.body.errors[0].field, 'checkpoint_id');
    const sleep = await create({ name: uniq('s'), provider: 'microvm', idle_after_seconds: 600, deep_sleep_after_seconds: 60 });
    assert.equal(sleep.status, 422);
    assert.equal(sleep.body.errors[0].field, 'deep_sleep_after_seconds');
    const big = await create({ name: uniq('s'), provider: 'microvm', idle_after_seconds: 100_000 });
    assert.equal(big.status, 201);
    assert.equal(big.body.deep_sleep_after_seconds, 100_000);
  });

  test('local is a provider of ours: no image, no checkpoint; other providers are 400', async () => {
    const local = await create({ name: uniq('l'), provider: 'local', vcpus: 1, memory_mib: 512, disk_gib: 2 });
    assert.equal(local.status, 201, local.text);
    assert.equal(local.body.provider, 'local');
    assert.equal(local.body.image, null);
    const withCheckpoint = await create({ name: uniq('l'), provider: 'local', checkpoint_id: 'ckpt-1' });
    assert.equal(withCheckpoint.status, 422);
    assert.match(withCheckpoint.body.errors[0].message, /local/);
    assert.equal((await create({ name: uniq('x'), provider: 'docker' })).status, 400);
  });

  test('GET /checkpoints lists the ids environments use', async () => {
    const a = uniq('ha');
    const b = uniq('hb');
    await create({ name: a, provider: 'hosted', checkpoint_id: 'ckpt-shared' });
    await create({ name: b, provider: 'hosted', checkpoint_id: 'ckpt-shared' });
    const res = await t.request({ method: 'GET', url: '/api/v1/checkpoints?limit=200', token: t.adminToken });
    assert.equal(res.status, 200);
    const shared = res.body.items.find((c: { id: string }) => c.id === 'ckpt-shared');
    assert.deepEqual(shared.used_by.map((u: { name: string }) => u.name).sort(), [a, b].sort());
    assert.ok(shared.used_by.every((u: { kind: string }) => u.kind === 'environment'));
    const ids = res.body.items.map((c: { id: string }) => c.id);
    assert.deepEqual(ids, [...ids].sort());
    // Its cursor is an id: a number is not one it gave out (nor for the environments, named by text).
    const envTyped = await t.request({ method: 'GET', url: `/api/v1/environments?cursor=${Buffer.from('[1]').toString('base64url')}`, token: t.adminToken });
    assert.deepEqual([envTyped.status, envTyped.body.errors?.[0]?.field], [400, 'cursor'], envTyped.text);
    const typed = await t.request({ method: 'GET', url: `/api/v1/checkpoints?cursor=${Buffer.from('[1]').toString('base64url')}`, token: t.adminToken });
    assert.deepEqual([typed.status, typed.body.errors?.[0]?.field], [400, 'cursor'], typed.text);
    assert.ok(!ids.includes(null));
  });

  test('PUT replaces with If-Match (428, 412, 200); 404 for an unknown name; no renaming', async () => {
    const name = uniq('rep');
    const c = await create({ name, provider: 'microvm', vcpus: 2 });
    const body = { provider: 'hosted', checkpoint_id: 'ckpt-9' };
    assert.equal((await t.request({ method: 'PUT', url: url(name), token: t.adminToken, body })).status, 428);
    const ok = await t.request({ method: 'PUT', url: url(name), token: t.adminToken, body, headers: { 'if-match': String(c.headers.etag) } });
    assert.equal(ok.status, 200);
    assert.deepEqual([ok.body.provider, ok.body.vcpus, ok.body.checkpoint_id, ok.body.image], ['hosted', null, 'ckpt-9', null]);
    assert.equal((await t.request({ method: 'PUT', url: url(name), token: t.adminToken, body, headers: { 'if-match': String(c.headers.etag) } })).status, 412);
    assert.equal((await t.request({ method: 'PUT', url: url(uniq('none')), token: t.adminToken, body, headers: { 'if-match': '"1"' } })).status, 404);
    assert.equal((await t.request({ method: 'PUT', url: url(name), token: t.adminToken, body: { ...body, name: 'x' }, headers: { 'if-match': String(ok.headers.etag) } })).status, 422);
  });

  test('used_by counts current agent versions (the ETag changes with it; If-Match still compares the environment itself); DELETE is 409 while used, then 204', async () => {
    const name = uniq('used');
    const c = await create({ name, provider: 'microvm' });
    const agent = uniq('agent');
    const a = await t.request({ method: 'POST', url: '/api/v1/agents', token: t.adminToken, body: { name: agent, version: { system_prompt: 'x', environment: name } } });
    assert.equal(a.status, 201, JSON.stringify(a.body));
    const got = await t.request({ method: 'GET', url: url(name), token: t.adminToken });
    assert.equal(got.body.used_by, 1);
    assert.notEqual(got.headers.etag, c.headers.etag, 'a body whose used_by differs has another ETag');
    // A cache revalidating the first read would not keep used_by 0; a write with it is not stale.
    assert.equal((await t.request({ method: 'DELETE', url: url(name), token: t.adminToken })).status, 428);
    const busy = await t.request({ method: 'DELETE', url: url(name), token: t.adminToken, headers: { 'if-match': String(c.headers.etag) } });
    assert.equal(busy.status, 409);
    const v = await t.request({ method: 'POST', url: `/api/v1/agents/${agent}/versions`, token: t.adminToken, body: { system_prompt: 'y', environment: null, note: 'n' }, headers: { 'if-match': String(a.headers.etag) } });
    assert.equal(v.status, 201, JSON.stringify(v.body));
    assert.equal((await t.request({ method: 'GET', url: url(name), token: t.adminToken })).body.used_by, 0);
    assert.equal((await t.request({ method: 'DELETE', url: url(name), token: t.adminToken, headers: { 'if-match': '"1"' } })).status, 412);
    assert.equal((await t.request({ method: 'DELETE', url: url(name), token: t.adminToken, headers: { 'if-match': String(c.headers.etag) } })).status, 204);
    assert.equal((await t.request({ method: 'GET', url: url(name), token: t.adminToken })).status, 404);
    const actions = await t.db.selectFrom('audit_log').select('action').where('target_type', '=', 'environment').where('target', '=', name).orderBy('id').execute();
    assert.deepEqual(actions.map((x) => x.action), ['environment.create', 'environment.delete']);
  });

  test('viewers and operators read; only admins write (403)', async () => {
    const name = uniq('r');
    const c = await create({ name, provider: 'microvm' });
    for (const role of ['viewer', 'operator'] as const) {
      const u = await t.user(role);
      for (const u2 of ['/api/v1/environments', url(name), '/api/v1/images', '/api/v1/checkpoints']) assert.equal((await t.request({ method: 'GET', url: u2, token: u.token })).status, 200, u2);
      assert.equal((await create({ name: uniq('no'), provider: 'microvm' }, u.token)).status, 403);
      assert.equal((await t.request({ method: 'PUT', url: url(name), token: u.token, body: { provider: 'microvm' }, headers: { 'if-match': String(c.headers.etag) } })).status, 403);
      assert.equal((await t.request({ method: 'DELETE', url: url(name), token: u.token, headers: { 'if-match': String(c.headers.etag) } })).status, 403);
    }
    for (const u2 of ['/api/v1/environments', '/api/v1/images', '/api/v1/checkpoints']) assert.equal((await t.request({ method: 'GET', url: u2 })).status, 401);
  });

  test('bad bodies are 400 naming fields; the list pages by name', async () => {
    const bad = await create({ name: 'UPPER', provider: 'vm', vcpus: 0, memory_mib: 'lots' });
    assert.equal(bad.status, 400);
    const fields = bad.body.errors.map((e: { field: string }) => e.field);
    for (const f of ['name', 'provider', 'vcpus', 'memory_mib']) assert.ok(fields.includes(f), `${f} in ${fields}`);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: any = await t.request({ method: 'GET', url: `/api/v1/environments?limit=3${cursor ? `&cursor=${cursor}` : ''}`, token: t.adminToken });
      seen.push(...res.body.items.map((e: { name: string }) => e.name));
      cursor = res.body.next_cursor;
    } while (cursor);
    assert.deepEqual(seen, [...seen].sort());
    assert.ok(seen.length >= 5);
  });
});

describe('images without a manifest directory', () => {
  test('an empty list and environments without an image', async () => {
    const t = await testApp({ config: { SERVICE_IMAGES_DIR: path.join(os.tmpdir(), `none-${uniq()}`) } });
    try {
      const res = await t.request({ method: 'GET', url: '/api/v1/images', token: t.adminToken });
      assert.deepEqual(res.body, { items: [], next_cursor: null });
      const env = await t.request({ method: 'POST', url: '/api/v1/environments', token: t.adminToken, body: { name: uniq('e'), provider: 'microvm' } });
      assert.equal(env.body.image, null);
    } finally {
      await t.close();
    }
  });
});
