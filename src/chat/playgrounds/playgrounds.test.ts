import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { chatTestServer, type ChatTestServer } from '../chat.testkit.ts';

describe('chat code playgrounds', () => {
  let t: ChatTestServer;
  before(async () => {
    t = await chatTestServer();
  });
  after(() => t.close());

  const add = (who: { client: any }, name: string, lang: string) => who.client.callEndpoint('/realm/playgrounds', 'POST', { name, pygments_language: lang, url_template: 'https://play.example.com/?c={code}' });
  const realmDefault = async () => (await t.db.selectFrom('chat_realms').select('default_code_block_language').where('id', '=', t.realm.id).executeTakeFirstOrThrow()).default_code_block_language;

  test('administrators only; an unknown id is an error', async () => {
    const member = await t.account(400);
    assert.equal((await add(member, 'P', 'Python')).msg, 'Must be an organization administrator');
    const { id } = await add(t.owner, 'P', 'Python');
    assert.equal((await member.client.callEndpoint(`/realm/playgrounds/${id}`, 'DELETE')).msg, 'Must be an organization administrator');
    assert.deepEqual(await t.owner.client.callEndpoint('/realm/playgrounds/999999', 'DELETE'), { result: 'error', msg: 'Invalid playground', code: 'BAD_REQUEST' });
    assert.deepEqual(await t.owner.client.callEndpoint(`/realm/playgrounds/${id}`, 'DELETE'), { result: 'success', msg: '' });
    assert.equal((await t.owner.client.callEndpoint(`/realm/playgrounds/${id}`, 'DELETE')).msg, 'Invalid playground');
  });

  test('removing the playground of the default code-block language resets that default', async () => {
    const rust = await add(t.owner, 'Rust playground', 'Rust');
    const go = await add(t.owner, 'Go playground', 'Go');
    assert.equal((await t.owner.client.callEndpoint('/realm', 'PATCH', { default_code_block_language: 'Rust' })).result, 'success');
    await t.owner.client.callEndpoint(`/realm/playgrounds/${go.id}`, 'DELETE');
    assert.equal(await realmDefault(), 'Rust');
    await t.owner.client.callEndpoint(`/realm/playgrounds/${rust.id}`, 'DELETE');
    assert.equal(await realmDefault(), '');
  });

  test('a playground needs a URL template with {code}', async () => {
    const res = await t.owner.client.callEndpoint('/realm/playgrounds', 'POST', { name: 'X', pygments_language: 'C', url_template: 'https://x.example.com/' });
    assert.equal(res.msg, 'Missing the required variable "code" in the URL template');
  });
});
