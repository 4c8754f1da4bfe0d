import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertZulipResponse } from '../../../test/zulip-openapi.ts';
import { chatTestServer, type Account, type ChatTestServer } from '../chat.testkit.ts';

describe('chat muted users', () => {
  let t: ChatTestServer;
  let me: Account;
  let loud: Account;
  before(async () => {
    t = await chatTestServer();
    me = await t.account(400);
    loud = await t.account(400);
  });
  after(() => t.close());

  const mute = (who: Account, id: number | string, method = 'POST') => t.raw(method, `/users/me/muted_users/${id}`, { auth: who });

  test('muting is stored, listed in /register, told by events, and the muted person\'s messages arrive read', async () => {
    const earlier = await t.raw('POST', '/messages', { auth: loud, form: { type: 'direct', to: JSON.stringify([me.id]), content: 'before muting' } });
    assert.equal(earlier.status, 200, JSON.stringify(earlier.body));
    const reg = await t.raw('POST', '/register', { auth: me, form: { event_types: '["muted_users", "update_message_flags"]' } });
    assert.deepEqual(reg.body.muted_users, []);

    const res = await mute(me, loud.id);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertZulipResponse('POST', '/users/me/muted_users/{muted_user_id}', res.body);
    const events = await t.events(me, reg.body.queue_id, 2, (e) => e.type !== 'heartbeat');
    const muted = events.find((e) => e.type === 'muted_users');
    assert.deepEqual(muted.muted_users.map((m: any) => m.id), [loud.id]);
    assert.equal(typeof muted.muted_users[0].timestamp, 'number');
    // What they sent so far is read, and so is what they send now.
    const flags = events.find((e) => e.type === 'update_message_flags');
    assert.deepEqual([flags.op, flags.flag, flags.messages], ['add', 'read', [earlier.body.id]]);
    const later = await t.raw('POST', '/messages', { auth: loud, form: { type: 'direct', to: JSON.stringify([me.id]), content: 'after muting' } });
    const got = await t.raw('GET', `/messages/${later.body.id}`, { auth: me });
    assert.ok(got.body.message.flags.includes('read'), JSON.stringify(got.body.message.flags));

    const again = await t.raw('POST', '/register', { auth: me, form: { fetch_event_types: '["muted_users"]' } });
    assert.deepEqual(again.body.muted_users.map((m: any) => m.id), [loud.id]);

    const unmuted = await mute(me, loud.id, 'DELETE');
    assert.equal(unmuted.status, 200, JSON.stringify(unmuted.body));
    assertZulipResponse('DELETE', '/users/me/muted_users/{muted_user_id}', unmuted.body);
    assert.deepEqual((await t.raw('POST', '/register', { auth: me, form: { fetch_event_types: '["muted_users"]' } })).body.muted_users, []);
    const unread = await t.raw('POST', '/messages', { auth: loud, form: { type: 'direct', to: JSON.stringify([me.id]), content: 'unmuted now' } });
    assert.ok(!(await t.raw('GET', `/messages/${unread.body.id}`, { auth: me })).body.message.flags.includes('read'));
  });

  test("Zulip's errors", async () => {
    const bot = await t.account(400, { bot: { type: 1, ownerId: me.id } });
    const cases: Array<[string, number | string, string]> = [
      ['POST', me.id, 'Cannot mute self'],
      ['POST', 99999999, 'No such user'],
      ['DELETE', loud.id, 'User is not muted'],
      ['DELETE', 99999999, 'No such user'],
    ];
    for (const [method, id, msg] of cases) {
      const res = await mute(me, id, method);
      assert.deepEqual([res.status, res.body.msg, res.body.code], [400, msg, 'BAD_REQUEST'], `${method} ${id}`);
    }
    // Bots may be muted, as Zulip allows.
    assert.equal((await mute(me, bot.id)).status, 200);
    assert.equal((await mute(me, loud.id)).status, 200);
    const twice = await mute(me, loud.id);
    assert.deepEqual([twice.status, twice.body.msg], [400, 'User already muted']);
    assert.equal((await mute(me, 'abc')).status, 404);
  });
});
