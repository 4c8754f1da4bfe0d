import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertZulipResponse } from '../../../test/zulip-openapi.ts';
import { chatTestServer, type Account, type ChatTestServer } from '../chat.testkit.ts';

describe('chat messages', () => {
  let t: ChatTestServer;
  let ann: Account;
  let bob: Account;
  let general: number;
  let secret: number;
  before(async () => {
    t = await chatTestServer();
    ann = await t.account(400, { fullName: 'Ann Archer' });
    bob = await t.account(400, { fullName: 'Bob Baker' });
    for (const who of [t.owner, ann, bob]) await who.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'general' }]) });
    await t.owner.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'secret' }]), invite_only: 'true' });
    general = (await t.owner.client.streams.getStreamId('general')).stream_id;
    secret = (await t.owner.client.streams.getStreamId('secret')).stream_id;
  });
  after(() => t.close());

  /** Calls an endpoint raw and checks the answer against zulip.yaml's schema for it. */
  const call = async (who: Account, method: string, path: string, specPath: string, params: Record<string, unknown> = {}) => {
    const form = Object.fromEntries(Object.entries(params).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]));
    const res = method === 'GET' ? await t.raw(method, path, { auth: who, query: form }) : await t.raw(method, path, { auth: who, form });
    if (res.status === 200) assertZulipResponse(method, specPath, res.body);
    return res;
  };
  const send = async (who: Account, params: Record<string, unknown>) => {
    const res = await call(who, 'POST', '/messages', '/messages', params);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.id as number;
  };
  const fetch = async (who: Account, params: Record<string, unknown>) => {
    const res = await call(who, 'GET', '/messages', '/messages', { num_before: 0, num_after: 0, ...params });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body;
  };

  test('zulip-js sends to a channel and topic and reads it back, rendered safely', async () => {
    const sent = await ann.client.messages.send({ type: 'stream', to: 'general', topic: 'lunch', content: 'Hi @**Bob Baker**, **noon**? <script>alert(1)</script>\n```js\nlet x = 1 < 2;\n```' });
    assert.equal(sent.result, 'success', JSON.stringify(sent));
    const read = await bob.client.messages.retrieve({ anchor: sent.id, num_before: 0, num_after: 0, narrow: [{ operator: 'stream', operand: 'general' }, { operator: 'topic', operand: 'lunch' }] });
    assert.equal(read.result, 'success', JSON.stringify(read));
    assertZulipResponse('GET', '/messages', read);
    const m = read.messages[0];
    assert.equal(m.id, sent.id);
    assert.equal(m.subject, 'lunch');
    assert.equal(m.display_recipient, 'general');
    assert.equal(m.stream_id, general);
    assert.equal(m.sender_full_name, 'Ann Archer');
    assert.match(m.content, /<span class="user-mention" data-user-id="\d+">@Bob Baker<\/span>/);
    assert.ok(m.content.includes('&lt;script&gt;'), 'user HTML is escaped');
    assert.ok(!m.content.includes('<script>'));
    assert.ok(m.content.includes('<div class="codehilite" data-code-language="js">'));
    assert.deepEqual(m.flags.sort(), ['mentioned']);
    assert.equal(read.found_anchor, true);
    const raw = await bob.client.messages.retrieve({ anchor: sent.id, num_before: 0, num_after: 0, apply_markdown: false, narrow: [{ operator: 'id', operand: sent.id }] });
    assert.ok(raw.messages[0].content.startsWith('Hi @**Bob Baker**'));
    assert.equal(raw.messages[0].content_type, 'text/x-markdown');
  });

  test('direct messages reach only their people; the sender has them read', async () => {
    const carol = await t.account(400);
    const id = await send(ann, { type: 'direct', to: JSON.stringify([bob.id]), content: 'just us' });
    const mine = await fetch(ann, { anchor: id, narrow: [{ operator: 'dm', operand: [bob.id] }] });
    assert.deepEqual(mine.messages.map((m: any) => m.id), [id]);
    assert.deepEqual(mine.messages[0].flags, ['read']);
    assert.deepEqual(mine.messages[0].display_recipient.map((r: any) => r.id).sort(), [ann.id, bob.id].sort());
    const theirs = await fetch(bob, { anchor: id, narrow: [{ operator: 'dm', operand: bob.email.includes('@') ? [ann.id] : [] }] });
    assert.deepEqual(theirs.messages[0].flags, []);
    const outsider = await call(carol, 'GET', `/messages/${id}`, '/messages/{message_id}');
    assert.equal(outsider.status, 400);
    assert.equal(outsider.body.msg, 'Invalid message(s)');
    const group = await send(bob, { type: 'private', to: `${ann.email},${carol.email}`, content: 'three of us' });
    const g = await fetch(carol, { anchor: group, narrow: [['pm-with', `${ann.email},${bob.email}`]] });
    assert.deepEqual(g.messages.map((m: any) => m.id), [group]);
  });

  test('anchors: newest, oldest, first_unread, a number, with num_before and num_after', async () => {
    const s = await t.account(400);
    await s.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'anchors' }]) });
    await ann.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'anchors' }]) });
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push(await send(ann, { type: 'stream', to: 'anchors', topic: 't', content: `m${i}` }));
    const narrow = [{ operator: 'channel', operand: 'anchors' }];
    const newest = await fetch(s, { anchor: 'newest', num_before: 2, narrow });
    assert.deepEqual(newest.messages.map((m: any) => m.id), ids.slice(3));
    assert.equal(newest.found_newest, true);
    assert.equal(newest.found_oldest, false);
    const oldest = await fetch(s, { anchor: 'oldest', num_after: 2, narrow });
    assert.deepEqual(oldest.messages.map((m: any) => m.id), ids.slice(0, 2));
    assert.equal(oldest.found_oldest, true);
    assert.equal(oldest.found_newest, false);
    // Any integer is an anchor, as Zulip's: past the largest id (however many digits) it is the newest, below 0 the oldest.
    for (const past of ['99999999999999999', '123456789012345678901234567890', ' 10000000000000001 ']) {
      const beyond = await fetch(s, { anchor: past, num_before: 2, narrow });
      assert.deepEqual(beyond.messages.map((m: any) => m.id), ids.slice(3), past);
      assert.equal(beyond.anchor, 10_000_000_000_000_000);
      assert.equal(beyond.found_newest, true);
    }
    const below = await fetch(s, { anchor: '-99999999999999999999', num_after: 2, narrow });
    assert.deepEqual(below.messages.map((m: any) => m.id), ids.slice(0, 2));
    assert.equal(below.anchor, 0);
    const middle = await fetch(s, { anchor: String(ids[2]), num_before: 1, num_after: 1, narrow });
    assert.deepEqual(middle.messages.map((m: any) => m.id), ids.slice(1, 4));
    const excluded = await fetch(s, { anchor: String(ids[2]), num_before: 1, num_after: 1, include_anchor: false, narrow });
    assert.deepEqual(excluded.messages.map((m: any) => m.id), [ids[1], ids[3]]);
    await s.client.messages.flags.add({ flag: 'read', messages: ids.slice(0, 2) });
    const unread = await fetch(s, { anchor: 'first_unread', num_after: 1, narrow });
    assert.equal(unread.anchor, ids[2]);
    assert.deepEqual(unread.messages.map((m: any) => m.id), ids.slice(2, 4));
    const onlyUnread = await fetch(s, { anchor: 'oldest', num_after: 10, narrow: [...narrow, { operator: 'is', operand: 'unread' }] });
    assert.deepEqual(onlyUnread.messages.map((m: any) => m.id), ids.slice(2));
    const search = await fetch(s, { anchor: 'newest', num_before: 10, narrow: [...narrow, { operator: 'search', operand: 'M3' }] });
    assert.deepEqual(search.messages.map((m: any) => m.id), [ids[3]]);
    const bySender = await fetch(s, { anchor: 'newest', num_before: 10, narrow: [...narrow, { operator: 'sender', operand: ann.id }, { operator: 'id', operand: ids[4], negated: true }] });
    assert.deepEqual(bySender.messages.map((m: any) => m.id), ids.slice(0, 4));
    // An id beyond any message is no message (negated: every one), not a database error.
    const beyondId = await fetch(s, { anchor: 'newest', num_before: 10, narrow: [...narrow, { operator: 'id', operand: 2_147_483_648 }] });
    assert.deepEqual(beyondId.messages, []);
    const notBeyond = await fetch(s, { anchor: 'newest', num_before: 10, narrow: [...narrow, { operator: 'id', operand: 99_999_999_999, negated: true }] });
    assert.deepEqual(notBeyond.messages.map((m: any) => m.id), ids);
    const byIds = await call(s, 'GET', '/messages', '/messages', { message_ids: [ids[0], ids[4]] });
    assert.deepEqual(byIds.body.messages.map((m: any) => m.id), [ids[0], ids[4]]);
  });

  test('private channels and their messages are invisible to non-members; guests see only their channels', async () => {
    const id = await send(t.owner, { type: 'stream', to: 'secret', topic: 'plans', content: 'hush' });
    const member = await fetch(ann, { anchor: 'newest', num_before: 100 });
    assert.ok(!member.messages.some((m: any) => m.id === id));
    const narrowed = await call(ann, 'GET', '/messages', '/messages', { anchor: 'newest', num_before: 1, num_after: 0, narrow: [{ operator: 'stream', operand: secret }] });
    assert.equal(narrowed.status, 400);
    assert.match(narrowed.body.msg, /unknown channel/);
    const post = await call(ann, 'POST', '/messages', '/messages', { type: 'stream', to: 'secret', topic: 'x', content: 'let me in' });
    assert.equal(post.body.msg, "Invalid channel name 'secret'");
    const guest = await t.account(600);
    const pub = await send(ann, { type: 'stream', to: 'general', topic: 'guests', content: 'public history' });
    const seen = await fetch(guest, { anchor: 'newest', num_before: 100 });
    assert.ok(!seen.messages.some((m: any) => m.id === pub), 'a guest does not read channels they are not in');
    const topics = await call(ann, 'GET', `/users/me/${secret}/topics`, '/users/me/{stream_id}/topics');
    assert.equal(topics.body.msg, 'Invalid channel ID');
  });

  test('edits by the sender; topic moves with propagate_mode; deletion; read the history of public channels', async () => {
    const a = await send(ann, { type: 'stream', to: 'general', topic: 'old', content: 'one' });
    const b = await send(bob, { type: 'stream', to: 'general', topic: 'old', content: 'two' });
    const c = await send(ann, { type: 'stream', to: 'general', topic: 'old', content: 'three' });
    const notMine = await call(bob, 'PATCH', `/messages/${a}`, '/messages/{message_id}', { content: 'hijack' });
    assert.equal(notMine.body.msg, "You don't have permission to edit this message");
    const edit = await ann.client.messages.update({ message_id: a, content: 'one, edited' });
    assert.equal(edit.result, 'success', JSON.stringify(edit));
    const got = await call(bob, 'GET', `/messages/${a}`, '/messages/{message_id}');
    assert.equal(got.body.raw_content, 'one, edited');
    assert.ok(got.body.message.last_edit_timestamp > 0);
    const later = await call(bob, 'PATCH', `/messages/${b}`, '/messages/{message_id}', { topic: 'new', propagate_mode: 'change_later' });
    assert.equal(later.status, 200, JSON.stringify(later.body));
    const inNew = await fetch(ann, { anchor: 'oldest', num_after: 10, narrow: [{ operator: 'stream', operand: general }, { operator: 'topic', operand: 'new' }] });
    assert.deepEqual(inNew.messages.map((m: any) => m.id), [b, c]);
    const all = await call(ann, 'PATCH', `/messages/${a}`, '/messages/{message_id}', { topic: 'new', propagate_mode: 'change_all' });
    assert.equal(all.status, 200);
    const topics = await call(ann, 'GET', `/users/me/${general}/topics`, '/users/me/{stream_id}/topics');
    assert.ok(topics.body.topics.some((x: any) => x.name === 'new' && x.max_id === c));
    assert.ok(!topics.body.topics.some((x: any) => x.name === 'old'));
    const badMode = await call(ann, 'PATCH', `/messages/${a}`, '/messages/{message_id}', { topic: 'x', propagate_mode: 'sometimes' });
    assert.equal(badMode.body.msg, 'Invalid propagate_mode');

    const notYours = await call(bob, 'DELETE', `/messages/${a}`, '/messages/{message_id}');
    assert.equal(notYours.body.msg, "You don't have permission to delete this message");
    assert.equal((await ann.client.messages.deleteById({ message_id: a })).result, 'success');
    assert.equal((await call(ann, 'GET', `/messages/${a}`, '/messages/{message_id}')).body.msg, 'Invalid message(s)');
    // Someone who joined later still reads a public channel's history, flagged historical.
    const late = await t.account(400);
    const history = await fetch(late, { anchor: String(b), num_after: 0, narrow: [{ operator: 'stream', operand: 'general' }] });
    assert.deepEqual(history.messages[0].flags, ['read', 'historical']);
  });

  test('flags, mark as read, reactions and read receipts', async () => {
    const x = await t.account(400);
    await x.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'flags' }]) });
    await ann.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'flags' }]) });
    const fid = (await x.client.streams.getStreamId('flags')).stream_id;
    const m1 = await send(ann, { type: 'stream', to: 'flags', topic: 'a', content: 'first' });
    const m2 = await send(ann, { type: 'stream', to: 'flags', topic: 'b', content: 'second' });
    const m3 = await send(ann, { type: 'stream', to: 'flags', topic: 'b', content: 'third' });
    const star = await call(x, 'POST', '/messages/flags', '/messages/flags', { messages: [m1], op: 'add', flag: 'starred' });
    assert.deepEqual(star.body.messages, [m1]);
    const starred = await fetch(x, { anchor: 'newest', num_before: 10, narrow: [{ operator: 'is', operand: 'starred' }] });
    assert.deepEqual(starred.messages.map((m: any) => m.id), [m1]);
    assert.equal((await call(x, 'POST', '/messages/flags', '/messages/flags', { messages: [m1], op: 'add', flag: 'mentioned' })).body.msg, "Invalid flag: 'mentioned'");
    assert.equal((await call(x, 'POST', '/mark_topic_as_read', '/mark_topic_as_read', { stream_id: fid, topic_name: 'B' })).status, 200);
    const unread = await fetch(x, { anchor: 'oldest', num_after: 10, narrow: [{ operator: 'stream', operand: fid }, { operator: 'is', operand: 'unread' }] });
    assert.deepEqual(unread.messages.map((m: any) => m.id), [m1]);
    assert.equal((await call(x, 'POST', '/mark_stream_as_read', '/mark_stream_as_read', { stream_id: fid })).status, 200);
    await send(ann, { type: 'direct', to: JSON.stringify([x.id]), content: 'psst' });
    const all = await call(x, 'POST', '/mark_all_as_read', '/mark_all_as_read');
    assert.equal(all.body.complete, true);
    assert.deepEqual((await fetch(x, { anchor: 'oldest', num_after: 10, narrow: [{ operator: 'is', operand: 'unread' }] })).messages, []);

    const add = await x.client.reactions.add({ message_id: m2, emoji_name: 'octopus' });
    assert.equal(add.result, 'success', JSON.stringify(add));
    const again = await x.client.reactions.add({ message_id: m2, emoji_name: 'octopus' });
    assert.equal(again.msg, 'Reaction already exists.');
    const withReaction = await fetch(ann, { anchor: String(m2), narrow: [{ operator: 'id', operand: m2 }] });
    assert.deepEqual(withReaction.messages[0].reactions, [{ emoji_name: 'octopus', emoji_code: '1f419', reaction_type: 'unicode_emoji', user_id: x.id }]);
    assert.equal((await x.client.reactions.remove({ message_id: m2, emoji_name: 'octopus' })).result, 'success');
    assert.equal((await x.client.reactions.remove({ message_id: m2, emoji_name: 'octopus' })).msg, "Reaction doesn't exist.");
    const receipts = await call(ann, 'GET', `/messages/${m3}/read_receipts`, '/messages/{message_id}/read_receipts');
    assert.deepEqual(receipts.body.user_ids, [x.id]);
    const members = await call(ann, 'GET', `/streams/${fid}/members`, '/streams/{stream_id}/members');
    assert.deepEqual(members.body.subscribers, [ann.id, x.id].sort((p, q) => p - q));
  });

  test('concurrent writers lose nothing: flags set together, reactions added together, edits recorded in order', async () => {
    const id = await send(ann, { type: 'stream', to: 'general', topic: 'busy', content: 'v0' });
    // Starring and reading the same message at once: both bits stick (each write is one atomic update).
    await Promise.all([bob.client.messages.flags.add({ flag: 'starred', messages: [id] }), bob.client.messages.flags.add({ flag: 'read', messages: [id] }), bob.client.messages.flags.add({ flag: 'collapsed', messages: [id] })]);
    const flags = (await fetch(bob, { anchor: String(id), narrow: [{ operator: 'id', operand: id }] })).messages[0].flags.sort();
    assert.deepEqual(flags, ['collapsed', 'read', 'starred']);
    const people = [ann, bob, t.owner];
    const results = await Promise.all(people.map((p) => p.client.reactions.add({ message_id: id, emoji_name: 'thumbs_up' })));
    assert.ok(results.every((r) => r.result === 'success'), JSON.stringify(results));
    const reacted = (await fetch(ann, { anchor: String(id), narrow: [{ operator: 'id', operand: id }] })).messages[0].reactions;
    assert.deepEqual(reacted.map((r: any) => r.user_id).sort(), people.map((p) => p.id).sort());
    // Edits at once: each lands in the history, none overwrites another's record.
    await Promise.all([1, 2, 3].map((n) => ann.client.messages.update({ message_id: id, content: `v${n}` })));
    const history = await t.db.selectFrom('chat_messages').select('edit_history').where('id', '=', id).executeTakeFirstOrThrow();
    assert.equal(history.edit_history.length, 3);
    // Each edit saw the one before it: the previous contents and the final one are v0..v3, each once.
    const final = (await t.db.selectFrom('chat_messages').select('content').where('id', '=', id).executeTakeFirstOrThrow()).content;
    assert.deepEqual([...history.edit_history.map((h) => h.prev_content), final].sort(), ['v0', 'v1', 'v2', 'v3']);
  });

  test('limits and bad input: clear 400s, long messages cut as Zulip does', async () => {
    const long = await send(ann, { type: 'stream', to: 'general', topic: 't'.repeat(80), content: 'x'.repeat(10_050) });
    const m = (await call(ann, 'GET', `/messages/${long}`, '/messages/{message_id}')).body;
    assert.equal([...m.raw_content].length, 10_000);
    assert.ok(m.raw_content.endsWith('[message truncated]'));
    assert.equal(m.message.subject.length, 60);
    const cases: Array<[string, string, Record<string, unknown>, string]> = [
      ['POST', '/messages', { type: 'stream', to: 'general', topic: 'x', content: '  ' }, 'Message must not be empty'],
      ['POST', '/messages', { type: 'carrier-pigeon', to: 'general', content: 'x' }, 'Invalid message type'],
      ['POST', '/messages', { type: 'stream', to: 'nowhere', topic: 'x', content: 'x' }, "Invalid channel name 'nowhere'"],
      ['POST', '/messages', { type: 'direct', to: '[999999]', content: 'x' }, 'Invalid user ID 999999'],
      ['POST', '/messages', { type: 'stream', to: 'general', content: 'x' }, "Missing 'topic' argument"],
      ['GET', '/messages', { anchor: 'newest', num_before: 3000, num_after: 3000 }, 'Too many messages requested (maximum 5000).'],
      ['GET', '/messages', { anchor: 'sideways', num_before: 1, num_after: 1 }, 'Invalid anchor: give a message ID, or newest, oldest or first_unread'],
      ['GET', '/messages', { anchor: 'newest', num_before: 1, num_after: 0, narrow: '[{"operator":"has","operand":"attachment"}]' }, 'Invalid narrow operator: has is not supported by this server'],
      ['GET', '/messages', { anchor: 'newest', num_before: 1, num_after: 0, narrow: '[{"operator":"search","operand":"x","negated":true}]' }, 'Invalid narrow operator: a search cannot be negated (no index can answer "every message without these words")'],
      ['GET', '/messages', { anchor: 'newest', num_before: 1, num_after: 0, narrow: '[{"operator":"colour","operand":"red"}]' }, 'Invalid narrow operator: unknown operator colour'],
      ['GET', '/messages', { anchor: 'newest', num_before: 1, num_after: 0, narrow: '{"a":1}' }, 'narrow is not a list'],
      ['GET', '/messages', { anchor: 'newest', num_after: 0 }, "Missing 'num_before' argument"],
    ];
    for (const [method, path, params, msg] of cases) {
      const form = Object.fromEntries(Object.entries(params).map(([k, v]) => [k, String(v)]));
      const res = method === 'GET' ? await t.raw(method, path, { auth: ann, query: form }) : await t.raw(method, path, { auth: ann, form });
      assert.equal(res.status, 400, `${msg}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.msg, msg);
      assert.equal(res.body.result, 'error');
    }
    const hook = await t.account(400, { bot: { type: 2, ownerId: t.owner.id } });
    const refused = await t.raw('GET', '/messages', { auth: hook, query: { anchor: 'newest', num_before: '1', num_after: '0' } });
    assert.equal(refused.body.msg, 'This API is not available to incoming webhook bots.');
    assert.equal((await send(hook, { type: 'stream', to: 'general', topic: 'hooks', content: 'build passed' })) > 0, true);
  });

  test('POST /messages/flags/narrow marks a narrow\'s range read in steps, as clients walk it', async () => {
    const ids: number[] = [];
    for (const n of [1, 2, 3]) ids.push(await send(ann, { type: 'stream', to: 'general', topic: 'walk', content: `step ${n}` }));
    await send(ann, { type: 'stream', to: 'general', topic: 'elsewhere', content: 'not in the narrow' });
    const narrow = [{ operator: 'channel', operand: general }, { operator: 'topic', operand: 'walk' }];
    const unread = async () => (await fetch(bob, { anchor: 'oldest', num_after: 100, narrow: [...narrow, { operator: 'is', operand: 'unread' }] })).messages.map((m: any) => m.id);
    assert.deepEqual(await unread(), ids);
    const first = await call(bob, 'POST', '/messages/flags/narrow', '/messages/flags/narrow', { anchor: 'oldest', num_before: 0, num_after: 2, narrow, op: 'add', flag: 'read' });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.deepEqual(
      { ...first.body, result: undefined, msg: undefined },
      { result: undefined, msg: undefined, processed_count: 2, updated_count: 2, first_processed_id: ids[0], last_processed_id: ids[1], found_oldest: true, found_newest: false },
    );
    assert.deepEqual(await unread(), [ids[2]]);
    const rest = await call(bob, 'POST', '/messages/flags/narrow', '/messages/flags/narrow', { anchor: ids[1], include_anchor: false, num_before: 0, num_after: 5000, narrow, op: 'add', flag: 'read' });
    assert.deepEqual([rest.body.processed_count, rest.body.updated_count, rest.body.first_processed_id, rest.body.found_newest], [1, 1, ids[2], true]);
    assert.deepEqual(await unread(), []);
    // Again: the same range, nothing left to change; and an empty range answers nulls.
    const again = await call(bob, 'POST', '/messages/flags/narrow', '/messages/flags/narrow', { anchor: 'newest', num_before: 10, num_after: 0, narrow, op: 'add', flag: 'read' });
    assert.deepEqual([again.body.processed_count, again.body.updated_count], [3, 0]);
    const none = await call(bob, 'POST', '/messages/flags/narrow', '/messages/flags/narrow', { anchor: 'newest', num_before: 10, num_after: 0, narrow: [...narrow, { operator: 'search', operand: 'zebra' }], op: 'add', flag: 'starred' });
    assert.deepEqual([none.body.processed_count, none.body.first_processed_id, none.body.last_processed_id], [0, null, null]);
    const unmark = await call(bob, 'POST', '/messages/flags/narrow', '/messages/flags/narrow', { anchor: ids[2], num_before: 0, num_after: 0, narrow, op: 'remove', flag: 'read' });
    assert.deepEqual([unmark.body.processed_count, unmark.body.updated_count], [1, 1], JSON.stringify(unmark.body));
    assert.deepEqual(await unread(), [ids[2]]);
    const refused: Array<[Record<string, unknown>, string, string]> = [
      [{ num_before: 0, num_after: 1, narrow, op: 'add', flag: 'read' }, "Missing 'anchor' argument", 'REQUEST_VARIABLE_MISSING'],
      [{ anchor: ids[1], num_before: 0, num_after: 1, op: 'add', flag: 'read' }, "Missing 'narrow' argument", 'REQUEST_VARIABLE_MISSING'],
      [{ anchor: ids[1], include_anchor: false, num_before: 1, num_after: 1, narrow, op: 'add', flag: 'read' }, 'The anchor can only be excluded at an end of the range: give include_anchor=true, or num_before or num_after 0', 'BAD_REQUEST'],
      [{ anchor: ids[1], num_before: 0, num_after: 1, narrow, op: 'add', flag: 'mentioned' }, "Invalid flag: 'mentioned'", 'BAD_REQUEST'],
    ];
    for (const [params, msg, code] of refused) {
      const res = await call(bob, 'POST', '/messages/flags/narrow', '/messages/flags/narrow', params);
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.deepEqual([res.body.msg, res.body.code], [msg, code]);
    }
  });

  test('zulip-js removes flags: unstar, and mark unread again (the bit cleared, not a 500)', async () => {
    const id = await send(ann, { type: 'stream', to: 'general', topic: 'flags', content: 'star me' });
    assert.deepEqual((await bob.client.messages.flags.add({ flag: 'starred', messages: [id] })).messages, [id]);
    assert.deepEqual((await bob.client.messages.flags.add({ flag: 'read', messages: [id] })).messages, [id]);
    const unstar = await bob.client.messages.flags.remove({ flag: 'starred', messages: [id] });
    assert.equal(unstar.result, 'success', JSON.stringify(unstar));
    assertZulipResponse('POST', '/messages/flags', unstar);
    assert.deepEqual((await bob.client.messages.flags.remove({ flag: 'read', messages: [id] })).messages, [id]);
    assert.deepEqual((await fetch(bob, { anchor: id })).messages[0].flags, []);
  });

  test('GET /messages without an anchor is a plain BAD_REQUEST, as Zulip\'s parse_anchor_value answers', async () => {
    const res = await t.raw('GET', '/messages', { auth: ann, query: { num_before: '1', num_after: '1' } });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body, { result: 'error', msg: "Missing 'anchor' argument: give a message ID, or newest, oldest or first_unread", code: 'BAD_REQUEST' });
  });

  test('every read is scoped to the caller\'s organization', async () => {
    const { systemActor } = await import('../../audit/audit.ts');
    const other = await t.services.realms.createRealm(systemActor('test'), { stringId: 'elsewhere', name: 'Elsewhere', url: t.base, ownerEmail: 'o@elsewhere.example', ownerName: 'Other Owner', ownerPassword: null });
    const id = await send(ann, { type: 'stream', to: 'general', topic: 'ours', content: 'ours only' });
    const auth = `Basic ${Buffer.from(`${other.owner.delivery_email}:${other.apiKey}`).toString('base64')}`;
    const res = await t.raw('GET', `/messages/${id}`, { auth });
    assert.equal(res.body.msg, 'Invalid message(s)');
    const dm = await t.raw('POST', '/messages', { auth, form: { type: 'direct', to: JSON.stringify([ann.id]), content: 'hello stranger' } });
    assert.equal(dm.body.msg, `Invalid user ID ${ann.id}`);
  });
});
