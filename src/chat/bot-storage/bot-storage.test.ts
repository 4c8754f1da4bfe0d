import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { chatTestServer, type ChatTestServer } from '../chat.testkit.ts';

describe('chat bot storage', () => {
  let t: ChatTestServer;
  before(async () => {
    t = await chatTestServer();
  });
  after(() => t.close());

  const bot = () => t.account(400, { bot: { type: 1, ownerId: t.owner.id } });

  test('bot accounts only (feature level 494): people get PERMISSION_DENIED', async () => {
    for (const method of ['PUT', 'GET', 'DELETE']) {
      const res = await t.owner.client.callEndpoint('/bot_storage', method, method === 'PUT' ? { storage: JSON.stringify({ a: 'b' }) } : {});
      assert.equal(res.code, 'PERMISSION_DENIED', method);
      assert.equal(res.result, 'error');
    }
  });

  test('PUT and GET round-trip; DELETE of named keys is all or nothing', async () => {
    const b = await bot();
    assert.equal((await b.client.callEndpoint('/bot_storage', 'PUT', { storage: JSON.stringify({ a: '1', b: '2', c: '3' }) })).result, 'success');
    assert.deepEqual((await b.client.callEndpoint('/bot_storage', 'GET')).storage, { a: '1', b: '2', c: '3' });
    assert.deepEqual((await b.client.callEndpoint('/bot_storage', 'GET', { keys: JSON.stringify(['b']) })).storage, { b: '2' });
    const miss = await b.client.callEndpoint('/bot_storage', 'DELETE', { keys: JSON.stringify(['a', 'nope']) });
    assert.deepEqual(miss, { result: 'error', msg: 'Key does not exist.', code: 'BAD_REQUEST' });
    assert.deepEqual((await b.client.callEndpoint('/bot_storage', 'GET')).storage, { a: '1', b: '2', c: '3' });
    assert.equal((await b.client.callEndpoint('/bot_storage', 'DELETE', { keys: JSON.stringify(['a']) })).result, 'success');
    assert.deepEqual((await b.client.callEndpoint('/bot_storage', 'GET')).storage, { b: '2', c: '3' });
    const bad = await b.client.callEndpoint('/bot_storage', 'PUT', { storage: JSON.stringify({ a: 1 }) });
    assert.equal(bad.msg, 'storage["a"] is not a string');
  });

  test('DELETE without keys removes all of the bot\'s data, and only its own', async () => {
    const b1 = await bot();
    const b2 = await bot();
    await b1.client.callEndpoint('/bot_storage', 'PUT', { storage: JSON.stringify({ x: '1', y: '2' }) });
    await b2.client.callEndpoint('/bot_storage', 'PUT', { storage: JSON.stringify({ x: 'other' }) });
    assert.equal((await b1.client.callEndpoint('/bot_storage', 'DELETE')).result, 'success');
    assert.deepEqual((await b1.client.callEndpoint('/bot_storage', 'GET')).storage, {});
    assert.deepEqual((await b2.client.callEndpoint('/bot_storage', 'GET')).storage, { x: 'other' });
  });
});
