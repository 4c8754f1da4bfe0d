import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { makeTemplate, putSecret, setIntegration } from '../../../test/factories.ts';
import { startFakeSlack, BOT_SCOPES, type FakeSlack } from '../../../test/fakes/slack.ts';
import { captureLogger, testApp, uniq, waitFor, type TestApp } from '../../../test/harness.ts';
import { CHAT_B_SECRET, chatBClient, ChatBError } from './client.ts';
import type { ChatBWork } from './events.ts';
import { startChatBListener } from './listener.ts';
import { workItemOf } from './inbound.ts';
import { handleMessageJob } from '../chat/handle-message.job.ts';
import { listJobs } from '../../queue/queue.ts';
import { confirmationPost, decidedUpdate, decisionOf, rolePost } from './posts.ts';
import { chatBSurface } from './surface.ts';
import { escapeText } from './text.ts';

const BOT_TOKEN = `xoxb-${'1'.repeat(12)}-${'b'.repeat(24)}`;
const APP_TOKEN = `xapp-1-A${'2'.repeat(10)}-${'a'.repeat(30)}`;

describe('chat_b: the connection test and a team\'s room', () => {
  let t: TestApp;
  let slack: FakeSlack;
  const answers: string[] = [];
  const test = async () => {
    const res = await t.request({ method: 'POST', url: '/api/v1/integrations/chat_b/test', token: t.adminToken });
    assert.equal(res.status, 200, res.text);
    answers.push(res.text);
    return res.body as { state: string; detail: string };
  };

  before(async () => {
    slack = await startFakeSlack();
    t = await testApp({ modelProxy: true });
  });
  after(async () => {
    await t.close();
    await slack.stop();
  });

  it('POST /integrations/chat_b/test asks Slack for real: missing tokens, refused tokens, a person\'s token, then ok saying whether roles get their own names', async () => {
    assert.match((await test()).detail, /the secret integrations\/chat_b\/bot_token has no value/);
    await setIntegration(t, 'chat_b', false, { api_url: slack.apiUrl });
    const shown = await t.request({ method: 'GET', url: '/api/v1/integrations/chat_b', token: t.adminToken });
    assert.equal(shown.body.settings.api_url, slack.apiUrl.replace(/\/$/, ''));
    await putSecret(t, CHAT_B_SECRET.bot, 'xoxb-not-a-known-token');
    assert.match((await test()).detail, /integrations\/chat_b\/app_token has no value/);
    await putSecret(t, CHAT_B_SECRET.app, APP_TOKEN);
    const refused = await test();
    assert.equal(refused.state, 'error');
    assert.match(refused.detail, /^Slack refused the token in integrations\/chat_b\/bot_token \(invalid_auth\)/);

    const person = slack.addUser({ name: 'alice', token: 'xoxp-person-token-0000' });
    await putSecret(t, CHAT_B_SECRET.bot, 'xoxp-person-token-0000');
    assert.match((await test()).detail, new RegExp(`belongs to @${person.name}, a person, not the app's bot`));

    slack.installApp({ botName: 'crewhouse', botToken: BOT_TOKEN, appToken: APP_TOKEN });
    await putSecret(t, CHAT_B_SECRET.bot, BOT_TOKEN);
    await putSecret(t, CHAT_B_SECRET.app, BOT_TOKEN);
    assert.match((await test()).detail, /the token in integrations\/chat_b\/app_token is not the right kind of token \(not_allowed_token_type\)/);
    await putSecret(t, CHAT_B_SECRET.app, APP_TOKEN);

    const plain = await test();
    assert.equal(plain.state, 'ok', plain.detail);
    assert.equal(plain.detail, 'connected to the Acme workspace as the bot @crewhouse, Socket Mode ready; the app lacks chat:write.customize, so roles will post under the bot\'s name with the role named in the text (add the scope and reinstall the app to give roles their own names)');
    slack.setScopes(BOT_TOKEN, [...BOT_SCOPES, 'chat:write.customize']);
    assert.match((await test()).detail, /Socket Mode ready; roles post with their own names and pictures$/);

    slack.failing = true;
    try {
      assert.match((await test()).detail, /^Slack failed \(HTTP 500\) while asking Slack who the bot is; try again later$/);
    } finally {
      slack.failing = false;
    }
    slack.throttleNext = 1;
    assert.match((await test()).detail, /^Slack is rate-limiting the app while asking Slack who the bot is; it asked to wait 1 s/);
    await setIntegration(t, 'chat_b', false, { api_url: 'http://127.0.0.1:1/api' });
    assert.match((await test()).detail, /could not be reached while asking Slack who the bot is: check the chat_b api_url setting/);
    await setIntegration(t, 'chat_b', false, { api_url: slack.apiUrl });

    const all = [...answers, ...t.logs].join('\n');
    for (const secret of [BOT_TOKEN, APP_TOKEN, 'xoxp-person-token-0000', 'xoxb-not-a-known-token']) assert.ok(!all.includes(secret), 'no token in an answer or a log line');
  });

  it('a team homed in a chat_b channel, or linked to one: the bot must be a member; room_label is the channel\'s name', async () => {
    const tpl = await makeTemplate(t);
    const bot = slack.app!.botUser;
    const bob = slack.addUser({ name: uniq('bob') });
    const room = slack.addChannel({ name: 'payments', members: [bot.id, bob.id] });
    const create = (home: Record<string, unknown>) => t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: uniq('team'), template: { name: tpl.name, version: null }, home } });

    const disabled = await create({ surface: 'chat_b', room_id: room.id });
    assert.equal(disabled.status, 503, disabled.text);
    assert.match(disabled.body.detail, /chat_b integration is not enabled/);
    await setIntegration(t, 'chat_b', true, { api_url: slack.apiUrl });

    const noRoom = await create({ surface: 'chat_b' });
    assert.equal(noRoom.status, 422);
    assert.deepEqual(noRoom.body.errors[0], { field: 'home.room_id', message: 'a chat_b room is the id of its channel (the channel\'s details show it at the bottom)' });
    const notAnId = await create({ surface: 'chat_b', room_id: '#payments' });
    assert.equal(notAnId.status, 422);
    assert.match(notAnId.body.errors[0].message, /is not a chat_b channel id/);
    const unknown = await create({ surface: 'chat_b', room_id: 'C0000000000' });
    assert.equal(unknown.status, 422);
    assert.match(unknown.body.detail, /cannot see channel C0000000000: it does not exist or is private/);
    const secret = slack.addChannel({ name: 'secret', private: true, members: [bob.id] });
    assert.match((await create({ surface: 'chat_b', room_id: secret.id })).body.detail, /cannot see channel/);
    const outside = slack.addChannel({ name: 'elsewhere', members: [bob.id] });
    const notMember = await create({ surface: 'chat_b', room_id: outside.id });
    assert.equal(notMember.status, 422);
    assert.equal(notMember.body.errors[0].message, 'the chat_b bot @crewhouse is not a member of #elsewhere: invite it with /invite @crewhouse in the channel, then try again');
    const archived = slack.addChannel({ name: 'old', members: [bot.id] });
    archived.is_archived = true;
    assert.match((await create({ surface: 'chat_b', room_id: archived.id })).body.detail, /#old is archived/);
    slack.failing = true;
    try {
      const down = await create({ surface: 'chat_b', room_id: room.id });
      assert.equal(down.status, 502, down.text);
      assert.match(down.body.detail, /Slack failed \(HTTP 500\)/);
      assert.match(down.body.detail, /Nothing was changed: send this again once Slack answers/);
    } finally {
      slack.failing = false;
    }
    await putSecret(t, CHAT_B_SECRET.bot, 'xoxb-revoked-token');
    const revoked = await create({ surface: 'chat_b', room_id: room.id });
    assert.equal(revoked.status, 503, revoked.text);
    assert.match(revoked.body.detail, /Slack refused the token in integrations\/chat_b\/bot_token \(invalid_auth\)/);
    assert.match(revoked.body.detail, /Nothing was changed: Slack refuses the chat_b integration's credentials, which this request cannot mend; an admin mends the integration \(its connection test says what fails\), then send this again$/);
    await putSecret(t, CHAT_B_SECRET.bot, BOT_TOKEN);

    const ok = await create({ surface: 'chat_b', room_id: room.id, room_label: 'whatever the caller said' });
    assert.equal(ok.status, 201, ok.text);
    assert.deepEqual(ok.body.home, { surface: 'chat_b', room_id: room.id, room_label: '#payments' });

    const links = `/api/v1/teams/${ok.body.name}/links`;
    const side = slack.addChannel({ name: 'payments-ops', members: [bot.id] });
    const linked = await t.request({ method: 'PUT', url: links, token: t.adminToken, body: { surface: 'chat_b', external_id: side.id } });
    assert.equal(linked.status, 201, linked.text);
    assert.deepEqual([linked.body.label, linked.body.verification], ['#payments-ops', 'not_applicable']);
    const refused = await t.request({ method: 'PUT', url: links, token: t.adminToken, body: { surface: 'chat_b', external_id: outside.id } });
    assert.equal(refused.status, 422);
    assert.equal(refused.body.errors[0].field, 'external_id');
    // A run has one chat thread, in the home room: a room of the other chat surface is refused when it is linked, saying what to do instead.
    const otherChat = await t.request({ method: 'PUT', url: links, token: t.adminToken, body: { surface: 'chat_a', external_id: 'payments-room-id' } });
    assert.equal(otherChat.status, 409, otherChat.text);
    assert.match(otherChat.body.detail, /lives in a chat_b room.*a chat_a room cannot be linked to it\. Link a chat_b room instead/);
    assert.deepEqual((await t.request({ method: 'GET', url: links, token: t.adminToken })).body.items.map((l: any) => l.external_id), [side.id]);
    assert.ok(!t.logs.join('\n').includes(BOT_TOKEN));
  });

  it('a task asked inside another conversation\'s thread becomes a run whose posts go to that thread (thread_ts), and a reply there continues it', async () => {
    const tpl = await makeTemplate(t);
    const bot = slack.app!.botUser;
    const alice = slack.addUser({ name: uniq('alice') });
    const room = slack.addChannel({ name: uniq('ops'), members: [bot.id, alice.id] });
    const made = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: uniq('team'), template: { name: tpl.name, version: null }, home: { surface: 'chat_b', room_id: room.id } } });
    assert.equal(made.status, 201, made.text);
    const talk = slack.say(alice.id, room.id, 'the deploy went badly');
    const asked = slack.say(alice.id, room.id, `<@${bot.id}> look at the 502s`, talk.ts);
    const item = (ts: string, text: string, addressed: boolean) => ({ surface: 'chat_b' as const, message_id: `${room.id}:${ts}`, room_id: room.id, thread_id: talk.ts, user_id: alice.id, user_name: alice.name, text, addressed, command: false, via: 'event' as const });
    assert.equal(await t.services.chatCore.receive(item(asked.ts, 'look at the 502s', true)), true);
    const ours = () => slack.messages.filter((m) => m.user === bot.id && m.channel === room.id);
    // This test app's host cannot run the team's sandbox: the run ends, and the thread says why.
    await waitFor('the run\'s end in the thread', async () => {
      await t.drainJobs();
      return ours().some((m) => /^The run (failed|was cancelled)/.test(m.text));
    });
    assert.ok(ours().length >= 2);
    assert.deepEqual(ours().map((m) => m.thread_ts), ours().map(() => talk.ts), 'every post in the thread where it was asked, none at the top of the channel');
    const runId = /`(run_\w+)`/.exec(ours()[0]!.text)![1]!;
    assert.equal((await t.services.chatCore.originOf(runId))?.place, `${room.id}/${talk.ts}`);
    const more = slack.say(alice.id, room.id, 'and the 504s', talk.ts);
    await t.services.chatCore.receive(item(more.ts, 'and the 504s', false));
    await t.drainJobs();
    assert.deepEqual(await t.services.chatCore.effectOf({ surface: 'chat_b', message_id: `${room.id}:${more.ts}` }), { effect: 'follow_up', run_id: runId });
  });
});

