import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { makeAgent as makeAgentIn } from '../../../test/factories.ts';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';
import { sniffImage } from './avatar.ts';

const V1 = '/api/v1';
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.from('rest-of-png')]);
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.from('jfif')]);
const GIF = Buffer.from('GIF89a....');
const WEBP = Buffer.concat([Buffer.from('RIFF'), Buffer.from([0x10, 0, 0, 0]), Buffer.from('WEBPVP8 ')]);

describe('agent avatars', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  const makeAgent = async () => (await makeAgentIn(t)).name;
  const put = (name: string, bytes: Buffer, opts: { type?: string; ifMatch?: string; token?: string } = {}) =>
    t.request({
      method: 'PUT',
      url: `${V1}/agents/${name}/avatar`,
      token: opts.token ?? t.adminToken,
      raw: bytes,
      headers: { 'content-type': opts.type ?? 'image/png', ...(opts.ifMatch ? { 'if-match': opts.ifMatch } : {}) },
    });
  const get = (name: string, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'GET', url: `${V1}/agents/${name}/avatar`, headers: { authorization: `Bearer ${t.adminToken}`, ...headers } });

  test('sniffs PNG, JPEG, GIF and WebP from the bytes', () => {
    assert.equal(sniffImage(PNG), 'image/png');
    assert.equal(sniffImage(JPEG), 'image/jpeg');
    assert.equal(sniffImage(GIF), 'image/gif');
    assert.equal(sniffImage(WEBP), 'image/webp');
    assert.equal(sniffImage(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>')), null);
    assert.equal(sniffImage(Buffer.from('RIFF....WAVE')), null);
    assert.equal(sniffImage(Buffer.alloc(0)), null);
  });

  test('PUT stores the image; GET returns the bytes with the sniffed type and an ETag; avatar_url points at it', async () => {
    const name = await makeAgent();
    const before = await t.request({ method: 'GET', url: `${V1}/agents/${name}`, token: t.adminToken });
    assert.equal(before.body.avatar_url, null);
    assert.equal((await get(name)).statusCode, 404);

    // The header says PNG, the bytes are a GIF: the bytes win.
    const res = await put(name, GIF, { type: 'image/png' });
    assert.equal(res.status, 204, res.text);
    const etag = String(res.headers.etag);
    const got = await get(name);
    assert.equal(got.statusCode, 200);
    assert.equal(got.headers['content-type'], 'image/gif');
    assert.equal(got.headers.etag, etag);
    assert.deepEqual(got.rawPayload, GIF);
    assert.equal((await get(name, { 'if-none-match': etag })).statusCode, 304);

    const agent = await t.request({ method: 'GET', url: `${V1}/agents/${name}`, token: t.adminToken });
    assert.notEqual(agent.headers.etag, before.headers.etag, 'the agent ETag changes with its avatar');
    const url = new URL(agent.body.avatar_url);
    assert.equal(url.origin, 'http://crewhouse.test');
    const viaUrl = await t.app.inject({ method: 'GET', url: url.pathname + url.search, headers: { authorization: `Bearer ${t.adminToken}` } });
    assert.equal(viaUrl.statusCode, 200);
    assert.deepEqual(viaUrl.rawPayload, GIF);
    const viewer = await t.user('viewer');
    assert.equal((await t.app.inject({ method: 'GET', url: url.pathname, headers: { authorization: `Bearer ${viewer.token}` } })).statusCode, 200);
    assert.equal((await t.app.inject({ method: 'GET', url: url.pathname })).statusCode, 401);

    const audit = await t.db.selectFrom('audit_log').select(['action', 'details']).where('target', '=', name).where('action', '=', 'agent.avatar.update').execute();
    assert.equal(audit.length, 1);
    assert.deepEqual((audit[0].details as { media_type: string }).media_type, 'image/gif');
  });

  test('each supported format is accepted under any image/* type', async () => {
    for (const [bytes, type] of [[PNG, 'image/png'], [JPEG, 'image/jpeg'], [WEBP, 'image/webp']] as const) {
      const name = await makeAgent();
      assert.equal((await put(name, bytes, { type: 'image/x-anything' })).status, 204);
      assert.equal((await get(name)).headers['content-type'], type);
    }
  });

  test('415 for bytes that are not PNG/JPEG/GIF/WebP whatever the header, and for a non-image content type', async () => {
    const name = await makeAgent();
    const svg = await put(name, Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'), { type: 'image/svg+xml' });
    assert.equal(svg.status, 415);
    assert.match(String(svg.headers['content-type']), /problem\+json/);
    assert.equal((await put(name, Buffer.from('hello'), { type: 'image/png' })).status, 415);
    assert.equal((await put(name, Buffer.alloc(0), { type: 'image/png' })).status, 415);
    const octets = await put(name, PNG, { type: 'application/octet-stream' });
    assert.equal(octets.status, 415);
    // The refusal says what this route takes, not the JSON every other route does.
    assert.match(JSON.parse(octets.text).detail, /image\/\*/);
    assert.doesNotMatch(JSON.parse(octets.text).detail, /application\/json/);
    assert.equal((await put(name, Buffer.from('{"a":1}'), { type: 'application/json' })).status, 415);
    assert.equal((await get(name)).statusCode, 404);
  });

  test('413 beyond 512 KiB; exactly 512 KiB is accepted', async () => {
    const name = await makeAgent();
    const big = Buffer.concat([PNG, Buffer.alloc(512 * 1024 + 1 - PNG.length)]);
    const res = await put(name, big);
    assert.equal(res.status, 413);
    assert.match(String(res.headers['content-type']), /problem\+json/);
    const exact = Buffer.concat([PNG, Buffer.alloc(512 * 1024 - PNG.length)]);
    assert.equal((await put(name, exact)).status, 204);
    assert.equal((await get(name)).rawPayload.length, 512 * 1024);
  });

  test('replacing needs If-Match: 428 without, 412 stale, 204 fresh; 404 for an unknown agent', async () => {
    const name = await makeAgent();
    const first = await put(name, PNG);
    const etag = String(first.headers.etag);
    assert.equal((await put(name, JPEG)).status, 428);
    assert.equal((await put(name, JPEG, { ifMatch: '"1"' })).status, 412);
    const ok = await put(name, JPEG, { ifMatch: etag });
    assert.equal(ok.status, 204);
    assert.notEqual(ok.headers.etag, etag);
    assert.equal((await get(name)).headers['content-type'], 'image/jpeg');
    assert.equal((await put(name, GIF, { ifMatch: etag })).status, 412);
    // If-Match on a first avatar matches nothing.
    const fresh = await makeAgent();
    assert.equal((await put(fresh, PNG, { ifMatch: etag })).status, 412);
    assert.equal((await put(uniq('none'), PNG)).status, 404);
    assert.equal((await get(uniq('none'))).statusCode, 404);
  });

  test("a first avatar takes the agent's fresh ETag as If-Match (412 when stale); a missing avatar's 404 says the agent has none", async () => {
    const name = await makeAgent();
    const missing = await get(name);
    assert.equal(missing.statusCode, 404);
    assert.equal(missing.json().detail, `the agent "${name}" has no avatar yet; an admin sets one`);
    const agentEtag = String((await t.request({ method: 'GET', url: `${V1}/agents/${name}`, token: t.adminToken })).headers.etag);
    const res = await put(name, PNG, { ifMatch: agentEtag });
    assert.equal(res.status, 204, res.text);
    assert.equal((await get(name)).statusCode, 200);
    // The agent's ETag changed with its avatar_url: the old one is stale for another agent's first avatar too.
    const other = await makeAgent();
    const otherEtag = String((await t.request({ method: 'GET', url: `${V1}/agents/${other}`, token: t.adminToken })).headers.etag);
    await t.request({ method: 'PATCH', url: `${V1}/agents/${other}`, token: t.adminToken, body: { description: 'changed' }, headers: { 'if-match': otherEtag } });
    assert.equal((await put(other, PNG, { ifMatch: otherEtag })).status, 412);
  });

  test('viewers and operators get 403 on PUT; deleting the agent removes its avatar', async () => {
    const name = await makeAgent();
    for (const role of ['viewer', 'operator'] as const) {
      const u = await t.user(role);
      assert.equal((await put(name, PNG, { token: u.token })).status, 403);
    }
    assert.equal((await put(name, PNG)).status, 204);
    const etag = String((await t.request({ method: 'GET', url: `${V1}/agents/${name}`, token: t.adminToken })).headers.etag);
    assert.equal((await t.request({ method: 'DELETE', url: `${V1}/agents/${name}`, token: t.adminToken, headers: { 'if-match': etag } })).status, 204);
    const left = await t.db.selectFrom('agent_avatars').select('agent_name').where('agent_name', '=', name).execute();
    assert.deepEqual(left, []);
  });

  test('an image body is accepted on the avatar route only', async () => {
    const res = await t.request({ method: 'POST', url: `${V1}/agents`, token: t.adminToken, raw: PNG, headers: { 'content-type': 'image/png' } });
    assert.equal(res.status, 415);
  });
});
