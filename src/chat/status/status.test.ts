import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { chatTestServer, type ChatTestServer } from '../chat.testkit.ts';

describe('chat user status', () => {
  let t: ChatTestServer;
  let emojiId: string;
  before(async () => {
    t = await chatTestServer();
    const b = 'b0undary';
    const body = `--${b}\r\nContent-Disposition: form-data; name="f"; filename="p.png"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n--${b}--\r\n`;
    for (const name of ['party', 'retired']) {
      const up = await t.raw('POST', `/realm/emoji/${name}`, { auth: t.owner, headers: { 'content-type': `multipart/form-data; boundary=${b}` }, body });
      assert.equal(up.status, 200, JSON.stringify(up.body));
    }
    assert.equal((await t.raw('DELETE', '/realm/emoji/retired', { auth: t.owner })).status, 200);
    const list = await t.owner.client.emojis.retrieve();
    emojiId = Object.values(list.emoji as Record<string, any>).find((e) => e.name === 'party')!.id;
    assert.equal(Object.values(list.emoji as Record<string, any>).find((e) => e.name === 'retired')!.deactivated, true);
  });
  after(() => t.close());

  const post = (who: { client: any }, params: Record<string, unknown>) => who.client.callEndpoint('/users/me/status', 'POST', params);
  const get = async (who: { client: any }, id: number) => (await who.client.callEndpoint(`/users/${id}/status`, 'GET')).status;

  test('every error of the spec, with Zulip\'s messages', async () => {
    const u = await t.account(400);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{}, 'Client did not pass any new values.'],
      [{ emoji_code: '1f4bb' }, 'Client did not pass any new values.'],
      [{ status_text: 'x'.repeat(61) }, 'status_text is too long (limit: 60 characters)'],
      [{ status_text: 'In a meeting', emoji_code: '1f4bb' }, 'Client must pass emoji_name if they pass either emoji_code or reaction_type.'],
      [{ status_text: 'In a meeting', reaction_type: 'unicode_emoji' }, 'Client must pass emoji_name if they pass either emoji_code or reaction_type.'],
      [{ status_text: 'In a meeting', emoji_code: '1f4bb', emoji_name: 'invalid' }, "Emoji 'invalid' does not exist"],
      [{ status_text: 'In a meeting', emoji_code: '1f4bb', emoji_name: 'car' }, 'Invalid emoji name.'],
      [{ emoji_name: 'party', emoji_code: '99999', reaction_type: 'realm_emoji' }, 'Invalid custom emoji.'],
      [{ emoji_name: 'retired', emoji_code: emojiId, reaction_type: 'realm_emoji' }, 'Invalid custom emoji name.'],
      [{ emoji_name: 'car', emoji_code: '1f697', reaction_type: 'nonsense' }, 'Invalid emoji type.'],
    ];
    for (const [params, msg] of cases) assert.deepEqual(await post(u, params), { result: 'error', msg, code: 'BAD_REQUEST' }, msg);
    assert.deepEqual(await get(t.owner, u.id), {});
  });

  test('only passed parameters change; 60 code points fit; an empty text clears it', async () => {
    const u = await t.account(400);
    const sixty = '😀'.repeat(60);
    assert.equal((await post(u, { status_text: sixty })).result, 'success');
    assert.equal((await post(u, { emoji_name: 'car' })).result, 'success');
    assert.deepEqual(await get(t.owner, u.id), { status_text: sixty, emoji_name: 'car', emoji_code: '1f697', reaction_type: 'unicode_emoji' });
    assert.equal((await post(u, { status_text: '  Lunch  ' })).result, 'success');
    assert.deepEqual(await get(t.owner, u.id), { status_text: 'Lunch', emoji_name: 'car', emoji_code: '1f697', reaction_type: 'unicode_emoji' });
    assert.equal((await post(u, { emoji_name: '' })).result, 'success');
    assert.deepEqual(await get(t.owner, u.id), { status_text: 'Lunch' });
    assert.equal((await post(u, { status_text: '' })).result, 'success');
    assert.deepEqual(await get(t.owner, u.id), {});
  });

  test('custom and extra emoji are accepted by name or with their code', async () => {
    const u = await t.account(400);
    assert.equal((await post(u, { emoji_name: 'party' })).result, 'success');
    assert.deepEqual(await get(u, u.id), { emoji_name: 'party', emoji_code: emojiId, reaction_type: 'realm_emoji' });
    assert.equal((await post(u, { emoji_name: 'zulip', emoji_code: 'zulip', reaction_type: 'server_extra_emoji' })).result, 'success');
    assert.equal((await get(u, u.id)).reaction_type, 'server_extra_emoji');
  });

  test('away sets the presence-enabled setting to its negation', async () => {
    const u = await t.account(400);
    assert.equal((await post(u, { away: 'true' })).result, 'success');
    assert.deepEqual(await get(t.owner, u.id), { away: true });
    assert.equal((await post(u, { away: 'false', status_text: 'back' })).result, 'success');
    assert.deepEqual(await get(t.owner, u.id), { status_text: 'back' });
    assert.equal((await post(u, { away: 'maybe' })).msg, 'away is not valid JSON');
    assert.equal((await get(t.owner, 555555)), undefined);
  });
});