describe('chat_b: the surface\'s bot identity', () => {
  it('many posts ask Slack who the bot is once; a new token or api_url asks again', async () => {
    const slack = await startFakeSlack();
    const t = await testApp({ modelProxy: true });
    try {
      const app = slack.installApp({ botName: 'crewhouse', botToken: BOT_TOKEN, appToken: APP_TOKEN });
      const room = slack.addChannel({ name: 'busy', members: [app.botUser.id] });
      await putSecret(t, CHAT_B_SECRET.bot, BOT_TOKEN);
      await putSecret(t, CHAT_B_SECRET.app, APP_TOKEN);
      await setIntegration(t, 'chat_b', true, { api_url: slack.apiUrl });
      // Each post job takes a fresh surface, as the chat core does; a role's post needs the scopes, `how` the name.
      const postJob = async (text: string) => {
        const s = await t.services.chatB.chatSurface();
        assert.ok(!('missing' in s), JSON.stringify(s));
        await s.post({ room_id: room.id, thread_id: null, text, as: { team: 'payments', role: 'lead' }, key: uniq('key') });
        assert.equal(await s.how(), '@crewhouse');
      };
      for (let i = 0; i < 6; i++) await postJob(`post ${i}`);
      assert.equal(slack.messages.length, 6);
      assert.equal(slack.callsOf('auth.test'), 1, 'one auth.test for six post jobs');

      const rotated = `xoxb-${'3'.repeat(12)}-${'c'.repeat(24)}`;
      slack.rotate(BOT_TOKEN, rotated);
      await putSecret(t, CHAT_B_SECRET.bot, rotated);
      await postJob('after the rotation');
      await postJob('again');
      assert.equal(slack.callsOf('auth.test'), 2, 'a new token: asked again, once');
      await setIntegration(t, 'chat_b', true, { api_url: slack.apiUrl.replace('127.0.0.1', 'localhost') });
      await postJob('the same workspace at another address');
      assert.equal(slack.callsOf('auth.test'), 3, 'new settings: asked again');
      assert.equal(slack.messages.length, 9);
    } finally {
      await t.close();
      await slack.stop();
    }
  });
});

