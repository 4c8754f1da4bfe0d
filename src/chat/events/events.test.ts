import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { dbKind } from '../../../test/harness.ts';
import { assertZulipResponse } from '../../../test/zulip-openapi.ts';
import { chatTestServer, type Account, type ChatTestServer } from '../chat.testkit.ts';

const DEADLINE_MS = 30_000;

/** Checks a GET /events answer against zulip.yaml (local_message_id, which Zulip sends but does not describe, aside). */
function assertEvents(body: any) {
  const copy = { ...body, events: body.events.map(({ local_message_id: _l, ...e }: any) => e) };
  assertZulipResponse('GET', '/events', copy);
}

/** Long-polls like a Zulip client until an event matching `pick` arrives; answers it and the last id seen. */
async function waitFor(t: ChatTestServer, who: Account, queue: { id: string; last: number }, pick: (e: any) => boolean): Promise<any> {
  const until = Date.now() + DEADLINE_MS;
  while (Date.now() < until) {
    const res = await t.raw('GET', '/events', { auth: who, query: { queue_id: queue.id, last_event_id: String(queue.last) } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertEvents(res.body);
    for (const e of res.body.events) {
      queue.last = Math.max(queue.last, e.id);
      if (pick(e)) return e;
    }
  }
  throw new Error('no matching event arrived before the deadline');
}

describe('chat event queues: /register and /events as Zulip clients use them', () => {
  let t: ChatTestServer;
  let ann: Account;
  let bob: Account;
  before(async () => {
    // Heartbeats every few seconds keep each long poll of waitFor() well inside its deadline.
    t = await chatTestServer({ queueLimits: { heartbeatMs: 3000 } });
    ann = await t.account(400, { fullName: 'Ann Archer' });
    bob = await t.account(400, { fullName: 'Bob Baker' });
    for (const who of [ann, bob]) await who.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'general' }]) });
  });
  after(() => t.close());

  const register = async (who: Account, params: Record<string, string> = {}) => {
    const res = await t.raw('POST', '/register', { auth: who, form: params });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertZulipResponse('POST', '/register', res.body);
    return { id: res.body.queue_id as string, last: res.body.last_event_id as number, state: res.body };
  };

  test('register, long-poll, receive a message another user sends during the poll, resume with last_event_id', async () => {
    const queue = await register(ann, { event_types: '["message"]', apply_markdown: 'true' });
    assert.equal(queue.last, -1);
    const poll = t.raw('GET', '/events', { auth: ann, query: { queue_id: queue.id, last_event_id: '-1' } });
    const sent = await bob.client.messages.send({ type: 'stream', to: 'general', topic: 'hello', content: 'Hi @**Ann Archer**' });
    const res = await poll;
    assert.equal(res.status, 200);
    assertEvents(res.body);
    const [event] = res.body.events;
    assert.equal(event.type, 'message');
    assert.equal(event.id, 0);
    assert.equal(event.message.id, sent.id);
    assert.deepEqual(event.flags, ['mentioned']);
    assert.match(event.message.content, /user-mention/);
    // Until acknowledged, the same event comes again (a client that lost an answer loses nothing).
    const again = await t.raw('GET', '/events', { auth: ann, query: { queue_id: queue.id, last_event_id: '-1', dont_block: 'true' } });
    assert.deepEqual(again.body.events.map((e: any) => e.id), [0]);
    // Acknowledged events are gone; dont_block answers at once with nothing new.
    const next = await t.raw('GET', '/events', { auth: ann, query: { queue_id: queue.id, last_event_id: '0', dont_block: 'true' } });
    assert.deepEqual(next.body.events, []);
    assert.equal((await ann.client.queues.deregister({ queue_id: queue.id })).result, 'success');
  });

  test('zulip-js follows events between two users: send with local echo, edit, react, flags, delete', async () => {
    const q = await ann.client.queues.register({ event_types: ['message', 'update_message', 'reaction', 'update_message_flags', 'delete_message'] });
    assert.equal(q.result, 'success', JSON.stringify(q));
    const queue = { id: q.queue_id as string, last: q.last_event_id as number };
    const bobQ = await register(bob, { event_types: '["message"]' });
    const sent = await ann.client.messages.send({ type: 'direct', to: JSON.stringify([bob.id]), content: 'draft', queue_id: queue.id, local_id: '100.01' });
    const mine = await waitFor(t, ann, queue, (e) => e.type === 'message');
    assert.equal(mine.local_message_id, '100.01');
    assert.equal(mine.message.content, 'draft', 'apply_markdown defaults to false on /register');
    assert.deepEqual(mine.flags, ['read']);
    const theirs = await waitFor(t, bob, { id: bobQ.id, last: -1 }, (e) => e.type === 'message');
    assert.equal(theirs.local_message_id, undefined, 'only the sending queue gets its local id back');
    assert.deepEqual(theirs.flags, []);

    await ann.client.messages.update({ message_id: sent.id, content: 'final' });
    const edit = await waitFor(t, ann, queue, (e) => e.type === 'update_message');
    assert.equal(edit.message_id, sent.id);
    assert.equal(edit.content, 'final');
    assert.equal(edit.orig_content, 'draft');

    await bob.client.reactions.add({ message_id: sent.id, emoji_name: 'tada' });
    const reaction = await waitFor(t, ann, queue, (e) => e.type === 'reaction');
    assert.deepEqual([reaction.op, reaction.emoji_name, reaction.user_id], ['add', 'tada', bob.id]);

    await ann.client.messages.flags.add({ flag: 'starred', messages: [sent.id] });
    const flag = await waitFor(t, ann, queue, (e) => e.type === 'update_message_flags');
    assert.deepEqual([flag.op, flag.flag, flag.messages], ['add', 'starred', [sent.id]]);

    await ann.client.messages.deleteById({ message_id: sent.id });
    const gone = await waitFor(t, ann, queue, (e) => e.type === 'delete_message');
    assert.deepEqual([gone.message_type, gone.message_ids], ['private', [sent.id]]);
  });

  test('typing, subscriptions, channels, users and statuses reach the queues', async () => {
    const queue = await register(ann, {});
    const typed = await bob.client.typing.send({ to: [ann.id], op: 'start' });
    assert.equal(typed.result, 'success', JSON.stringify(typed));
    const typing = await waitFor(t, ann, queue, (e) => e.type === 'typing');
    assert.deepEqual([typing.op, typing.message_type, typing.sender.user_id], ['start', 'direct', bob.id]);

    await ann.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'events-room' }]) });
    const created = await waitFor(t, ann, queue, (e) => e.type === 'stream' && e.op === 'create');
    assert.equal(created.streams[0].name, 'events-room');
    const sub = await waitFor(t, ann, queue, (e) => e.type === 'subscription' && e.op === 'add');
    assert.equal(sub.subscriptions[0].name, 'events-room');
    await bob.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'events-room' }]) });
    const peer = await waitFor(t, ann, queue, (e) => e.type === 'subscription' && e.op === 'peer_add');
    assert.deepEqual(peer.user_ids, [bob.id]);

    const carol = await t.account(400, { fullName: 'Carol Cook' });
    const joined = await waitFor(t, ann, queue, (e) => e.type === 'realm_user' && e.op === 'add');
    assert.equal(joined.person.user_id, carol.id);

    await t.raw('POST', '/users/me/status', { auth: bob, form: { status_text: 'on a train' } });
    const status = await waitFor(t, ann, queue, (e) => e.type === 'user_status');
    assert.deepEqual([status.user_id, status.status_text], [bob.id, 'on a train']);

    await t.raw('POST', '/user_topics', { auth: ann, form: { stream_id: String(created.streams[0].stream_id), topic: 'noise', visibility_policy: '1' } });
    const topic = await waitFor(t, ann, queue, (e) => e.type === 'user_topic');
    assert.equal(topic.topic_name, 'noise');
  });

  test('presence: a person coming online reaches the queues; everyone\'s presence reads back', async () => {
    const queue = await register(ann, { event_types: '["presence"]' });
    const posted = await t.raw('POST', '/users/me/presence', { auth: bob, form: { status: 'active', slim_presence: 'true' } });
    assert.equal(posted.status, 200, JSON.stringify(posted.body));
    assertZulipResponse('POST', '/users/me/presence', posted.body);
    assert.ok(posted.body.presences[String(bob.id)].active_timestamp > 0);
    const e = await waitFor(t, ann, queue, (x) => x.type === 'presence');
    assert.deepEqual([e.user_id, e.presence.website.status], [bob.id, 'active']);
    const all = await t.raw('GET', '/realm/presence', { auth: ann });
    assertZulipResponse('GET', '/realm/presence', all.body);
    assert.equal(all.body.presences[bob.email].aggregated.status, 'active');
    const bad = await t.raw('POST', '/users/me/presence', { auth: bob, form: { status: 'asleep' } });
    assert.equal(bad.body.msg, 'Invalid status');
  });

  test('register gives the initial state asked for, in zulip.yaml\'s shapes', async () => {
    const dm = await bob.client.messages.send({ type: 'direct', to: JSON.stringify([ann.id]), content: 'unread for you' });
    await t.raw('POST', '/users/me/status', { auth: ann, form: { status_text: 'here' } });
    const { state } = await register(ann, { include_subscribers: 'true' });
    assert.equal(state.max_message_length, 10000);
    assert.equal(state.max_topic_length, 60);
    assert.ok(state.max_message_id >= dm.id);
    assert.ok(state.unread_msgs.pms.some((p: any) => p.other_user_id === bob.id && p.unread_message_ids.includes(dm.id)));
    assert.ok(state.realm_users.some((u: any) => u.user_id === bob.id));
    const general = state.subscriptions.find((s: any) => s.name === 'general');
    assert.ok(general.subscribers.includes(ann.id) && general.subscribers.includes(bob.id));
    assert.equal(state.user_status[String(ann.id)].status_text, 'here');
    assert.ok(state.recent_private_conversations.some((c: any) => c.user_ids.includes(bob.id)));
    const only = await register(ann, { fetch_event_types: '["realm"]' });
    assert.equal(only.state.realm_users, undefined);
    assert.equal(only.state.max_message_length, 10000);
  });

  test('a narrowed queue receives only the messages of its narrow', async () => {
    const queue = await register(ann, { event_types: '["message"]', narrow: JSON.stringify([['stream', 'general'], ['topic', 'wanted']]) });
    await bob.client.messages.send({ type: 'stream', to: 'general', topic: 'other', content: 'not this' });
    await bob.client.messages.send({ type: 'stream', to: 'general', topic: 'Wanted', content: 'this one' });
    const e = await waitFor(t, ann, queue, (x) => x.type === 'message');
    assert.equal(e.message.content, 'this one');
  });

  test("the start-up state Zulip's apps read: user_settings, realm_emoji and the empty lists, with their events", async () => {
    const fetch = JSON.stringify(['user_settings', 'realm_emoji', 'realm_user_groups', 'muted_users', 'drafts', 'alert_words']);
    const before = await register(ann, { fetch_event_types: fetch, event_types: JSON.stringify(['user_settings', 'realm_emoji']) });
    const s = before.state;
    for (const k of ['realm_user_groups', 'muted_users', 'drafts', 'alert_words']) assert.deepEqual(s[k], [], k);
    assert.equal(s.user_settings.timezone, '');
    assert.equal(s.user_settings.presence_enabled, true);
    assert.equal(s.user_settings.emojiset, 'google');
    assert.equal(s.realm_users, undefined, 'only what was asked for');

    // A setting the server stores changes: the user's queue hears it, and the next /register shows it.
    assert.equal((await t.raw('PATCH', '/settings', { auth: ann, form: { timezone: 'Europe/Berlin', presence_enabled: 'false' } })).status, 200);
    const tz = await waitFor(t, ann, before, (e) => e.type === 'user_settings' && e.property === 'timezone');
    assert.deepEqual({ op: tz.op, value: tz.value }, { op: 'update', value: 'Europe/Berlin' });
    const pres = await waitFor(t, ann, before, (e) => e.type === 'user_settings' && e.property === 'presence_enabled');
    assert.equal(pres.value, false);
    const afterSettings = await register(ann, { fetch_event_types: fetch });
    assert.equal(afterSettings.state.user_settings.timezone, 'Europe/Berlin');
    assert.equal(afterSettings.state.user_settings.presence_enabled, false);

    // A custom emoji is uploaded, then deactivated: each time every queue gets the whole set.
    const b = 'b0undary';
    const body = `--${b}\r\nContent-Disposition: form-data; name="f"; filename="p.png"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n--${b}--\r\n`;
    const up = await t.raw('POST', '/realm/emoji/wave_hello', { auth: bob, headers: { 'content-type': `multipart/form-data; boundary=${b}` }, body });
    assert.equal(up.status, 200, JSON.stringify(up.body));
    const added = await waitFor(t, ann, before, (e) => e.type === 'realm_emoji');
    const emoji = Object.values(added.realm_emoji as Record<string, any>).find((e) => e.name === 'wave_hello');
    assert.ok(emoji, JSON.stringify(added));
    assert.deepEqual({ deactivated: emoji.deactivated, author_id: emoji.author_id }, { deactivated: false, author_id: bob.id });
    const state = await register(ann, { fetch_event_types: fetch });
    assert.deepEqual(state.state.realm_emoji[emoji.id], emoji);
    assert.equal((await t.raw('DELETE', '/realm/emoji/wave_hello', { auth: bob })).status, 200);
    const removed = await waitFor(t, ann, before, (e) => e.type === 'realm_emoji');
    assert.equal(removed.realm_emoji[emoji.id].deactivated, true);
    assert.equal((await t.raw('PATCH', '/settings', { auth: ann, form: { timezone: '', presence_enabled: 'true' } })).status, 200);
  });

  test('a dead queue answers BAD_EVENT_QUEUE_ID, never a hang; someone else\'s queue is not yours', async () => {
    const queue = await register(ann);
    const foreign = await t.raw('GET', '/events', { auth: bob, query: { queue_id: queue.id, dont_block: 'true' } });
    assert.equal(foreign.status, 400);
    assert.deepEqual(foreign.body, { result: 'error', msg: `Bad event queue ID: ${queue.id}`, code: 'BAD_EVENT_QUEUE_ID', queue_id: queue.id });
    await t.raw('DELETE', '/events', { auth: ann, form: { queue_id: queue.id } });
    const dead = await t.raw('GET', '/events', { auth: ann, query: { queue_id: queue.id, last_event_id: '-1' } });
    assert.equal(dead.body.code, 'BAD_EVENT_QUEUE_ID');
    const missing = await t.raw('GET', '/events', { auth: ann });
    assert.equal(missing.body.msg, "Missing 'queue_id' argument");
  });
});

