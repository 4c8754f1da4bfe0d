import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertZulipResponse } from '../../../test/zulip-openapi.ts';
import { chatTestServer, type Account, type ChatTestServer } from '../chat.testkit.ts';

describe('chat channel settings: GET and PATCH /streams/{stream_id}', () => {
  let t: ChatTestServer;
  let member: Account;
  let outsider: Account;
  let guest: Account;
  let channel: number;
  before(async () => {
    t = await chatTestServer();
    member = await t.account(400);
    outsider = await t.account(400);
    guest = await t.account(600);
    await t.owner.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'design', description: 'Pixels' }]) });
    await member.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'design' }]) });
    await t.owner.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'taken' }]) });
    channel = (await t.owner.client.streams.getStreamId('design')).stream_id;
  });
  after(() => t.close());

  const patch = (who: Account, form: Record<string, string>) => t.raw('PATCH', `/streams/${channel}`, { auth: who, form });

  const streamEvents = (who: Account, queueId: string, count: number, want: (e: any) => boolean) => t.events(who, queueId, count, (e) => e.type === 'stream' && want(e));

  test('GET answers the channel as BasicChannel to who can see it', async () => {
    const res = await t.raw('GET', `/streams/${channel}`, { auth: member });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertZulipResponse('GET', '/streams/{stream_id}', res.body);
    assert.deepEqual([res.body.stream.stream_id, res.body.stream.name, res.body.stream.description, res.body.stream.invite_only], [channel, 'design', 'Pixels', false]);
    const unknown = await t.raw('GET', '/streams/999999', { auth: member });
    assert.deepEqual([unknown.status, unknown.body.msg, unknown.body.code], [400, 'Invalid channel ID', 'BAD_REQUEST']);
    // A guest outside a public channel does not see it.
    assert.equal((await t.raw('GET', `/streams/${channel}`, { auth: guest })).body.msg, 'Invalid channel ID');
  });

  test('an administrator renames it and changes its description; everyone who sees it hears', async () => {
    const reg = await t.raw('POST', '/register', { auth: outsider, form: { event_types: '["stream"]' } });
    const denied = await patch(member, { new_name: 'art' });
    assert.deepEqual([denied.status, denied.body.msg], [400, 'You do not have permission to administer this channel.']);
    assert.equal((await patch(t.owner, { new_name: 'Taken' })).body.msg, 'Channel name already in use.');
    assert.equal((await patch(t.owner, { new_name: 'design' })).body.msg, 'Channel already has that name.');
    assert.equal((await patch(t.owner, { new_name: '  ' })).body.msg, "Channel name can't be empty.");
    assert.equal((await patch(t.owner, { description: 'x'.repeat(1025) })).body.msg, 'description is too long (limit: 1024 characters)');
    assert.equal((await patch(t.owner, { is_web_public: 'true' })).body.msg, 'Web-public channels are not enabled.');
    // Nothing to change is no change, as Zulip answers it.
    assert.equal((await patch(t.owner, {})).status, 200);
    assert.equal((await patch(t.owner, { history_public_to_subscribers: 'false' })).body.msg, 'Invalid parameters');

    const ok = await patch(t.owner, { new_name: 'Design team', description: 'Pixels\nand <b>type</b>' });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.ignored_parameters_unsupported, undefined);
    const events = await streamEvents(outsider, reg.body.queue_id, 2, (e) => e.op === 'update');
    // In Zulip's order: the description, then the name (each event names the channel as it was called then).
    assert.deepEqual(events.map((e) => [e.op, e.stream_id, e.name, e.property, e.value]), [
      ['update', channel, 'design', 'description', 'Pixels and <b>type</b>'],
      ['update', channel, 'design', 'name', 'Design team'],
    ]);
    assert.equal(events[0].rendered_description, '<p>Pixels and &lt;b&gt;type&lt;/b&gt;</p>');
    const now = (await t.raw('GET', `/streams/${channel}`, { auth: member })).body.stream;
    assert.deepEqual([now.name, now.description], ['Design team', 'Pixels and <b>type</b>']);
  });

  test("a channel's creator administers it, as Zulip's default can_administer_channel_group says", async () => {
    await member.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'member-made' }]) });
    const id = (await member.client.streams.getStreamId('member-made')).stream_id;
    const shown = (await t.raw('GET', `/streams/${id}`, { auth: outsider })).body.stream;
    assert.deepEqual(shown.can_administer_channel_group, { direct_members: [member.id], direct_subgroups: [] });
    const renamed = await t.raw('PATCH', `/streams/${id}`, { auth: member, form: { new_name: 'member-renamed' } });
    assert.equal(renamed.status, 200, JSON.stringify(renamed.body));
    const other = await t.raw('PATCH', `/streams/${id}`, { auth: outsider, form: { description: 'mine now' } });
    assert.equal(other.body.msg, 'You do not have permission to administer this channel.');
  });

  test('made private, non-subscribers lose it (stream delete) and its history; made public again, they regain it', async () => {
    const sent = await t.raw('POST', '/messages', { auth: member, form: { type: 'stream', to: String(channel), topic: 'plans', content: 'secret plans' } });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const outsiderQueue = await t.raw('POST', '/register', { auth: outsider, form: { event_types: '["stream"]' } });
    const memberQueue = await t.raw('POST', '/register', { auth: member, form: { event_types: '["stream"]' } });
    const mismatch = await patch(t.owner, { is_private: 'true', history_public_to_subscribers: 'true' });
    assert.equal(mismatch.status, 400);
    assert.match(mismatch.body.msg, /^Private channels with shared history are not supported by this server/);

    assert.equal((await patch(t.owner, { is_private: 'true', history_public_to_subscribers: 'false' })).status, 200);
    const [gone] = await streamEvents(outsider, outsiderQueue.body.queue_id, 1, (e) => e.op === 'delete');
    assert.deepEqual([gone.op, gone.stream_ids], ['delete', [channel]]);
    const [changed] = await streamEvents(member, memberQueue.body.queue_id, 1, (e) => e.property === 'invite_only');
    assert.deepEqual([changed.op, changed.property, changed.value, changed.history_public_to_subscribers, changed.is_web_public], ['update', 'invite_only', true, false, false]);
    assert.equal((await t.raw('GET', `/streams/${channel}`, { auth: outsider })).body.msg, 'Invalid channel ID');
    assert.equal((await t.raw('GET', `/messages/${sent.body.id}`, { auth: outsider })).body.msg, 'Invalid message(s)');
    // An administrator outside it still sees and manages it, but changes who may read it only from inside.
    await t.owner.client.users.me.subscriptions.remove({ subscriptions: JSON.stringify(['Design team']) });
    assert.equal((await t.raw('GET', `/streams/${channel}`, { auth: t.owner })).status, 200);
    assert.equal((await patch(t.owner, { description: 'Secret pixels' })).status, 200);
    assert.equal((await patch(t.owner, { is_private: 'false' })).body.msg, 'Channel content access is required.');
    // A subscriber brings them back in.
    const back = await member.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'Design team' }]), principals: JSON.stringify([t.owner.id]) });
    assert.equal(back.result, 'success', JSON.stringify(back));

    assert.equal((await patch(t.owner, { is_private: 'false' })).status, 200);
    const [shown] = await streamEvents(outsider, outsiderQueue.body.queue_id, 1, (e) => e.op === 'create' && e.id > gone.id);
    assert.deepEqual([shown.op, shown.streams[0].stream_id, shown.streams[0].invite_only], ['create', channel, false]);
    assert.equal((await t.raw('GET', `/messages/${sent.body.id}`, { auth: outsider })).status, 200);
  });
});