describe('chat_b: the client', () => {
  it('posts as a role only with chat:write.customize, updates, links, uploads; Slack\'s errors become clear reasons; a rate limit waits or fails as asked', async () => {
    const slack = await startFakeSlack();
    const { logger } = captureLogger();
    try {
      const app = slack.installApp({ botName: 'crewhouse', botToken: BOT_TOKEN, appToken: APP_TOKEN, scopes: [...BOT_SCOPES, 'chat:write.customize'] });
      const room = slack.addChannel({ name: 'dev', members: [app.botUser.id] });
      const client = chatBClient({ apiUrl: slack.apiUrl, token: BOT_TOKEN, secret: CHAT_B_SECRET.bot, rateLimited: 'wait', logger });
      const root = await client.post({ channel: room.id, text: 'Working on it' });
      const lena = { role: 'lead', displayName: 'Lena the Lead', iconUrl: 'https://x.example/lena.png' };
      await client.post(rolePost({ channel: room.id, thread_ts: root.ts, text: escapeText('the plan: a < b'), role: lena, customize: true }));
      // Without chat:write.customize the role is named in the text.
      await client.post(rolePost({ channel: room.id, thread_ts: root.ts, text: 'the plan, again', role: lena, customize: false }));
      assert.deepEqual(slack.messages.map((m) => [m.text, m.username ?? null, m.icon_url ?? null, m.thread_ts ?? null]), [
        ['Working on it', null, null, null],
        ['the plan: a &lt; b', 'Lena the Lead', 'https://x.example/lena.png', root.ts],
        ['[Lena the Lead] the plan, again', null, null, root.ts],
      ]);
      await client.update({ channel: room.id, ts: root.ts, text: 'Done' });
      assert.equal(slack.messages[0]!.text, 'Done');
      slack.messages.splice(1);
      assert.equal(await client.permalink(room.id, root.ts), slack.permalink(room.id, root.ts));
      // A thread longer than a page (200): Slack answers its root first on every page; the root is kept once, and only when after `oldest`.
      const asker = slack.addUser({ name: 'asker' });
      room.members.add(asker.id);
      const many = Array.from({ length: 250 }, (_, i) => slack.say(asker.id, room.id, `reply ${i}`, root.ts));
      const whole = await client.replies(room.id, root.ts, '0');
      assert.deepEqual([whole.length, whole[0]!.ts, whole.at(-1)!.text, new Set(whole.map((m) => m.ts)).size], [251, root.ts, 'reply 249', 251]);
      const since = await client.replies(room.id, root.ts, many[99]!.ts);
      assert.deepEqual([since.length, since[0]!.text], [150, 'reply 100']);
      assert.equal((await client.replies(room.id, root.ts, many[99]!.ts, 20)).at(-1)!.text, 'reply 119', 'bounded: the oldest first');
      slack.messages.splice(1);
      await client.upload({ channel: room.id, thread_ts: root.ts, filename: 'run.log', title: 'the log', content: 'line\n'.repeat(1000) });
      assert.equal([...slack.files.values()][0]!.bytes!.length, 5000);

      const outside = slack.addChannel({ name: 'elsewhere' });
      await assert.rejects(client.post({ channel: outside.id, text: 'x' }), (err: ChatBError) => err.code === 'not_in_channel' && err.message === `Slack refused posting in channel ${outside.id} (not_in_channel)` && !err.transient);
      await assert.rejects(client.channel('C0NOPE00000'), (err: ChatBError) => err.code === 'channel_not_found');

      slack.throttleNext = 1;
      const before = slack.calls.length;
      await client.post({ channel: room.id, thread_ts: root.ts, text: 'after the wait' });
      assert.equal(slack.calls.length - before, 2, 'the rate-limited post was tried again after Retry-After');
      slack.throttleNext = 1;
      const impatient = chatBClient({ apiUrl: slack.apiUrl, token: BOT_TOKEN, secret: CHAT_B_SECRET.bot, rateLimited: 'fail', logger });
      await assert.rejects(impatient.me(), (err: ChatBError) => err.code === 'ratelimited' && err.retryAfterSeconds === 1 && err.transient);
      const wrong = chatBClient({ apiUrl: slack.apiUrl, token: 'xoxb-wrong', secret: CHAT_B_SECRET.bot, rateLimited: 'fail', logger });
      await assert.rejects(wrong.me(), (err: ChatBError) => err.refusedToken && !err.message.includes('xoxb-wrong'));
    } finally {
      await slack.stop();
    }
  });
});