describe('chat event queues: limits', () => {
  let t: ChatTestServer;
  before(async () => {
    t = await chatTestServer({ queueLimits: { heartbeatMs: 200, idleMs: 400, maxEvents: 3, maxPerUser: 2 } });
  });
  after(() => t.close());

  test('an idle poll answers a heartbeat; an unpolled queue expires; an overfull queue is dropped', async () => {
    const ann = await t.account(400);
    const reg = async () => (await t.raw('POST', '/register', { auth: ann, form: { event_types: '["message"]' } })).body.queue_id as string;
    const q1 = await reg();
    const hb = await t.raw('GET', '/events', { auth: ann, query: { queue_id: q1, last_event_id: '-1' } });
    assert.deepEqual(hb.body.events, [{ type: 'heartbeat', id: 0 }]);
    assertEvents(hb.body);
    // Left alone, it expires (polled here with dont_block until then, the sweep is periodic).
    const until = Date.now() + DEADLINE_MS;
    let code = '';
    while (Date.now() < until && code !== 'BAD_EVENT_QUEUE_ID') {
      await new Promise((r) => setTimeout(r, 300));
      code = (await t.raw('GET', '/events', { auth: ann, query: { queue_id: q1, dont_block: 'true' } })).body.code ?? '';
      // Polling keeps it alive, so stop after the first look and just wait.
      if (code !== 'BAD_EVENT_QUEUE_ID') await new Promise((r) => setTimeout(r, 1000));
    }
    assert.equal(code, 'BAD_EVENT_QUEUE_ID');

    // Bounded: more unread events than the limit drop the queue; its client registers again.
    const q2 = await reg();
    await ann.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'busy' }]) });
    for (let i = 0; i < 4; i++) await ann.client.messages.send({ type: 'stream', to: 'busy', topic: 't', content: `m${i}` });
    const until2 = Date.now() + DEADLINE_MS;
    let dropped = false;
    while (Date.now() < until2 && !dropped) {
      const r = await t.raw('GET', '/events', { auth: ann, query: { queue_id: q2, last_event_id: '-1', dont_block: 'true' } });
      dropped = r.body.code === 'BAD_EVENT_QUEUE_ID';
      if (!dropped) await new Promise((res) => setTimeout(res, 100));
    }
    assert.ok(dropped);

    // At most maxPerUser queues per user: the least recently used goes.
    const a = await reg();
    await new Promise((r) => setTimeout(r, 5));
    await reg();
    await reg();
    assert.equal((await t.raw('GET', '/events', { auth: ann, query: { queue_id: a, dont_block: 'true' } })).body.code, 'BAD_EVENT_QUEUE_ID');
  });
});

describe(`chat event queues: two chat servers on one database (${dbKind})`, () => {
  test('a message sent through one server reaches a queue held by the other', async () => {
    const a = await chatTestServer();
    const b = await chatTestServer({ db: a.db });
    try {
      const ann = await a.account(400);
      const bob = await a.account(400);
      const reg = await b.raw('POST', '/register', { auth: ann, form: { event_types: '["message"]' } });
      assert.equal(reg.status, 200, JSON.stringify(reg.body));
      const poll = b.raw('GET', '/events', { auth: ann, query: { queue_id: reg.body.queue_id, last_event_id: '-1' } });
      const sent = await a.raw('POST', '/messages', { auth: bob, form: { type: 'direct', to: JSON.stringify([ann.id]), content: 'across servers' } });
      const res = await poll;
      assert.equal(res.body.events[0]?.message?.id, sent.body.id, JSON.stringify(res.body));
    } finally {
      await b.app.close();
      await a.close();
    }
  });
});
