import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';
import { checkSkill, frontMatter, resourcePathProblem } from './skills.rules.ts';

const skillName = () => uniq('sk').toLowerCase().replace(/[^a-z0-9-]/g, '');
const md = (name: string, description = 'Does a thing.', rest = '\n# Title\n') => `---\nname: ${name}\ndescription: ${description}\n---\n${rest}`;

describe('skill rules', () => {
  test('front matter, paths and sizes', () => {
    assert.deepEqual(frontMatter('---\nname: a\ndescription: b\n---\nbody'), { name: 'a', description: 'b' });
    assert.equal(frontMatter('no front matter'), null);
    assert.equal(frontMatter('---\n: [bad\n---\n'), null);
    for (const bad of ['/abs', '../x', 'a/../b', 'a//b', './a', 'SKILL.md', 'a\\b', 'C:/x', '.hidden', 'a b']) assert.notEqual(resourcePathProblem(bad), null, bad);
    for (const ok of ['scripts/run.sh', 'ref.md', 'a/b/c.txt', 'docs/SKILL.md']) assert.equal(resourcePathProblem(ok), null, ok);
    const r = checkSkill('abc', md('abc'), { 'a.txt': 'xyz' });
    assert.deepEqual(r.errors, []);
    assert.equal(r.description, 'Does a thing.');
    assert.equal(r.size, Buffer.byteLength(md('abc')) + 3);
  });
});

