import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { systemActor } from '../../audit/audit.ts';
import { makeAgent as makeAgentIn, makeEnvironment, makeTeam, makeTemplate } from '../../../test/factories.ts';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';
import { documentsForRole } from './index.ts';

const V1 = '/api/v1';
const KiB = 1024;

describe('context documents', () => {
  let t: TestApp;
  before(async () => {
    // Teams (the owners of team documents) need the model proxy.
    t = await testApp({ modelProxy: true });
  });
  after(() => t.close());

  const makeAgent = async () => (await makeAgentIn(t)).name;
  const put = (agent: string, doc: string, body: Record<string, unknown>, opts: { ifMatch?: string; token?: string } = {}) =>
    t.request({ method: 'PUT', url: `${V1}/agents/${agent}/documents/${doc}`, token: opts.token ?? t.adminToken, body, headers: opts.ifMatch ? { 'if-match': opts.ifMatch } : {} });

  test('PUT creates (201) with size_bytes and sha256 computed; GET reads it with content and an ETag; audited', async () => {
    const agent = await makeAgent();
    const content = '# Style\nUse tabs. Ünïcode ✓\n';
    const res = await put(agent, 'style.md', { media_type: 'text/markdown', description: 'house style', content });
    assert.equal(res.status, 201, res.text);
    const b = res.body;
    assert.equal(b.scope, 'agent');
    assert.equal(b.owner, agent);
    assert.equal(b.name, 'style.md');
    assert.equal(b.media_type, 'text/markdown');
    assert.equal(b.description, 'house style');
    assert.equal(b.size_bytes, Buffer.byteLength(content));
    assert.equal(b.sha256, (await import('node:crypto')).createHash('sha256').update(content).digest('hex'));
    assert.equal(b.created_by, 'admin');
    assert.equal(b.content, content);
    assert.match(String(res.headers.etag), /^"\d+"$/);

    const got = await t.request({ method: 'GET', url: `${V1}/agents/${agent}/documents/style.md`, token: t.adminToken });
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, b);
    assert.equal(got.headers.etag, res.headers.etag);

    const list = await t.request({ method: 'GET', url: `${V1}/agents/${agent}/documents`, token: t.adminToken });
    assert.equal(list.status, 200);
    assert.equal(list.body.items.length, 1);
    assert.equal(list.body.items[0].content, undefined);
    assert.deepEqual(Object.keys(list.body.items[0]).sort(), ['created_at', 'created_by', 'description', 'media_type', 'name', 'owner', 'scope', 'sha256', 'size_bytes', 'updated_at']);

    const audit = await t.db.selectFrom('audit_log').select(['action', 'details']).where('target', '=', `agent:${agent}/style.md`).execute();
    assert.deepEqual(audit.map((a) => a.action), ['document.create']);
    assert.equal(JSON.stringify(audit[0].details).includes('Use tabs'), false, 'content stays out of the audit log');
  });

  test('replace needs If-Match and answers 200; 412 when stale; DELETE needs If-Match and answers 204', async () => {
    const agent = await makeAgent();
    const created = await put(agent, 'notes.txt', { media_type: 'text/plain', content: 'one' });
    const etag = String(created.headers.etag);
    assert.equal((await put(agent, 'notes.txt', { media_type: 'text/plain', content: 'two' })).status, 428);
    const replaced = await put(agent, 'notes.txt', { media_type: 'text/plain', content: 'two' }, { ifMatch: etag });
    assert.equal(replaced.status, 200);
    assert.equal(replaced.body.content, 'two');
    assert.equal(replaced.body.created_at, created.body.created_at);
    assert.notEqual(replaced.headers.etag, etag);
    assert.equal((await put(agent, 'notes.txt', { media_type: 'text/plain', content: 'three' }, { ifMatch: etag })).status, 412);
    // If-Match on a document that does not exist matches nothing.
    assert.equal((await put(agent, 'other.txt', { media_type: 'text/plain', content: 'x' }, { ifMatch: etag })).status, 412);

    const url = `${V1}/agents/${agent}/documents/notes.txt`;
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken })).status, 428);
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': etag } })).status, 412);
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': String(replaced.headers.etag) } })).status, 204);
    assert.equal((await t.request({ method: 'GET', url, token: t.adminToken })).status, 404);
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': String(replaced.headers.etag) } })).status, 404);
    const actions = await t.db.selectFrom('audit_log').select('action').where('target', '=', `agent:${agent}/notes.txt`).orderBy('id').execute();
    assert.deepEqual(actions.map((a) => a.action), ['document.create', 'document.update', 'document.delete']);
  });

  test('each rule names its field and limit: media type and description by the schema (400), name and content by the service (422)', async () => {
    const agent = await makeAgent();
    const cases: Array<[string, Record<string, unknown>, string, RegExp, number]> = [
      ['Bad-Name.md', { media_type: 'text/markdown', content: 'x' }, 'name', /lowercase letters, digits, "\.", "_" and "-", starting with a letter or digit/, 422],
      ['.hidden', { media_type: 'text/markdown', content: 'x' }, 'name', /must be lowercase letters/, 422],
      ['a'.repeat(64), { media_type: 'text/markdown', content: 'x' }, 'name', /63 characters/, 422],
      ['img.png', { media_type: 'image/png', content: 'x' }, 'media_type', /"text\/markdown", "text\/plain", "text\/csv", "application\/json", "application\/yaml"/, 400],
      ['d.md', { media_type: 'text/markdown', description: 'd'.repeat(201), content: 'x' }, 'description', /200 characters/, 400],
      ['e.md', { media_type: 'text/markdown', content: '' }, 'content', /at least 1 byte/, 422],
      ['big.md', { media_type: 'text/markdown', content: 'x'.repeat(256 * KiB + 1) }, 'content', /256 KiB/, 422],
      ['wide.md', { media_type: 'text/markdown', content: 'é'.repeat(128 * KiB + 1) }, 'content', /256 KiB/, 422],
      // Half of a surrogate pair is refused for every route by the kernel, before the service (400 naming the field).
      ['sur.txt', { media_type: 'text/plain', content: 'a\ud800b' }, 'content', /half of a surrogate pair/, 400],
    ];
    for (const [name, body, field, message, status] of cases) {
      const res = await put(agent, name, body);
      assert.equal(res.status, status, `${name}: ${res.text.slice(0, 300)}`);
      const err = res.body.errors.find((e: { field: string }) => e.field === field);
      assert.ok(err, `${name}: ${field} in ${res.text.slice(0, 300)}`);
      assert.match(err.message, message);
    }
    // NUL is refused for every route by the kernel (400 naming the field) and by the service for its other callers.
    const nul = await put(agent, 'nul.txt', { media_type: 'text/plain', content: 'a\u0000b' });
    assert.equal(nul.status, 400);
    assert.equal(nul.body.errors[0].field, 'content');
    assert.match(nul.body.errors[0].message, /NUL/);
    await assert.rejects(t.services.documents.put(systemActor('test'), 'agent', agent, 'nul.txt', null, { media_type: 'text/plain', content: 'a\u0000b' }), (e: { status: number; errors: Array<{ field: string }> }) => e.status === 422 && e.errors[0].field === 'content');
    assert.equal((await put(agent, 'max.md', { media_type: 'text/markdown', description: 'd'.repeat(200), content: 'x'.repeat(256 * KiB) })).status, 201);
    // 200 characters are 200 whatever their UTF-16 length: an emoji counts once, for the schema and the service alike.
    const emoji = await put(agent, 'emoji.md', { media_type: 'text/markdown', description: '\u{1F600}'.repeat(200), content: 'x' });
    assert.equal(emoji.status, 201, emoji.text);
    const emojiOver = await put(agent, 'emoji2.md', { media_type: 'text/markdown', description: '\u{1F600}'.repeat(201), content: 'x' });
    assert.deepEqual([emojiOver.status, emojiOver.body.errors[0].field], [400, 'description']);
    for (const mt of ['text/plain', 'text/csv', 'application/json', 'application/yaml']) {
      assert.equal((await put(agent, `f-${mt.replace('/', '.')}`, { media_type: mt, content: '1' })).status, 201);
    }
    const schema = await put(agent, 'x.md', { media_type: 'text/markdown' });
    assert.equal(schema.status, 400);
    assert.equal(schema.body.errors[0].field, 'content');
    assert.equal((await put(agent, 'x.md', { media_type: 'text/markdown', content: 'x', extra: true })).status, 400);
  });

  test('an owner holds at most 20 documents and 384 KiB in total', async () => {
    const agent = await makeAgent();
    for (let i = 0; i < 20; i++) assert.equal((await put(agent, `d${i}.txt`, { media_type: 'text/plain', content: 'x' })).status, 201);
    const over = await put(agent, 'd20.txt', { media_type: 'text/plain', content: 'x' });
    assert.equal(over.status, 422);
    assert.equal(over.body.errors[0].field, 'name');
    assert.match(over.body.errors[0].message, /20/);
    // Replacing one of the 20 is still fine.
    const etag = String((await t.request({ method: 'GET', url: `${V1}/agents/${agent}/documents/d0.txt`, token: t.adminToken })).headers.etag);
    assert.equal((await put(agent, 'd0.txt', { media_type: 'text/plain', content: 'y' }, { ifMatch: etag })).status, 200);

    const other = await makeAgent();
    assert.equal((await put(other, 'a.txt', { media_type: 'text/plain', content: 'a'.repeat(200 * KiB) })).status, 201);
    const b = await put(other, 'b.txt', { media_type: 'text/plain', content: 'b'.repeat(184 * KiB) });
    assert.equal(b.status, 201);
    const c = await put(other, 'c.txt', { media_type: 'text/plain', content: 'c' });
    assert.equal(c.status, 422);
    assert.equal(c.body.errors[0].field, 'content');
    assert.match(c.body.errors[0].message, /384 KiB/);
    // A replacement counts its new size, not old plus new.
    const bEtag = String(b.headers.etag);
    assert.equal((await put(other, 'b.txt', { media_type: 'text/plain', content: 'B'.repeat(184 * KiB) }, { ifMatch: bEtag })).status, 200);
  });

  test('concurrent creates cannot pass the per-owner count together', async () => {
    const agent = await makeAgent();
    for (let i = 0; i < 18; i++) await put(agent, `p${i}.txt`, { media_type: 'text/plain', content: 'x' });
    const results = await Promise.all([0, 1, 2, 3].map((i) => put(agent, `q${i}.txt`, { media_type: 'text/plain', content: 'x' })));
    assert.deepEqual(results.map((r) => r.status).sort(), [201, 201, 422, 422]);
  });

  test('unknown agent is 404 on every document route; list pages by name', async () => {
    const ghost = uniq('ghost');
    assert.equal((await t.request({ method: 'GET', url: `${V1}/agents/${ghost}/documents`, token: t.adminToken })).status, 404);
    assert.equal((await t.request({ method: 'GET', url: `${V1}/agents/${ghost}/documents/a.md`, token: t.adminToken })).status, 404);
    assert.equal((await put(ghost, 'a.md', { media_type: 'text/markdown', content: 'x' })).status, 404);
    assert.equal((await t.request({ method: 'DELETE', url: `${V1}/agents/${ghost}/documents/a.md`, token: t.adminToken, headers: { 'if-match': '"1"' } })).status, 404);

    const agent = await makeAgent();
    for (const n of ['c.md', 'a.md', 'b.md']) await put(agent, n, { media_type: 'text/markdown', content: n });
    const p1 = await t.request({ method: 'GET', url: `${V1}/agents/${agent}/documents?limit=2`, token: t.adminToken });
    assert.deepEqual(p1.body.items.map((d: { name: string }) => d.name), ['a.md', 'b.md']);
    const p2 = await t.request({ method: 'GET', url: `${V1}/agents/${agent}/documents?limit=2&cursor=${p1.body.next_cursor}`, token: t.adminToken });
    assert.deepEqual(p2.body.items.map((d: { name: string }) => d.name), ['c.md']);
    assert.equal(p2.body.next_cursor, null);
    assert.equal((await t.request({ method: 'GET', url: `${V1}/agents/${agent}/documents?cursor=WzFd`, token: t.adminToken })).status, 400);
  });

  test('viewers read documents; viewers and operators get 403 on agent document writes', async () => {
    const agent = await makeAgent();
    const created = await put(agent, 'r.md', { media_type: 'text/markdown', content: 'x' });
    for (const role of ['viewer', 'operator'] as const) {
      const u = await t.user(role);
      assert.equal((await t.request({ method: 'GET', url: `${V1}/agents/${agent}/documents/r.md`, token: u.token })).status, 200);
      assert.equal((await put(agent, 'r.md', { media_type: 'text/markdown', content: 'y' }, { token: u.token, ifMatch: String(created.headers.etag) })).status, 403);
      assert.equal((await put(agent, 'new.md', { media_type: 'text/markdown', content: 'y' }, { token: u.token })).status, 403);
      const del = await t.request({ method: 'DELETE', url: `${V1}/agents/${agent}/documents/r.md`, token: u.token, headers: { 'if-match': String(created.headers.etag) } });
      assert.equal(del.status, 403);
    }
  });

  test('the worker sees agent documents first, then team documents; a team document replaces the agent one of its name', async () => {
    const agent = await makeAgent();
    const env = await makeEnvironment(t);
    const template = await makeTemplate(t, { roles: { lead: { agent, model: 'fast', vm: env.name } }, pipeline: {} }, ['lead']);
    const team = (await makeTeam(t, { template: template.name })).name;
    const roleAgent = (await t.request({ method: 'GET', url: `${V1}/teams/${team}`, token: t.adminToken })).body.role_settings[0].agent;
    assert.equal(roleAgent, agent, "the team's role runs the agent");
    const putTeam = (owner: string, doc: string, body: Record<string, unknown>, opts: { ifMatch?: string; token?: string } = {}) =>
      t.request({ method: 'PUT', url: `${V1}/teams/${owner}/documents/${doc}`, token: opts.token ?? t.adminToken, body, headers: opts.ifMatch ? { 'if-match': opts.ifMatch } : {} });

    await put(agent, 'style.md', { media_type: 'text/markdown', description: 'agent style', content: 'agent style' });
    await put(agent, 'api.json', { media_type: 'application/json', description: 'api', content: '{}' });
    await put(agent, 'zeta.txt', { media_type: 'text/plain', content: 'z' });
    const operator = await t.user('operator');
    const teamStyle = await putTeam(team, 'style.md', { media_type: 'text/markdown', description: 'team style', content: 'team style!' }, { token: operator.token });
    assert.equal(teamStyle.status, 201, teamStyle.text);
    assert.deepEqual([teamStyle.body.scope, teamStyle.body.owner, teamStyle.body.created_by], ['team', team, operator.name]);
    const arch = await t.services.documents.put(systemActor('test'), 'team', team, 'arch.md', null, { media_type: 'text/markdown', content: 'architecture' });
    assert.equal(arch.created, true);
    // Another team's and another agent's documents stay out.
    const otherTeam = (await makeTeam(t)).name;
    assert.equal((await putTeam(otherTeam, 'other.md', { media_type: 'text/markdown', content: 'no' })).status, 201);
    await put(await makeAgent(), 'other.md', { media_type: 'text/markdown', content: 'no' });
    // Only a live team owns documents.
    const ghost = uniq('team');
    assert.equal((await putTeam(ghost, 'a.md', { media_type: 'text/markdown', content: 'x' })).status, 404);
    await assert.rejects(t.services.documents.put(systemActor('test'), 'team', ghost, 'a.md', null, { media_type: 'text/markdown', content: 'x' }), (e: { status: number }) => e.status === 404);

    const seen = await documentsForRole(t.db, { agent, team });
    assert.deepEqual(
      seen.map((d) => [d.path, d.scope, d.description, d.media_type, d.size_bytes]),
      [
        ['/workspace/context/api.json', 'agent', 'api', 'application/json', 2],
        ['/workspace/context/zeta.txt', 'agent', '', 'text/plain', 1],
        ['/workspace/context/arch.md', 'team', '', 'text/markdown', 12],
        ['/workspace/context/style.md', 'team', 'team style', 'text/markdown', 11],
      ],
    );
    assert.equal(seen.find((d) => d.name === 'style.md')?.content, 'team style!');
    const alone = await t.services.documents.forRole({ agent, team: null });
    assert.deepEqual(alone.map((d) => d.name), ['api.json', 'style.md', 'zeta.txt']);
    assert.deepEqual(await documentsForRole(t.db, { agent: uniq('nobody'), team: null }), []);

    // Archiving a team removes its documents (the teams module calls deleteAllOf in its transaction), and only its own.
    const teamDocs = (owner: string) => t.db.selectFrom('context_documents').select('name').where('scope', '=', 'team').where('owner', '=', owner).orderBy('name').execute();
    assert.deepEqual((await teamDocs(team)).map((d) => d.name), ['arch.md', 'style.md']);
    const etag = String((await t.request({ method: 'GET', url: `${V1}/teams/${team}`, token: t.adminToken })).headers.etag);
    const archived = await t.request({ method: 'DELETE', url: `${V1}/teams/${team}`, token: t.adminToken, headers: { 'if-match': etag } });
    assert.equal(archived.status, 204, archived.text);
    assert.deepEqual(await teamDocs(team), []);
    assert.deepEqual((await teamDocs(otherTeam)).map((d) => d.name), ['other.md']);
    assert.deepEqual((await documentsForRole(t.db, { agent, team })).map((d) => d.scope), ['agent', 'agent', 'agent']);
    // An archived team owns nothing any more.
    assert.equal((await putTeam(team, 'late.md', { media_type: 'text/markdown', content: 'x' })).status, 404);
  });
});
