import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertZulipResponse } from '../../../test/zulip-openapi.ts';
import { chatTestServer, type ChatTestServer } from '../chat.testkit.ts';

describe('chat channels and topic visibility', () => {
  let t: ChatTestServer;
  let general: number;
  let secret: number;
  before(async () => {
    t = await chatTestServer();
    const res = await t.owner.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'general', description: 'All' }]) });
    assert.deepEqual(res.subscribed, { [String(t.owner.id)]: ['general'] });
    await t.owner.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'secret' }]), invite_only: 'true' });
    general = (await t.owner.client.streams.getStreamId('general')).stream_id;
    secret = (await t.owner.client.streams.getStreamId('secret')).stream_id;
  });
  after(() => t.close());

  const mute = (who: { client: any }, params: Record<string, unknown>) => who.client.callEndpoint('/users/me/subscriptions/muted_topics', 'PATCH', params);
  const topics = async (who: { client: any }) => (await who.client.callEndpoint('/user_topics', 'GET')).user_topics;

  test('zulip-js creates, joins, lists and leaves channels', async () => {
    const member = await t.account(400);
    const joined = await member.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'General' }]) });
    assert.deepEqual(joined.subscribed, { [String(member.id)]: ['general'] });
    const again = await member.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'general' }]) });
    assert.deepEqual(again.already_subscribed, { [String(member.id)]: ['general'] });
    const denied = await member.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'secret' }]) });
    assert.equal(denied.msg, 'Unable to access channel (secret).');
    const mine = await member.client.streams.subscriptions.retrieve();
    assert.deepEqual(mine.subscriptions.map((s: any) => s.name), ['general']);
    // Zulip's Subscription objects, as clients read them (a color to draw the channel in, its muting), and subscribers only when asked for.
    const [sub] = mine.subscriptions;
    assert.match(sub.color, /^#[0-9a-f]{6}$/i);
    assert.deepEqual([sub.is_muted, sub.in_home_view, sub.pin_to_top, sub.subscribers], [false, true, false, undefined]);
    const withSubscribers = await t.raw('GET', '/users/me/subscriptions', { auth: member, query: { include_subscribers: 'true' } });
    assert.equal(withSubscribers.status, 200, JSON.stringify(withSubscribers.body));
    assert.equal(withSubscribers.body.ignored_parameters_unsupported, undefined, 'include_subscribers is read');
    const subscribers = withSubscribers.body.subscriptions.find((s: any) => s.name === 'general').subscribers;
    assert.ok(subscribers.includes(member.id) && subscribers.includes(t.owner.id), JSON.stringify(subscribers));
    const visible = await member.client.streams.retrieve();
    assert.deepEqual(visible.streams.map((s: any) => s.name), ['general']);
    const left = await member.client.users.me.subscriptions.remove({ subscriptions: JSON.stringify(['general']) });
    assert.deepEqual(left.removed, ['general']);
  });

  test('principals: members subscribe others (by id or email) to channels they reach; administrators to any; guests to none', async () => {
    const member = await t.account(400);
    const friend = await t.account(400);
    const guest = await t.account(600);
    const subscribe = async (who: typeof member, params: Record<string, unknown>) => {
      const form = Object.fromEntries(Object.entries(params).map(([k, v]) => [k, JSON.stringify(v)]));
      const res = await t.raw('POST', '/users/me/subscriptions', { auth: who, form });
      if (res.status === 200) assertZulipResponse('POST', '/users/me/subscriptions', res.body);
      return res;
    };
    const queue = (await t.raw('POST', '/register', { auth: friend, form: { event_types: '["subscription"]' } })).body;
    await subscribe(member, { subscriptions: [{ name: 'general' }] });
    const added = await subscribe(member, { subscriptions: [{ name: 'general' }, { name: 'principals-new' }], principals: [friend.id, member.id] });
    assert.equal(added.status, 200, JSON.stringify(added.body));
    assert.equal(added.body.ignored_parameters_unsupported, undefined, 'principals is read');
    assert.deepEqual(added.body.subscribed, { [String(friend.id)]: ['general', 'principals-new'], [String(member.id)]: ['principals-new'] });
    assert.deepEqual(added.body.already_subscribed, { [String(member.id)]: ['general'] });
    // Long-poll until the friend's subscription event arrives (events may come in more than one answer).
    let add: any;
    for (let last = -1; !add; ) {
      const polled = await t.raw('GET', '/events', { auth: friend, query: { queue_id: queue.queue_id, last_event_id: String(last) } });
      assert.equal(polled.status, 200, JSON.stringify(polled.body));
      add = polled.body.events.find((e: any) => e.type === 'subscription' && e.op === 'add');
      last = Math.max(last, ...polled.body.events.map((e: any) => e.id));
    }
    assert.deepEqual(add.subscriptions.map((s: any) => s.name), ['general', 'principals-new']);
    const mine = await friend.client.streams.subscriptions.retrieve();
    assert.ok(mine.subscriptions.some((s: any) => s.name === 'principals-new'));
    // By email, already there.
    const byEmail = await subscribe(member, { subscriptions: [{ name: 'general' }], principals: [friend.email] });
    assert.deepEqual([byEmail.body.subscribed, byEmail.body.already_subscribed], [{}, { [String(friend.id)]: ['general'] }]);
    // A private channel: not for a member outside it, yes for an administrator outside it.
    await subscribe(member, { subscriptions: [{ name: 'principals-private' }], invite_only: true });
    assert.equal((await subscribe(friend, { subscriptions: [{ name: 'principals-private' }], principals: [guest.id] })).body.msg, 'Unable to access channel (principals-private).');
    const byAdmin = await subscribe(t.owner, { subscriptions: [{ name: 'principals-private' }], principals: [friend.id] });
    assert.deepEqual(byAdmin.body.subscribed, { [String(friend.id)]: ['principals-private'] });
    // Guests subscribe no one else; principals must be active people of the organization.
    const refused = await subscribe(guest, { subscriptions: [{ name: 'general' }], principals: [friend.id] });
    assert.deepEqual([refused.status, refused.body.msg], [400, 'Insufficient permission']);
    assert.equal((await subscribe(member, { subscriptions: [{ name: 'general' }], principals: [987654] })).body.msg, 'No such user: 987654 (give the user ID of an active member of this organization)');
    await t.owner.client.callEndpoint(`/users/${guest.id}`, 'DELETE');
    assert.equal((await subscribe(member, { subscriptions: [{ name: 'general' }], principals: [guest.email] })).body.msg, `No such user: ${guest.email} (give the email of an active member of this organization)`);
    assert.equal((await subscribe(member, { subscriptions: [{ name: 'general' }], principals: [friend.id, friend.email] })).body.msg, 'principals is not a list of user IDs or a list of emails');
  });

  test('GET /streams filters as Zulip: public and subscribed by default, archived left out, include_all for administrators', async () => {
    const member = await t.account(400);
    await t.owner.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'filter-pub' }, { name: 'filter-old' }]) });
    await t.owner.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'filter-priv' }]), invite_only: 'true' });
    await member.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'filter-mine' }]), invite_only: 'true' });
    await t.db.updateTable('chat_streams').set({ is_archived: true }).where('name', '=', 'filter-old').execute();
    const names = async (who: typeof member, query: Record<string, string> = {}) => {
      const res = await t.raw('GET', '/streams', { auth: who, query });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.ignored_parameters_unsupported, undefined, 'every filter is read');
      return res.body.streams.map((s: any) => s.name as string).filter((n: string) => n.startsWith('filter-')).sort();
    };
    assert.deepEqual(await names(member), ['filter-mine', 'filter-pub']);
    assert.deepEqual(await names(member, { include_public: 'false' }), ['filter-mine']);
    assert.deepEqual(await names(member, { include_subscribed: 'false' }), ['filter-pub']);
    assert.deepEqual(await names(member, { exclude_archived: 'false' }), ['filter-mine', 'filter-old', 'filter-pub']);
    assert.deepEqual(await names(member, { include_public: 'false', include_subscribed: 'false', include_all: 'true' }), ['filter-mine', 'filter-pub']);
    assert.deepEqual(await names(t.owner), ['filter-priv', 'filter-pub']);
    assert.deepEqual(await names(t.owner, { include_all: 'true' }), ['filter-mine', 'filter-priv', 'filter-pub']);
    assert.deepEqual(await names(t.owner, { include_all_active: 'true', exclude_archived: 'false' }), ['filter-mine', 'filter-old', 'filter-priv', 'filter-pub']);
    const bad = await t.raw('GET', '/streams', { auth: member, query: { include_public: 'maybe' } });
    assert.deepEqual([bad.status, bad.body.msg], [400, 'include_public is not valid JSON']);
  });

  test('POST /users/me/subscriptions/properties: stored, shown in Subscription objects and /register, told as subscription update events', async () => {
    const member = await t.account(400);
    await member.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'general' }]) });
    await t.owner.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'lobby' }]) });
    const open = (await t.owner.client.streams.getStreamId('lobby')).stream_id;
    const reg = await t.raw('POST', '/register', { auth: member, form: { event_types: '["subscription"]' } });
    assert.equal(reg.status, 200, JSON.stringify(reg.body));
    const set = (data: unknown[]) => t.raw('POST', '/users/me/subscriptions/properties', { auth: member, form: { subscription_data: JSON.stringify(data) } });

    const ok = await set([
      { stream_id: general, property: 'is_muted', value: true },
      { stream_id: general, property: 'color', value: '#c2c2c2' },
      { stream_id: general, property: 'pin_to_top', value: true },
      { stream_id: general, property: 'desktop_notifications', value: false },
      { stream_id: general, property: 'wildcard_mentions_notify', value: true },
    ]);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assertZulipResponse('POST', '/users/me/subscriptions/properties', ok.body);

    const mine = await t.raw('GET', '/users/me/subscriptions', { auth: member });
    assertZulipResponse('GET', '/users/me/subscriptions', mine.body);
    const sub = mine.body.subscriptions.find((s: any) => s.stream_id === general);
    assert.deepEqual(
      [sub.is_muted, sub.in_home_view, sub.color, sub.pin_to_top, sub.desktop_notifications, sub.wildcard_mentions_notify, sub.push_notifications],
      [true, false, '#c2c2c2', true, false, true, null],
    );
    const again = await t.raw('POST', '/register', { auth: member, form: { fetch_event_types: '["subscription"]' } });
    assert.deepEqual(again.body.subscriptions.find((s: any) => s.stream_id === general), sub);
    // Someone else's subscription to the same channel keeps its own settings.
    const owners = (await t.owner.client.streams.subscriptions.retrieve()).subscriptions.find((s: any) => s.stream_id === general);
    assert.deepEqual([owners.is_muted, owners.pin_to_top], [false, false]);

    // The older in_home_view is the inverse of is_muted.
    assert.equal((await set([{ stream_id: general, property: 'in_home_view', value: true }])).status, 200);
    const unmuted = (await t.raw('GET', '/users/me/subscriptions', { auth: member })).body.subscriptions.find((s: any) => s.stream_id === general);
    assert.deepEqual([unmuted.is_muted, unmuted.in_home_view], [false, true]);

    // The caller's queue hears each change, muting as both properties, as Zulip sends them.
    const seen: any[] = [];
    let last = -1;
    while (seen.length < 8) {
      const res = await t.raw('GET', '/events', { auth: member, query: { queue_id: reg.body.queue_id, last_event_id: String(last) } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assertZulipResponse('GET', '/events', res.body);
      for (const e of res.body.events) {
        last = Math.max(last, e.id);
        if (e.type === 'subscription' && e.op === 'update') seen.push([e.stream_id, e.property, e.value]);
      }
    }
    assert.deepEqual(seen, [
      [general, 'in_home_view', false], [general, 'is_muted', true], [general, 'color', '#c2c2c2'], [general, 'pin_to_top', true],
      [general, 'desktop_notifications', false], [general, 'wildcard_mentions_notify', true], [general, 'in_home_view', true], [general, 'is_muted', false],
    ]);

    // Bad input names the problem, and nothing of a refused request is stored.
    const cases: Array<[unknown[], string]> = [
      [[{ stream_id: general, property: 'volume', value: 3 }], 'Unknown subscription property: volume'],
      [[{ stream_id: general, property: 'pin_to_top', value: 'yes' }], 'pin_to_top is not a boolean'],
      [[{ stream_id: general, property: 'color', value: 'red' }], 'color is not a valid hex color code (like #c2c2c2)'],
      [[{ stream_id: general, property: 'is_muted', value: true }, { stream_id: secret, property: 'is_muted', value: true }], 'Invalid channel ID'],
      [[{ stream_id: general, property: 'is_muted', value: true }, { stream_id: 999999, property: 'is_muted', value: true }], 'Invalid channel ID'],
      [[{ stream_id: general, property: 'is_muted', value: true }, { stream_id: open, property: 'is_muted', value: true }], `Not subscribed to channel ID ${open}`],
      [[{ property: 'is_muted', value: true }], 'subscription_data[0]["stream_id"] field is missing'],
    ];
    for (const [data, msg] of cases) {
      const res = await set(data);
      assert.deepEqual([res.status, res.body.msg], [400, msg]);
    }
    const after = (await t.raw('GET', '/users/me/subscriptions', { auth: member })).body.subscriptions.find((s: any) => s.stream_id === general);
    assert.equal(after.is_muted, false, 'the refused batch changed nothing');

    // Leaving and joining again keeps one's settings (as Zulip's), and the add event shows them.
    assert.equal((await set([{ stream_id: general, property: 'color', value: '#abcdef' }])).status, 200);
    assert.equal((await t.raw('DELETE', '/users/me/subscriptions', { auth: member, form: { subscriptions: '["general"]' } })).status, 200);
    await member.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'general' }]) });
    let added: any;
    while (!added) {
      const res = await t.raw('GET', '/events', { auth: member, query: { queue_id: reg.body.queue_id, last_event_id: String(last) } });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      for (const e of res.body.events) {
        last = Math.max(last, e.id);
        if (e.type === 'subscription' && e.op === 'add') added = e.subscriptions[0];
      }
    }
    assert.equal(added.color, '#abcdef');
    const rejoined = (await t.raw('GET', '/users/me/subscriptions', { auth: member })).body.subscriptions.find((s: any) => s.stream_id === general);
    assert.deepEqual(added, rejoined);
  });

  test('muted_topics: exactly one of stream_id and stream', async () => {
    const neither = await mute(t.owner, { topic: 'x', op: 'add' });
    assert.deepEqual(neither, { result: 'error', msg: "Missing 'stream_id' argument", code: 'BAD_REQUEST' });
    const both = await mute(t.owner, { stream_id: general, stream: 'general', topic: 'x', op: 'add' });
    assert.equal(both.msg, 'Unsupported parameter combination: stream_id, stream');
    assert.equal(both.code, 'BAD_REQUEST');
  });

  test('muting twice and unmuting twice succeed; topics compare without case; by id or by name', async () => {
    const member = await t.account(400);
    assert.equal((await mute(member, { stream_id: general, topic: 'Lunch', op: 'add' })).result, 'success');
    assert.equal((await mute(member, { stream: 'general', topic: 'LUNCH', op: 'add' })).result, 'success');
    const after1 = await topics(member);
    assert.equal(after1.length, 1);
    assert.equal(after1[0].topic_name, 'Lunch');
    assert.equal(after1[0].visibility_policy, 1);
    assert.equal((await mute(member, { stream_id: general, topic: 'lunch', op: 'remove' })).result, 'success');
    assert.deepEqual(await topics(member), []);
    assert.equal((await mute(member, { stream_id: general, topic: 'lunch', op: 'remove' })).result, 'success');
  });

  test('an unknown or inaccessible channel is an error', async () => {
    const member = await t.account(400);
    assert.equal((await mute(member, { stream_id: secret, topic: 'x', op: 'add' })).msg, 'Invalid channel ID');
    assert.equal((await mute(member, { stream_id: 999999, topic: 'x', op: 'add' })).msg, 'Invalid channel ID');
    assert.equal((await mute(member, { stream: 'nope', topic: 'x', op: 'add' })).msg, "Invalid channel name 'nope'");
    assert.equal((await mute(t.owner, { stream_id: secret, topic: 'x', op: 'add' })).result, 'success');
  });

  test('POST /user_topics sets any visibility policy; 0 removes it', async () => {
    const member = await t.account(400);
    const set = (visibility_policy: number, topic = 'Deploys') => member.client.callEndpoint('/user_topics', 'POST', { stream_id: general, topic, visibility_policy });
    assert.equal((await set(3)).result, 'success');
    assert.equal((await topics(member))[0].visibility_policy, 3);
    assert.equal((await set(2, 'DEPLOYS')).result, 'success');
    assert.equal((await topics(member))[0].visibility_policy, 2);
    assert.equal((await set(7)).msg, 'Invalid visibility_policy');
    assert.equal((await set(0)).result, 'success');
    assert.deepEqual(await topics(member), []);
  });
});
