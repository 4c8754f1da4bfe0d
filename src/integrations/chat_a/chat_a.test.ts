import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { makeTeam, makeTemplate } from '../../../test/factories.ts';
import { startFakeMattermost, type FakeMattermost } from '../../../test/fakes/mattermost.ts';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';

const BOT_TOKEN = `mm-surface-${'s'.repeat(20)}`;
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');

export async function putSecret(t: TestApp, name: string, value: string) {
  const current = await t.request({ method: 'GET', url: `/api/v1/secrets/${name}`, token: t.adminToken });
  const headers: Record<string, string> = current.status === 200 ? { 'if-match': String(current.headers.etag) } : {};
  const res = await t.request({ method: 'PUT', url: `/api/v1/secrets/${name}`, token: t.adminToken, body: { value }, headers });
  assert.ok([200, 201].includes(res.status), res.text);
}

/** Writes chat_a's settings (enabled or not) through the integrations resource. */
export async function setChatA(t: TestApp, enabled: boolean, settings: Record<string, unknown>) {
  const current = await t.request({ method: 'GET', url: '/api/v1/integrations/chat_a', token: t.adminToken });
  const res = await t.request({ method: 'PUT', url: '/api/v1/integrations/chat_a', token: t.adminToken, body: { enabled, settings }, headers: { 'if-match': String(current.headers.etag) } });
  assert.equal(res.status, 200, res.text);
}

describe('chat_a: the connection test and the role bots', () => {
  let t: TestApp;
  let mm: FakeMattermost;
  const answers: string[] = [];
  const test = async () => {
    const res = await t.request({ method: 'POST', url: '/api/v1/integrations/chat_a/test', token: t.adminToken });
    assert.equal(res.status, 200, res.text);
    answers.push(res.text);
    return res.body as { state: string; detail: string };
  };

  before(async () => {
    mm = await startFakeMattermost();
    t = await testApp({ modelProxy: true });
  });
  after(async () => {
    await t.close();
    await mm.stop();
  });

  it('POST /integrations/chat_a/test asks the server for real: missing settings, a bad token, a person\'s token, then ok with the bot\'s name', async () => {
    const missing = await test();
    assert.equal(missing.state, 'error');
    assert.match(missing.detail, /url setting is missing/);

    await setChatA(t, false, { url: mm.url });
    assert.match((await test()).detail, /integrations\/chat_a\/bot_token has no value/);

    await putSecret(t, 'integrations/chat_a/bot_token', 'not-a-known-token-000');
    const refused = await test();
    assert.equal(refused.state, 'error');
    assert.match(refused.detail, /refused the bot's token/);

    mm.addUser({ username: 'alice', token: 'person-token-000000000' });
    await putSecret(t, 'integrations/chat_a/bot_token', 'person-token-000000000');
    assert.match((await test()).detail, /@alice, a person, not a bot/);

    mm.addUser({ username: 'crewhouse', bot: true, token: BOT_TOKEN });
    await putSecret(t, 'integrations/chat_a/bot_token', BOT_TOKEN);
    const ok = await test();
    assert.equal(ok.state, 'ok', ok.detail);
    assert.equal(ok.detail, `connected to ${mm.url} as the bot @crewhouse`);

    mm.failing = true;
    try {
      const down = await test();
      assert.equal(down.state, 'error');
      assert.match(down.detail, /the chat server failed \(HTTP 500\)/);
    } finally {
      mm.failing = false;
    }
    mm.throttleNext = 1;
    assert.match((await test()).detail, /rate-limiting the bot/);

    const all = [...answers, ...t.logs].join('\n');
    for (const secret of [BOT_TOKEN, 'person-token-000000000', 'not-a-known-token-000']) assert.ok(!all.includes(secret), 'no token in an answer or a log line');
  });

  it('enabling chat_a queues a job that sets each role bot\'s display name and picture from its agent', async () => {
    const tpl = await makeTemplate(t);
    const leadAgent = tpl.current.roles.lead.agent as string;
    const agent = await t.request({ method: 'GET', url: `/api/v1/agents/${leadAgent}`, token: t.adminToken });
    const patched = await t.request({ method: 'PATCH', url: `/api/v1/agents/${leadAgent}`, token: t.adminToken, body: { display_name: 'Lena the Lead' }, headers: { 'if-match': String(agent.headers.etag) } });
    assert.equal(patched.status, 200, patched.text);
    const avatar = await t.request({ method: 'PUT', url: `/api/v1/agents/${leadAgent}/avatar`, token: t.adminToken, raw: PNG, headers: { 'content-type': 'image/png' } });
    assert.ok([200, 201, 204].includes(avatar.status), `${avatar.status} ${avatar.text}`);

    const leadBotToken = `mm-lead-${uniq('t')}`;
    const leadBot = mm.addUser({ username: uniq('lead-bot'), bot: true, displayName: 'old name', token: leadBotToken });
    const room = mm.addChannel({ teamId: mm.addTeam(uniq('acme')).id, name: 'dev', members: [[...mm.users.values()].find((u) => u.username === 'crewhouse')!.id] });
    await setChatA(t, true, { url: mm.url });
    const team = await makeTeam(t, { template: tpl.name, body: { home: { surface: 'chat_a', room_id: room.id } } });
    await putSecret(t, `integrations/chat_a/bots/${team.name}/lead`, leadBotToken);
    // A settings change (enabled) queues the job; the worker performs it.
    await setChatA(t, true, { url: mm.url });
    await t.drainJobs();
    assert.equal(mm.users.get(leadBot.id)!.bot_display_name, 'Lena the Lead');
    assert.deepEqual(mm.profileImages.get(leadBot.id)?.bytes, PNG);
    assert.ok(!t.logs.join('\n').includes(leadBotToken));
  });
});