describe('chat_b: a post with long output', () => {
  it('goes as its summary and a file shared in the thread under it (files.uploadV2), once however often it is retried', async () => {
    const slack = await startFakeSlack();
    const { logger } = captureLogger();
    try {
      const app = slack.installApp({ botName: 'crewhouse', botToken: BOT_TOKEN, appToken: APP_TOKEN, scopes: BOT_SCOPES });
      const room = slack.addChannel({ name: 'dev', members: [app.botUser.id] });
      const client = chatBClient({ apiUrl: slack.apiUrl, token: BOT_TOKEN, secret: CHAT_B_SECRET.bot, rateLimited: 'wait', logger });
      const surface = chatBSurface({ client, identity: () => client.me(), roleLook: async (_team, role) => ({ role, displayName: role, iconUrl: null }) });
      const root = await client.post({ channel: room.id, text: 'Run started' });
      const diff = `diff --git a/x.ts b/x.ts\n${'+added line\n'.repeat(200)}`;
      const out = { room_id: room.id, thread_id: root.ts, text: 'Done: see the diff', as: null, key: uniq('key'), file: { name: 'run_x-7.diff', content: diff, type: 'text/x-diff' } };
      const made = await surface.post(out);
      const thread = () => slack.messages.filter((m) => m.thread_ts === root.ts);
      assert.deepEqual(thread().map((m) => [m.text, (m.files ?? []).map((f) => f.name)]), [['Done: see the diff', []], ['', ['run_x-7.diff']]]);
      const file = [...slack.files.values()].find((f) => f.name === 'run_x-7.diff')!;
      assert.equal(file.bytes!.toString('utf8'), diff);
      assert.deepEqual([file.channel, file.thread_ts], [room.id, root.ts]);
      // A retry finds the post and its file: nothing is posted or shared again.
      assert.deepEqual(await surface.find(out), { id: made.id });
      assert.equal(thread().length, 2);
      // A try that died after the message and before its file: the retry shares the file, once.
      slack.messages.splice(slack.messages.findIndex((m) => m.files?.length), 1);
      assert.deepEqual(await surface.find(out), { id: made.id });
      assert.deepEqual(await surface.find(out), { id: made.id });
      assert.deepEqual(thread().map((m) => (m.files ?? []).map((f) => f.name)), [[], ['run_x-7.diff']]);
    } finally {
      await slack.stop();
    }
  });
});