describe('platform skills', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  const url = (name: string) => `/api/v1/skills/${name}`;
  const put = (name: string, body: unknown, headers: Record<string, string> = {}, token = t.adminToken) => t.request({ method: 'PUT', url: url(name), token, body, headers });
  const fields = (res: { body: { errors: Array<{ field: string }> } }) => res.body.errors.map((e) => e.field);

  test('PUT creates (201) with the catalogue revision plus one; replace needs If-Match (428, 412, 200)', async () => {
    const name = skillName();
    const created = await put(name, { body: md(name), resources: { 'scripts/run.sh': 'echo hi\n' } });
    assert.equal(created.status, 201);
    assert.equal(created.body.description, 'Does a thing.');
    assert.equal(created.body.size_bytes, Buffer.byteLength(md(name)) + Buffer.byteLength('echo hi\n'));
    assert.deepEqual(created.body.resources, { 'scripts/run.sh': 'echo hi\n' });
    const max = await t.db.selectFrom('platform_skills').select((eb) => eb.fn.max('revision').as('m')).executeTakeFirstOrThrow();
    assert.equal(created.body.revision, Number(max.m));
    assert.equal((await put(name, { body: md(name) })).status, 428);
    const other = skillName();
    const o = await put(other, { body: md(other) });
    assert.equal(o.body.revision, created.body.revision + 1);
    const replaced = await put(name, { body: md(name, 'Changed.') }, { 'if-match': String(created.headers.etag) });
    assert.equal(replaced.status, 200);
    assert.equal(replaced.body.revision, o.body.revision + 1);
    assert.equal(replaced.body.description, 'Changed.');
    assert.deepEqual(replaced.body.resources, {});
    assert.equal((await put(name, { body: md(name) }, { 'if-match': String(created.headers.etag) })).status, 412);
    const got = await t.request({ method: 'GET', url: url(name), token: t.adminToken });
    assert.deepEqual(Object.keys(got.body).sort(), ['body', 'created_at', 'description', 'name', 'resources', 'revision', 'size_bytes', 'updated_at']);
    assert.equal(got.headers.etag, replaced.headers.etag);
  });

  test('rule 1: the name pattern and 64 characters (422)', async () => {
    for (const bad of ['Upper', 'a--b', '-a', 'a-', 'a_b', 'a'.repeat(65)]) {
      const res = await put(bad, { body: md(bad) });
      assert.equal(res.status, 422, bad);
      assert.ok(fields(res).includes('name'), bad);
    }
    const ok = 'a'.repeat(64);
    assert.equal((await put(ok, { body: md(ok) })).status, 201);
  });

  test('rule 2: SKILL.md at most 64 KiB, front matter with the path name and a description (422)', async () => {
    const name = skillName();
    for (const body of ['no front matter', md('other-name'), `---\nname: ${name}\n---\n`, `---\nname: ${name}\ndescription: ""\n---\n`, md(name, 'x', 'y'.repeat(64 * 1024)), md(name, '"an escaped NUL: \\0"')]) {
      const res = await put(name, { body });
      assert.equal(res.status, 422);
      assert.deepEqual(fields(res), ['body']);
    }
  });

  test('rule 3: files relative, not SKILL.md, no .., text, 64 KiB each, 20 at most, 256 KiB with SKILL.md (422)', async () => {
    const name = skillName();
    const cases: Array<[Record<string, string>, string]> = [
      [{ 'SKILL.md': 'x' }, 'resources.SKILL.md'],
      [{ '../escape.txt': 'x' }, 'resources.../escape.txt'],
      [{ '/etc/passwd': 'x' }, 'resources./etc/passwd'],
      [{ 'big.txt': 'x'.repeat(64 * 1024 + 1) }, 'resources.big.txt'],
      [Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`f${i}.txt`, 'x'])), 'resources'],
      [Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`f${i}.txt`, 'x'.repeat(64 * 1024)])), 'resources'],
    ];
    for (const [resources, field] of cases) {
      const res = await put(name, { body: md(name), resources });
      assert.equal(res.status, 422, field);
      assert.ok(fields(res).includes(field), `${field} in ${fields(res)}`);
    }
    // Not text: the kernel refuses NUL characters anywhere in a body (400 naming the field).
    const nul = await put(name, { body: md(name), resources: { 'bin.dat': 'a\u0000b' } });
    assert.equal(nul.status, 400);
    assert.ok(fields(nul).includes('resources.bin.dat'));
    const fine = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`dir/f${i}.txt`, 'x'.repeat(1000)]));
    assert.equal((await put(name, { body: md(name), resources: fine })).status, 201);
  });

  test('rule 4: the whole catalogue at most 768 KiB (422)', async () => {
    const t2 = await testApp();
    try {
      const chunk = Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`f${i}.txt`, 'x'.repeat(60 * 1024)]));
      let status = 201;
      let n = 0;
      while (status === 201 && n < 10) {
        const name = skillName();
        status = (await t2.request({ method: 'PUT', url: url(name), token: t2.adminToken, body: { body: md(name), resources: chunk } })).status;
        n++;
      }
      assert.equal(status, 422);
      assert.equal(n, 5, 'four skills of ~180 KiB fit in 768 KiB, the fifth does not');
      const total = await t2.db.selectFrom('platform_skills').select((eb) => eb.fn.sum<number>('size_bytes').as('n')).executeTakeFirstOrThrow();
      assert.ok(Number(total.n) <= 768 * 1024);
    } finally {
      await t2.close();
    }
  });

  test('the list shows no bodies, only file paths; pages by name', async () => {
    const name = skillName();
    await put(name, { body: md(name), resources: { 'b.txt': 'b', 'a.txt': 'a' } });
    const seen: Array<Record<string, unknown>> = [];
    let cursor: string | null = null;
    do {
      const res: any = await t.request({ method: 'GET', url: `/api/v1/skills?limit=2${cursor ? `&cursor=${cursor}` : ''}`, token: t.adminToken });
      assert.equal(res.status, 200);
      seen.push(...res.body.items);
      cursor = res.body.next_cursor;
    } while (cursor);
    const mine = seen.find((s) => s.name === name)!;
    assert.deepEqual(Object.keys(mine).sort(), ['description', 'files', 'name', 'revision', 'size_bytes', 'updated_at']);
    assert.deepEqual(mine.files, ['a.txt', 'b.txt']);
    const names = seen.map((s) => s.name as string);
    assert.deepEqual(names, [...names].sort());
  });

  test('DELETE needs If-Match (428, 412, 204), leaves a tombstone for the import; PUT again clears it', async () => {
    const name = skillName();
    const c = await put(name, { body: md(name) });
    assert.equal((await t.request({ method: 'DELETE', url: url(name), token: t.adminToken })).status, 428);
    assert.equal((await t.request({ method: 'DELETE', url: url(name), token: t.adminToken, headers: { 'if-match': '"1"' } })).status, 412);
    assert.equal((await t.request({ method: 'DELETE', url: url(name), token: t.adminToken, headers: { 'if-match': String(c.headers.etag) } })).status, 204);
    assert.equal((await t.request({ method: 'GET', url: url(name), token: t.adminToken })).status, 404);
    assert.equal((await t.request({ method: 'DELETE', url: url(name), token: t.adminToken, headers: { 'if-match': String(c.headers.etag) } })).status, 404);
    let state = await t.services.skills.importState();
    const tomb = state.deleted.find((d) => d.name === name)!;
    assert.ok(tomb.revision > c.body.revision, 'a deletion moves the catalogue revision on');
    assert.ok(!state.edited.includes(name));
    const again = await put(name, { body: md(name) });
    assert.equal(again.status, 201);
    assert.ok(again.body.revision > tomb.revision);
    state = await t.services.skills.importState();
    assert.ok(!state.deleted.some((d) => d.name === name));
    assert.ok(state.edited.includes(name));
  });

  test('audit events skill.create, skill.update, skill.delete', async () => {
    const name = skillName();
    const c = await put(name, { body: md(name) });
    const u = await put(name, { body: md(name, 'v2') }, { 'if-match': String(c.headers.etag) });
    await t.request({ method: 'DELETE', url: url(name), token: t.adminToken, headers: { 'if-match': String(u.headers.etag) } });
    const rows = await t.db.selectFrom('audit_log').select(['action', 'request_id']).where('target_type', '=', 'skill').where('target', '=', name).orderBy('id').execute();
    assert.deepEqual(rows.map((r) => r.action), ['skill.create', 'skill.update', 'skill.delete']);
    assert.equal(rows[0].request_id, c.headers['x-request-id']);
  });

  test('viewers and operators read; only admins write (403); bad bodies are 400', async () => {
    const name = skillName();
    const c = await put(name, { body: md(name) });
    for (const role of ['viewer', 'operator'] as const) {
      const u = await t.user(role);
      assert.equal((await t.request({ method: 'GET', url: '/api/v1/skills', token: u.token })).status, 200);
      assert.equal((await t.request({ method: 'GET', url: url(name), token: u.token })).status, 200);
      const n2 = skillName();
      assert.equal((await put(n2, { body: md(n2) }, {}, u.token)).status, 403);
      assert.equal((await t.request({ method: 'DELETE', url: url(name), token: u.token, headers: { 'if-match': String(c.headers.etag) } })).status, 403);
    }
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/skills' })).status, 401);
    const bad = await put(skillName(), { body: 5, resources: { a: 1 }, extra: true });
    assert.equal(bad.status, 400);
    for (const f of ['body', 'resources.a', 'extra']) assert.ok(fields(bad).includes(f), `${f} in ${fields(bad)}`);
    assert.equal((await t.request({ method: 'GET', url: url('Not-Valid'), token: t.adminToken })).status, 404);
  });

  test('concurrent creates of different skills get distinct revisions', async () => {
    const names = Array.from({ length: 4 }, skillName);
    const results = await Promise.all(names.map((n) => put(n, { body: md(n) })));
    assert.deepEqual(results.map((r) => r.status), [201, 201, 201, 201]);
    const revisions = results.map((r) => r.body.revision);
    assert.equal(new Set(revisions).size, 4);
  });
});
