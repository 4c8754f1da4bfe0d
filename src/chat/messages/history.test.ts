import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertZulipResponse } from '../../../test/zulip-openapi.ts';
import { chatTestServer, type Account, type ChatTestServer } from '../chat.testkit.ts';

describe('chat message edit history and rendering previews', () => {
  let t: ChatTestServer;
  let member: Account;
  let general: number;
  let other: number;
  before(async () => {
    t = await chatTestServer();
    member = await t.account(400, { fullName: 'Mia Member' });
    for (const name of ['general', 'other']) {
      await t.owner.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name }]) });
      await member.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name }]) });
    }
    general = (await t.owner.client.streams.getStreamId('general')).stream_id;
    other = (await t.owner.client.streams.getStreamId('other')).stream_id;
  });
  after(() => t.close());

  const history = (who: Account, id: number) => t.raw('GET', `/messages/${id}/history`, { auth: who });

  test('an unedited message has its one snapshot; each edit adds one with what it changed', async () => {
    const sent = await t.raw('POST', '/messages', { auth: member, form: { type: 'stream', to: 'general', topic: 'plans', content: 'first draft' } });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const id = sent.body.id;
    const fresh = await history(member, id);
    assert.equal(fresh.status, 200, JSON.stringify(fresh.body));
    assertZulipResponse('GET', '/messages/{message_id}/history', fresh.body);
    assert.deepEqual(fresh.body.message_history.map((h: any) => [h.content, h.rendered_content, h.topic, h.user_id]), [['first draft', '<p>first draft</p>', 'plans', member.id]]);

    assert.equal((await t.raw('PATCH', `/messages/${id}`, { auth: member, form: { content: 'second draft' } })).status, 200);
    assert.equal((await t.raw('PATCH', `/messages/${id}`, { auth: member, form: { topic: 'roadmap' } })).status, 200);
    assert.equal((await t.raw('PATCH', `/messages/${id}`, { auth: t.owner, form: { stream_id: String(other) } })).status, 200);

    const res = await history(member, id);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertZulipResponse('GET', '/messages/{message_id}/history', res.body);
    const [original, contentEdit, topicEdit, move] = res.body.message_history;
    assert.equal(res.body.message_history.length, 4);
    assert.deepEqual([original.content, original.topic, original.user_id, original.prev_content], ['first draft', 'plans', member.id, undefined]);
    assert.deepEqual([contentEdit.content, contentEdit.prev_content, contentEdit.prev_rendered_content, contentEdit.topic, contentEdit.user_id], ['second draft', 'first draft', '<p>first draft</p>', 'plans', member.id]);
    assert.equal(contentEdit.content_html_diff, '<p><span class="highlight_text_inserted">second</span><span class="highlight_text_deleted">first</span> draft</p>');
    assert.deepEqual([topicEdit.topic, topicEdit.prev_topic, topicEdit.content, topicEdit.prev_content], ['roadmap', 'plans', 'second draft', undefined]);
    assert.deepEqual([move.prev_stream, move.stream, move.user_id, move.topic], [general, other, t.owner.id, 'roadmap']);
    assert.ok(original.timestamp <= contentEdit.timestamp && contentEdit.timestamp <= move.timestamp);

    // Only who can read the message reads its history.
    const stranger = await t.account(600);
    const denied = await history(stranger, id);
    assert.deepEqual([denied.status, denied.body.msg, denied.body.code], [400, 'Invalid message(s)', 'BAD_REQUEST']);
  });

  test('POST /messages/render renders as a message would, mentions resolved, storing nothing', async () => {
    const before = (await t.raw('GET', '/messages', { auth: member, query: { anchor: 'newest', num_before: '1', num_after: '0' } })).body.messages[0]?.id;
    const res = await t.raw('POST', '/messages/render', { auth: member, form: { content: '**bold** for @**Mia Member** <script>' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertZulipResponse('POST', '/messages/render', res.body);
    assert.equal(res.body.rendered, `<p><strong>bold</strong> for <span class="user-mention" data-user-id="${member.id}">@Mia Member</span> &lt;script&gt;</p>`);
    const missing = await t.raw('POST', '/messages/render', { auth: member, form: {} });
    assert.deepEqual([missing.status, missing.body.code, missing.body.var_name], [400, 'REQUEST_VARIABLE_MISSING', 'content']);
    const after = (await t.raw('GET', '/messages', { auth: member, query: { anchor: 'newest', num_before: '1', num_after: '0' } })).body.messages[0]?.id;
    assert.equal(after, before);
  });
});