describe('chat_b: the Socket Mode listener', () => {
  it('hands on people\'s messages, commands and clicks once each, acks every envelope, drops its own, bots\', edits and deletions, and catches up after a dropped socket', async () => {
    const slack = await startFakeSlack();
    const { logger, lines } = captureLogger();
    const app = slack.installApp({ botName: 'crewhouse', botToken: BOT_TOKEN, appToken: APP_TOKEN });
    const alice = slack.addUser({ name: 'alice' });
    const otherBot = slack.addUser({ name: 'deploybot', bot: true, token: 'xoxb-other-bot-000' });
    const room = slack.addChannel({ name: 'payments', members: [app.botUser.id, alice.id, otherBot.id] });
    const got: ChatBWork[] = [];
    const threads: Array<{ channel: string; ts: string }> = [];
    const listener = startChatBListener({ apiUrl: slack.apiUrl, botToken: BOT_TOKEN, appToken: APP_TOKEN, rooms: async () => [room.id], threads: async () => threads, onWork: (w) => void got.push(w), logger, pingTimeoutMs: 300 });
    const bot = chatBClient({ apiUrl: slack.apiUrl, token: BOT_TOKEN, secret: CHAT_B_SECRET.bot, rateLimited: 'wait', logger });
    const settled = () => waitFor('every envelope acked', () => slack.unacked.length === 0);
    try {
      await listener.ready;
      assert.equal(slack.openSockets, 1);

      // A mention arrives twice (message and app_mention): one piece of work, addressed.
      const task = slack.say(alice.id, room.id, `<@${app.botUser.id}> fix the login &amp; the signup`);
      await waitFor('the mention', () => got.length === 1);
      await settled();
      assert.deepEqual(got[0], { kind: 'message', key: `${room.id}:${task.ts}`, channel: room.id, user: alice.id, ts: task.ts, thread_ts: null, text: 'fix the login & the signup', addressed: true, via: 'event' });

      // The bot's own post and reply, another bot's, an edit and a deletion: acked, not work.
      const root = await bot.post({ channel: room.id, text: 'On it' });
      threads.push({ channel: room.id, ts: root.ts });
      slack.say(otherBot.id, room.id, 'deployed');
      slack.edit(room.id, task.ts, `<@${app.botUser.id}> fix the login`);
      const reply = slack.say(alice.id, room.id, 'also the logout', root.ts);
      await waitFor('the reply', () => got.length === 2);
      slack.remove(room.id, reply.ts);
      await settled();
      assert.deepEqual(got.map((w) => w.kind === 'message' && [w.text, w.addressed, w.thread_ts]), [['fix the login & the signup', true, null], ['also the logout', false, root.ts]]);

      // A slash command and a click.
      slack.slashCommand(alice.id, room.id, 'cancel 42');
      const question = confirmationPost({ channel: room.id, thread_ts: root.ts, text: 'May the dev role push to main?', confirmation: 'confirmation-7', askedOf: alice.id });
      const confirm = await bot.post(question);
      const buttons = (slack.messages.at(-1)!.blocks![1] as { elements: Array<{ action_id: string; value: string }> }).elements;
      assert.equal(slack.messages.at(-1)!.text, `<@${alice.id}> May the dev role push to main?`);
      slack.click(alice.id, room.id, confirm.ts, { action_id: buttons[0]!.action_id, value: buttons[0]!.value });
      await waitFor('the command and the click', () => got.length === 4);
      await settled();
      const [command, click] = got.slice(2);
      assert.deepEqual(command && command.kind === 'command' && [command.command, command.text, command.what], ['/crewhouse', 'cancel 42', { kind: 'cancel', run: '42' }]);
      assert.deepEqual(click && click.kind === 'action' && [decisionOf(click.action_id), click.value, click.user, click.message_ts, click.thread_ts], ['approve', 'confirmation-7', alice.id, confirm.ts, root.ts]);
      // The message then shows who decided, without its buttons.
      await bot.update(decidedUpdate({ channel: room.id, ts: confirm.ts, text: 'May the dev role push to main?', decision: 'approve', by: alice.id }));
      const decided = slack.messages.find((m) => m.ts === confirm.ts)!;
      assert.deepEqual(decided.blocks!.map((b) => (b as { type: string }).type), ['section', 'context']);
      assert.match(decided.text, new RegExp(`Approved by <@${alice.id}>$`));
      await settled();

      // Slack sends an acknowledged envelope again (its ack lost): acked again, no second work.
      const acks = slack.acks.length;
      slack.redeliver(slack.sent.find((e) => e.type === 'slash_commands')!.envelope_id);
      await waitFor('the redelivery acked', () => slack.acks.length === acks + 1);
      // A disconnect message: the listener reconnects.
      slack.disconnect();
      await waitFor('the reconnection', () => slack.calls.filter((c) => c.method === 'apps.connections.open').length === 2 && slack.openSockets === 1);

      // The socket drops and Slack gives up on what happened meanwhile: the catch-up finds it.
      slack.loseWhileDisconnected = true;
      slack.dropSockets();
      const missed = slack.say(alice.id, room.id, 'are you there?');
      const missedReply = slack.say(alice.id, room.id, 'in the thread too', root.ts);
      slack.loseWhileDisconnected = false;
      await waitFor('the catch-up', () => got.length === 6);
      // Rooms and threads are caught up one after the other: in either order.
      assert.deepEqual(got.slice(4).map((w) => w.kind === 'message' && [w.key, w.via]).sort(), [[`${room.id}:${missed.ts}`, 'catch_up'], [`${room.id}:${missedReply.ts}`, 'catch_up']]);
      await settled();
      assert.equal(got.length, 6, 'nothing was handed on twice');
      assert.ok(!lines.join('\n').includes(BOT_TOKEN) && !lines.join('\n').includes(APP_TOKEN));
    } finally {
      await listener.stop();
      await slack.stop();
    }
  });

  it('reconnects when apps.connections.open is rate-limited, and stops, saying why, when Slack refuses the app token', async () => {
    const slack = await startFakeSlack();
    const { logger, lines } = captureLogger();
    slack.installApp({ botName: 'crewhouse', botToken: BOT_TOKEN, appToken: APP_TOKEN });
    const listener = startChatBListener({ apiUrl: slack.apiUrl, botToken: BOT_TOKEN, appToken: APP_TOKEN, rooms: async () => [], onWork: () => {}, logger, pingTimeoutMs: 300, reconnectMs: 10 });
    const opens = () => slack.calls.filter((c) => c.method === 'apps.connections.open').length;
    try {
      await listener.ready;
      slack.throttleNext = 1;
      slack.dropSockets();
      await waitFor('the reconnection after the rate limit', () => opens() === 3 && slack.openSockets === 1);
      slack.revoke(APP_TOKEN);
      slack.dropSockets();
      await waitFor('the listener to stop', () => lines.some((l) => l.includes('the chat_b listener stopped')));
      assert.match(lines.find((l) => l.includes('the chat_b listener stopped'))!, /Slack refused the token in integrations\/chat_b\/app_token \(invalid_auth\) while opening a Socket Mode connection/);
      assert.equal(opens(), 4, 'no retry after the token was refused');
      assert.ok(!lines.join('\n').includes(APP_TOKEN));
    } finally {
      await listener.stop();
      await slack.stop();
    }
  });

  it('a message holding a NUL character is handed on once, the NUL removed: its work is queued and the envelope acked, not sent again and again', async () => {
    const t = await testApp();
    const slack = await startFakeSlack();
    const { logger, lines } = captureLogger();
    const app = slack.installApp({ botName: 'crewhouse', botToken: BOT_TOKEN, appToken: APP_TOKEN });
    const alice = slack.addUser({ name: 'alice' });
    const room = slack.addChannel({ name: 'payments', members: [app.botUser.id, alice.id] });
    // As the inbound hands work on: the work item queued as the chat core's job (whose payload cannot hold a NUL).
    const listener = startChatBListener({
      apiUrl: slack.apiUrl,
      botToken: BOT_TOKEN,
      appToken: APP_TOKEN,
      rooms: async () => [room.id],
      onWork: async (w) => {
        if (w.kind !== 'action') await handleMessageJob.enqueue(t.db, { message: workItemOf(w, 'ali\u0000ce') }, { key: `nul-test:${w.key}` });
      },
      logger,
      pingTimeoutMs: 300,
    });
    try {
      await listener.ready;
      slack.say(alice.id, room.id, `<@${app.botUser.id}> fix the\u0000 login \ud800`);
      const jobs = await waitFor('the message queued', async () => {
        const found = await listJobs(t.db, { kind: handleMessageJob.kind, limit: 10 });
        return found.length ? found : null;
      });
      await waitFor('the envelope acked', () => slack.unacked.length === 0);
      assert.equal(jobs.length, 1);
      const { message } = jobs[0]!.payload as { message: { text: string; user_name: string } };
      assert.deepEqual([message.text, message.user_name], ['fix the login \ufffd', 'alice']);
      assert.ok(!lines.some((l) => l.includes('could not be handed on')), lines.join('\n'));
    } finally {
      await listener.stop();
      await slack.stop();
      await t.close();
    }
  });

  it('leaves an envelope unacknowledged when its work cannot be handed on, and takes it when Slack sends it again', async () => {
    const slack = await startFakeSlack();
    const { logger, lines } = captureLogger();
    const app = slack.installApp({ botName: 'crewhouse', botToken: BOT_TOKEN, appToken: APP_TOKEN });
    const alice = slack.addUser({ name: 'alice' });
    const room = slack.addChannel({ name: 'payments', members: [app.botUser.id, alice.id] });
    let failing = true;
    const got: ChatBWork[] = [];
    const listener = startChatBListener({
      apiUrl: slack.apiUrl,
      botToken: BOT_TOKEN,
      appToken: APP_TOKEN,
      rooms: async () => [room.id],
      onWork: (w) => {
        if (failing) throw new Error('the database is down');
        got.push(w);
      },
      logger,
      pingTimeoutMs: 300,
    });
    try {
      await listener.ready;
      const id = slack.slashCommand(alice.id, room.id, 'status');
      await waitFor('the first delivery', () => slack.sent.some((e) => e.envelope_id === id));
      await waitFor('the handler failed', () => lines.some((l) => l.includes('chat_b work could not be handed on')));
      assert.deepEqual(slack.unacked, [id]);
      failing = false;
      slack.redeliverUnacked();
      await waitFor('the redelivery handed on and acked', () => got.length === 1 && slack.unacked.length === 0);
      assert.equal(got[0]!.kind, 'command');
    } finally {
      await listener.stop();
      await slack.stop();
    }
  });
});
