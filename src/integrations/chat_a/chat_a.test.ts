import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { makeTeam, makeTemplate } from '../../../test/factories.ts';
import { startFakeMattermost, type FakeMattermost } from '../../../test/fakes/mattermost.ts';
import { captureLogger, testApp, uniq, waitFor, type TestApp } from '../../../test/harness.ts';
import { putSecret, setChatA } from '../../../test/integrations.ts';
import { chatAClient } from './client.ts';
import { UNSIGNED_REFUSALS_PER_MINUTE } from '../webhooks/refusal-cap.ts';
import { startChatAListener } from './listener.ts';

const BOT_TOKEN = `mm-surface-${'s'.repeat(20)}`;
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');

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

  it('a team homed in a chat_a channel, or linked to one: the surface bot must read and post there; room_label is the channel\'s name', async () => {
    const tpl = await makeTemplate(t);
    const bot = [...mm.users.values()].find((u) => u.username === 'crewhouse')!;
    const someone = mm.addUser({ username: uniq('bob') });
    const acme = mm.addTeam(uniq('acme'));
    const room = mm.addChannel({ teamId: acme.id, name: 'payments', displayName: 'Payments Team', members: [bot.id] });
    const create = (home: Record<string, unknown>) =>
      t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: uniq('team'), template: { name: tpl.name, version: null }, home } });

    const disabled = await create({ surface: 'chat_a', room_id: room.id });
    assert.equal(disabled.status, 503, disabled.text);
    assert.match(disabled.body.detail, /chat_a integration is not enabled/);
    await setChatA(t, true, { url: mm.url });

    const noRoom = await create({ surface: 'chat_a' });
    assert.equal(noRoom.status, 422);
    assert.equal(noRoom.body.errors[0].field, 'home.room_id');
    const notAnId = await create({ surface: 'chat_a', room_id: 'general' });
    assert.equal(notAnId.status, 422);
    assert.match(notAnId.body.errors[0].message, /is not a chat_a channel id/);
    const unknown = await create({ surface: 'chat_a', room_id: 'a'.repeat(26) });
    assert.equal(unknown.status, 422);
    assert.match(unknown.body.detail, /cannot see channel/);
    const outside = mm.addChannel({ teamId: acme.id, name: 'elsewhere', displayName: 'Elsewhere', members: [someone.id] });
    const notMember = await create({ surface: 'chat_a', room_id: outside.id });
    assert.equal(notMember.status, 422);
    assert.equal(notMember.body.errors[0].message, 'the chat_a bot @crewhouse is not a member of "Elsewhere": add it to the channel, then try again');
    const readOnly = mm.addChannel({ teamId: acme.id, name: 'announcements', displayName: 'Announcements', readOnly: [bot.id] });
    const cannotPost = await create({ surface: 'chat_a', room_id: readOnly.id });
    assert.equal(cannotPost.status, 422);
    assert.match(cannotPost.body.detail, /cannot post in "Announcements"/);
    mm.failing = true;
    try {
      const down = await create({ surface: 'chat_a', room_id: room.id });
      assert.equal(down.status, 502, down.text);
      assert.match(down.body.detail, /the chat server failed \(HTTP 500\)/);
      assert.match(down.body.detail, /Nothing was changed: send this again once the chat server answers \(the chat_a integration's connection test says what fails\)$/);
    } finally {
      mm.failing = false;
    }
    // The bot's token refused: the integration's to mend, not the room's (503, as for a tracker or the code host).
    await putSecret(t, 'integrations/chat_a/bot_token', 'not-a-known-token-000');
    try {
      const refused = await create({ surface: 'chat_a', room_id: room.id });
      assert.equal(refused.status, 503, refused.text);
      assert.match(refused.body.detail, /^could not check the chat_a room \w+: the chat server refused the bot's token/);
      assert.match(refused.body.detail, /Nothing was changed: the chat server refuses the chat_a integration's credentials, which this request cannot mend; an admin mends the integration \(its connection test says what fails\), then send this again$/);
    } finally {
      await putSecret(t, 'integrations/chat_a/bot_token', BOT_TOKEN);
    }

    const ok = await create({ surface: 'chat_a', room_id: room.id, room_label: 'whatever the caller said' });
    assert.equal(ok.status, 201, ok.text);
    assert.deepEqual(ok.body.home, { surface: 'chat_a', room_id: room.id, room_label: 'Payments Team' });

    const links = `/api/v1/teams/${ok.body.name}/links`;
    const side = mm.addChannel({ teamId: acme.id, name: 'payments-ops', displayName: 'Payments Ops', members: [bot.id] });
    const linked = await t.request({ method: 'PUT', url: links, token: t.adminToken, body: { surface: 'chat_a', external_id: side.id } });
    assert.equal(linked.status, 201, linked.text);
    assert.equal(linked.body.label, 'Payments Ops');
    const refused = await t.request({ method: 'PUT', url: links, token: t.adminToken, body: { surface: 'chat_a', external_id: outside.id } });
    assert.equal(refused.status, 422);
    assert.equal(refused.body.errors[0].field, 'external_id');
    // A run has one chat thread, in the home room: a room of the other chat surface is refused when it is linked, saying what to do instead.
    const otherChat = await t.request({ method: 'PUT', url: links, token: t.adminToken, body: { surface: 'chat_b', external_id: 'C0PAYMENTS' } });
    assert.equal(otherChat.status, 409, otherChat.text);
    assert.match(otherChat.body.detail, /lives in a chat_a room.*a chat_b room cannot be linked to it\. Link a chat_a room instead, or give the chat_b room a team of its own \(home chat_b\)$/);
    assert.deepEqual((await t.request({ method: 'GET', url: links, token: t.adminToken })).body.items.map((l: any) => l.external_id), [side.id]);
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

describe('chat_a: the slash command at /webhooks/chat_a', () => {
  let t: TestApp;
  let mm: FakeMattermost;
  const COMMAND_TOKEN = `cmd-${'c'.repeat(24)}`;
  let alice: { id: string };
  let room: { id: string };
  // The clock the cap on refused commands counts minutes on: a real minute turning mid-test changes nothing.
  let at = Date.UTC(2026, 0, 5, 12, 0, 10);
  const send = (cmd: { headers: Record<string, string>; body: string }) => t.request({ method: 'POST', url: '/webhooks/chat_a', headers: cmd.headers, raw: cmd.body });
  const deliveries = async () => (await t.request({ method: 'GET', url: '/api/v1/integrations/chat_a/deliveries', token: t.adminToken })).body.items as Array<Record<string, any>>;

  before(async () => {
    mm = await startFakeMattermost();
    t = await testApp({ webhooksClock: () => at });
    const bot = mm.addUser({ username: 'crewhouse', bot: true, token: BOT_TOKEN });
    alice = mm.addUser({ username: 'alice' });
    room = mm.addChannel({ teamId: mm.addTeam('acme').id, name: 'dev', members: [bot.id, alice.id] });
  });
  after(async () => {
    await t.close();
    await mm.stop();
  });

  it('is refused, and recorded, while the slash command is not enabled', async () => {
    const res = await send(mm.slashCommand({ token: COMMAND_TOKEN, channelId: room.id, userId: alice.id, text: 'help' }));
    assert.equal(res.status, 409, res.text);
    assert.match(res.body.detail, /slash command is not enabled/);
    assert.equal((await deliveries())[0]!.outcome, 'refused');
  });

  it('refuses a bad command token (in the form or the header) with 401, records it, and never echoes a token', async () => {
    await putSecret(t, 'integrations/chat_a/bot_token', BOT_TOKEN);
    await putSecret(t, 'integrations/chat_a/command_token', COMMAND_TOKEN);
    await setChatA(t, true, { url: mm.url, slash_command: true });
    const bad = await send(mm.slashCommand({ token: 'wrong-command-token-xyz', channelId: room.id, userId: alice.id, text: 'help' }));
    assert.equal(bad.status, 401, bad.text);
    assert.match(bad.body.detail, /does not match the chat_a command token/);
    // The right token in the form does not excuse a wrong one in the header.
    const mixed = mm.slashCommand({ token: COMMAND_TOKEN, channelId: room.id, userId: alice.id, text: 'help' });
    mixed.headers.authorization = 'Token wrong-command-token-xyz';
    assert.equal((await send(mixed)).status, 401);
    const none = mm.slashCommand({ token: COMMAND_TOKEN, channelId: room.id, userId: alice.id, text: 'help' });
    const headers: Record<string, string> = { ...none.headers };
    delete headers.authorization;
    assert.equal((await send({ headers, body: new URLSearchParams([...new URLSearchParams(none.body)].filter(([k]) => k !== 'token')).toString() })).status, 401);
    const recorded = await deliveries();
    assert.deepEqual(recorded.slice(0, 3).map((d) => [d.outcome, d.signature_valid]), [['refused', false], ['refused', false], ['refused', false]]);
    await t.drainJobs();
    assert.equal(mm.ephemerals.length, 0, 'a refused command has no effect');
    const all = [bad.text, JSON.stringify(recorded), ...t.logs].join('\n');
    assert.ok(!all.includes(COMMAND_TOKEN) && !all.includes('wrong-command-token-xyz') && !all.includes(BOT_TOKEN));
  });

  it('accepts the token as Authorization: Token alone, answers 200 at once, and the job shows the command list; a replay has one effect', async () => {
    const cmd = mm.slashCommand({ token: COMMAND_TOKEN, channelId: room.id, userId: alice.id, text: 'help' });
    cmd.body = new URLSearchParams([...new URLSearchParams(cmd.body)].filter(([k]) => k !== 'token')).toString();
    const first = await send(cmd);
    assert.equal(first.status, 200, first.text);
    assert.equal(first.body.response_type, 'ephemeral');
    assert.equal(mm.ephemerals.length, 0, 'nothing is posted inline');
    const again = await send(cmd);
    assert.equal(again.status, 200);
    await t.drainJobs();
    assert.equal(mm.ephemerals.length, 1, 'a replayed command is one effect');
    assert.equal(mm.ephemerals[0]!.ephemeral_to, alice.id);
    assert.equal(mm.ephemerals[0]!.channel_id, room.id);
    assert.match(mm.ephemerals[0]!.message, /`@crewhouse cancel <run id>`/);
    const d = (await deliveries())[0]!;
    // Settled by its job with what it did, as a webhook delivery is.
    assert.deepEqual([d.event, d.outcome, d.detail, d.times_received, d.signature_valid], ['command.help', 'processed', 'the command `help` was answered', 2, true]);
  });

  it('refuses, and records, a command whose text or name holds a NUL with a 400 naming the field, not a bare database error', async () => {
    const before = mm.ephemerals.length;
    const nulText = await send(mm.slashCommand({ token: COMMAND_TOKEN, channelId: room.id, userId: alice.id, text: 'task fix\u0000 the login' }));
    assert.equal(nulText.status, 400, nulText.text);
    assert.match(nulText.body.detail, /at text holds a NUL character/);
    assert.equal(nulText.body.errors[0].field, 'text');
    const cmd = mm.slashCommand({ token: COMMAND_TOKEN, channelId: room.id, userId: alice.id, text: 'help' });
    const form = new URLSearchParams(cmd.body);
    form.set('user_name', 'ali\u0000ce');
    const nulName = await send({ headers: cmd.headers, body: form.toString() });
    assert.equal(nulName.status, 400, nulName.text);
    assert.equal(nulName.body.errors[0].field, 'user_name');
    const recorded = await deliveries();
    assert.deepEqual(recorded.slice(0, 2).map((d) => [d.event, d.outcome, d.detail]), [
      ['command', 'refused', nulName.body.detail],
      ['command', 'refused', nulText.body.detail],
    ]);
    await t.drainJobs();
    assert.equal(mm.ephemerals.length, before, 'a refused command has no effect');
  });

  it('answers an unknown command with the list; a command in a room no team lives in says so, to the person alone', async () => {
    const unknown = await send(mm.slashCommand({ token: COMMAND_TOKEN, channelId: room.id, userId: alice.id, text: 'frobnicate' }));
    assert.equal(unknown.status, 200, unknown.text);
    assert.match(unknown.body.text, /`\/crewhouse frobnicate` is not a Crewhouse command/);
    for (const text of ['task fix the login page', 'status', 'cancel 123', 'skills accept lint']) {
      const work = await send(mm.slashCommand({ token: COMMAND_TOKEN, channelId: room.id, userId: alice.id, text }));
      assert.equal(work.status, 200, work.text);
      assert.deepEqual(work.body, { response_type: 'ephemeral', text: work.body.text });
    }
    const before = mm.ephemerals.length;
    await t.drainJobs();
    const answers = mm.ephemerals.slice(before).map((p) => p.message);
    assert.equal(answers.length, 5, answers.join('\n'));
    // Each message's job answers it; the jobs run in any order.
    assert.equal(answers.filter((a) => /^`frobnicate` is not a Crewhouse command[\s\S]*`@crewhouse status`/.test(a)).length, 1, answers.join('\n'));
    assert.equal(answers.filter((a) => /^No Crewhouse team lives in this room/.test(a)).length, 4, answers.join('\n'));
    assert.equal(mm.posts.length, 0, 'nothing is posted in the channel');
    const recorded = await deliveries();
    // The unknown command was answered (the list); the others were refused with what the person was told.
    assert.deepEqual(recorded.slice(0, 5).map((d) => [d.event, d.outcome]).reverse(), [['command.unknown', 'processed'], ['command.task', 'refused'], ['command.status', 'refused'], ['command.cancel', 'refused'], ['command.skill', 'refused']]);
    for (const d of recorded.slice(0, 4)) assert.match(d.detail, /^No Crewhouse team lives in this room/);
  });

  it('settles a command whose work gave up as failed, with the reason', async () => {
    const cmd = mm.slashCommand({ token: COMMAND_TOKEN, channelId: room.id, userId: alice.id, text: 'status' });
    assert.equal((await send(cmd)).status, 200);
    assert.equal((await deliveries())[0]!.outcome, 'accepted', 'queued, not done inline');
    // Its one try, made while chat_a is turned off: the answer cannot be posted, and the job gives up.
    await t.db.updateTable('jobs').set({ max_attempts: 1 }).where('kind', '=', 'webhooks.process-delivery').where('state', '=', 'queued').execute();
    await setChatA(t, false, { url: mm.url, slash_command: true });
    try {
      await t.drainJobs();
    } finally {
      await setChatA(t, true, { url: mm.url, slash_command: true });
    }
    const d = (await deliveries())[0]!;
    assert.equal(d.outcome, 'failed');
    assert.match(d.detail, /chat_a cannot post: the chat_a integration is not enabled/);
  });

  it('refuses a command that is not a form, or lacks its channel or user, with 400', async () => {
    const cmd = mm.slashCommand({ token: COMMAND_TOKEN, channelId: room.id, userId: alice.id, text: 'help' });
    const json = await send({ headers: { ...cmd.headers, 'content-type': 'application/json' }, body: '{}' });
    assert.equal(json.status, 400);
    assert.match(json.body.detail, /a slash command is a form/);
    const noChannel = mm.slashCommand({ token: COMMAND_TOKEN, channelId: 'nope', userId: alice.id, text: 'help' });
    const res = await send(noChannel);
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /lacks a valid channel_id/);
  });

  it(`records at most ${UNSIGNED_REFUSALS_PER_MINUTE} commands a minute refused for their token (the webhooks' cap), answering all 401; a command with the token is still taken in`, async () => {
    at += 60_000;
    const refused = async () => Number((await t.db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll().as('n')).where('surface', '=', 'chat_a').where('outcome', '=', 'refused').where('taken', '=', false).executeTakeFirstOrThrow()).n);
    const before = await refused();
    const k = 4;
    const statuses = new Set<number>();
    for (let i = 0; i < UNSIGNED_REFUSALS_PER_MINUTE + k; i++) statuses.add((await send(mm.slashCommand({ token: `wrong-token-${i}`, channelId: room.id, userId: alice.id, text: 'help' }))).status);
    assert.deepEqual(statuses, new Set([401]));
    assert.equal(await refused(), before + UNSIGNED_REFUSALS_PER_MINUTE);
    assert.match((await t.request({ method: 'GET', url: '/metrics' })).text, new RegExp(`^crewhouse_webhook_refusals_unrecorded_total\\{surface="chat_a"\\} ${k}$`, 'm'));
    const good = await send(mm.slashCommand({ token: COMMAND_TOKEN, channelId: room.id, userId: alice.id, text: 'help' }));
    assert.equal(good.status, 200, good.text);
    const d = (await deliveries())[0]!;
    assert.deepEqual([d.event, d.outcome, d.signature_valid], ['command.help', 'accepted', true]);
  });
});

describe('chat_a: the inbound listener', () => {
  it('hands on each person\'s message once, from the WebSocket or, for one sent while the socket was down (in the room or in a thread), from the catch-up; its own posts, bots\' and system messages are dropped', async () => {
    const mm = await startFakeMattermost();
    const { logger } = captureLogger();
    const bot = mm.addUser({ username: 'crewhouse', bot: true, token: BOT_TOKEN });
    const other = mm.addUser({ username: 'otherbot', bot: true, token: 'other-bot-token-0000' });
    const alice = mm.addUser({ username: 'alice' });
    const room = mm.addChannel({ teamId: mm.addTeam('acme').id, name: 'dev', members: [bot.id, other.id, alice.id] });
    const got: Array<[string, string]> = [];
    const listener = startChatAListener({ url: mm.url, token: BOT_TOKEN, rooms: async () => [room.id], onMessage: (m) => void got.push([m.post.message, m.via]), logger, retry: { minMs: 50, maxMs: 200, jitterMs: 10 } });
    try {
      await listener.ready;
      await waitFor('the connection', () => mm.openSockets === 1);
      const one = mm.post(alice.id, room.id, 'one');
      await waitFor('the first message', () => got.length === 1);
      mm.dropSockets();
      // Sent while nobody listens: only the catch-up after the reconnection can see them (a channel's posts since a time hold its threads' replies too); its first try is rate-limited.
      mm.post(alice.id, room.id, 'two');
      mm.post(alice.id, room.id, 'two, in the thread', one.id);
      mm.throttleNext = 1;
      await waitFor('the catch-up', () => got.length === 3);
      await waitFor('the reconnection', () => mm.openSockets === 1);
      await chatAClient(mm.url, BOT_TOKEN).post({ channel_id: room.id, message: 'the bot itself' });
      mm.post(other.id, room.id, 'another bot');
      mm.post(alice.id, room.id, 'three');
      await waitFor('the third message', () => got.some(([m]) => m === 'three'));
      assert.deepEqual(got, [['one', 'event'], ['two', 'catch_up'], ['two, in the thread', 'catch_up'], ['three', 'event']]);
      assert.ok(mm.requests.filter((r) => r.path.endsWith(`/channels/${room.id}/posts`)).length >= 2, 'the rate-limited catch-up was tried again');
    } finally {
      listener.stop();
      await mm.stop();
    }
  });
});
