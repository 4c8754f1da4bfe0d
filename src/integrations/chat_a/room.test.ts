import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { systemActor } from '../../audit/audit.ts';
import { makeTemplate } from '../../../test/factories.ts';
import { startFakeMattermost, type FakeMattermost } from '../../../test/fakes/mattermost.ts';
import { testApp, uniq, waitFor, type TestApp } from '../../../test/harness.ts';
import { putSecret, setChatA } from '../../../test/integrations.ts';
import { chatAClient } from './client.ts';
import { chatASurface } from './surface.ts';

const BOT_TOKEN = `mm-room-bot-${'r'.repeat(20)}`;

// A team's chat_a room without a sandbox host: commands, refusals, one effect per message, the
// adapter's posts; runs from chat end to end are test/e2e/chat-a.test.ts.
describe('chat_a: messages in a team\'s room', () => {
  let t: TestApp;
  let mm: FakeMattermost;
  let inbound: ReturnType<TestApp['services']['chatA']['startInbound']>;
  let room: { id: string };
  let alice: { id: string };
  let team: string;
  let bot: { id: string };

  /** Drains the queue until `check` holds (a message reaches the queue through the WebSocket). */
  const until = (what: string, check: () => boolean | Promise<boolean>) =>
    waitFor(what, async () => {
      await t.drainJobs();
      return check();
    });
  const repliesTo = (postId: string) => mm.posts.filter((p) => p.root_id === postId);

  before(async () => {
    mm = await startFakeMattermost();
    t = await testApp({ modelProxy: true });
    bot = mm.addUser({ username: 'crewhouse', bot: true, token: BOT_TOKEN });
    alice = mm.addUser({ username: 'alice' });
    room = mm.addChannel({ teamId: mm.addTeam(uniq('acme')).id, name: 'payments', members: [bot.id, alice.id] });
    await putSecret(t, 'integrations/chat_a/bot_token', BOT_TOKEN);
    await setChatA(t, true, { url: mm.url });
    const tpl = await makeTemplate(t);
    team = uniq('team');
    const res = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: team, template: { name: tpl.name, version: null }, home: { surface: 'chat_a', room_id: room.id } } });
    assert.equal(res.status, 201, res.text);
    inbound = t.services.chatA.startInbound({ everyMs: 60_000, retry: { minMs: 50, maxMs: 200, jitterMs: 10 } });
    await inbound.refresh();
    await waitFor('the listener', () => mm.openSockets === 1);
  });
  after(async () => {
    await inbound.stop();
    await t.close();
    await mm.stop();
  });

  it('a mention asking for status, skills or mcp is answered in a thread under it; a message not for the bot does nothing', async () => {
    const quiet = mm.post(alice.id, room.id, 'lunch, anyone?');
    const status = mm.post(alice.id, room.id, '@crewhouse status');
    await until('the status answer', () => repliesTo(status.id).length === 1);
    assert.match(repliesTo(status.id)[0]!.message, new RegExp(`Team \\*\\*${team}\\*\\* has no runs yet`));
    assert.equal(repliesTo(quiet.id).length, 0);

    await t.services.teams.proposeSkill(systemActor('test'), team, { name: 'lint-rules', description: 'How we lint', instructions: 'Run the linter.', source: 'run_test/dev' });
    const skills = mm.post(alice.id, room.id, '@crewhouse skills');
    await until('the skills answer', () => repliesTo(skills.id).length === 1);
    assert.match(repliesTo(skills.id)[0]!.message, /`lint-rules` \(proposed, version 1\)/);
    const accept = mm.post(alice.id, room.id, '@crewhouse skills accept lint-rules');
    await until('the accept answer', () => repliesTo(accept.id).length === 1);
    assert.match(repliesTo(accept.id)[0]!.message, /Skill `lint-rules` is curated/);
    const listed = await t.request({ method: 'GET', url: `/api/v1/teams/${team}/skills`, token: t.adminToken });
    assert.deepEqual(listed.body.items.map((s: { name: string; status: string }) => [s.name, s.status]), [['lint-rules', 'curated']]);
    const again = mm.post(alice.id, room.id, '@crewhouse skills accept lint-rules');
    await until('the refusal', () => repliesTo(again.id).length === 1);
    assert.match(repliesTo(again.id)[0]!.message, /Crewhouse could not do that: skill "lint-rules" of team "[^"]+" is already curated/);

    const mcp = mm.post(alice.id, room.id, '@crewhouse mcp');
    await until('the mcp answer', () => repliesTo(mcp.id).length === 1);
    assert.match(repliesTo(mcp.id)[0]!.message, /has no MCP servers of its own/);
    const help = mm.post(alice.id, room.id, '@crewhouse frobnicate');
    await until('the list', () => repliesTo(help.id).length === 1);
    assert.match(repliesTo(help.id)[0]!.message, /`frobnicate` is not a Crewhouse command[\s\S]*`@crewhouse skills accept <name>`/);
  });

  it('a task becomes a run on chat_a with a thread (its link on the run; the Console may not answer or cancel it), its end said there; the same message seen again has no second effect', async () => {
    const task = mm.post(alice.id, room.id, '@crewhouse Fix the login page, it answers 500');
    const rootOf = () => mm.posts.find((p) => p.user_id === bot.id && p.root_id === '' && p.message.includes('Fix the login page'));
    await until('the thread', () => rootOf() !== undefined);
    const root = rootOf()!;
    assert.match(root.message, /^Run `run_\w+` started for @alice: team \*\*/);
    const runId = /`(run_\w+)`/.exec(root.message)![1]!;
    const run = await t.request({ method: 'GET', url: `/api/v1/runs/${runId}`, token: t.adminToken });
    assert.equal(run.body.surface, 'chat_a');
    assert.equal(run.body.chat_thread_url, mm.permalink(root.id));
    // The run's origin as every surface gives it: its thread and the thread's permalink; no other surface claims it.
    assert.deepEqual(await t.services.surfaces.chat_a.originOf(runId), { surface: 'chat_a', place: `${room.id}/${root.id}`, url: mm.permalink(root.id) });
    assert.equal(await t.services.surfaces.chat_b.originOf(runId), null);
    assert.equal(await t.services.surfaces.code_host.originOf(runId), null);
    for (const [url, body] of [[`/api/v1/runs/${runId}/replies`, { text: 'more' }], [`/api/v1/runs/${runId}/cancel`, undefined]] as const) {
      const res = await t.request({ method: 'POST', url, token: t.adminToken, body });
      if (res.status !== 404) assert.equal(res.status, 409, res.text);
      if (res.status === 409) assert.match(res.body.detail, /Mattermost thread/);
    }
    // This test app's host cannot run the team's sandbox: the run ends, and the thread says why.
    await until('the end in the thread', () => mm.threadOf(root.id).some((p) => /^The run (failed|was cancelled)/.test(p.message)));
    const item = { surface: 'chat_a' as const, message_id: task.id, room_id: room.id, thread_id: null, user_id: alice.id, user_name: 'alice', text: 'Fix the login page, it answers 500', addressed: true, command: false, via: 'catch_up' as const };
    assert.equal(await t.services.chatCore.receive(item), false);
    await t.drainJobs();
    assert.equal(mm.posts.filter((p) => p.root_id === '' && p.message.includes('Fix the login page') && p.user_id === bot.id).length, 1, 'one run');
    assert.equal(repliesTo(task.id).length, 0);
  });

  it('a task asked inside another conversation\'s thread becomes a run in that thread (not at the top of the room), and a reply there continues the run', async () => {
    const talk = mm.post(alice.id, room.id, 'the deploy went badly');
    const asked = mm.post(alice.id, room.id, '@crewhouse Look at the 502s after the deploy', talk.id);
    const firstOf = () => mm.posts.find((p) => p.user_id === bot.id && p.message.includes('Look at the 502s'));
    await until('the run\'s first post', () => firstOf() !== undefined);
    const first = firstOf()!;
    assert.equal(first.root_id, talk.id, 'in the thread where it was asked');
    assert.match(first.message, /^Run `run_\w+` started for @alice: team \*\*/);
    const runId = /`(run_\w+)`/.exec(first.message)![1]!;
    assert.deepEqual(await t.services.surfaces.chat_a.originOf(runId), { surface: 'chat_a', place: `${room.id}/${talk.id}`, url: mm.permalink(first.id) });
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/runs/${runId}`, token: t.adminToken })).body.chat_thread_url, mm.permalink(first.id));
    // This test app's host cannot run the team's sandbox: the run ends, and that thread says why.
    await until('the end in the thread', () => mm.threadOf(talk.id).some((p) => p.user_id === bot.id && /^The run (failed|was cancelled)/.test(p.message)));
    assert.equal(mm.posts.filter((p) => p.user_id === bot.id && p.root_id === '' && p.message.includes('Look at the 502s')).length, 0, 'nothing at the top of the room');
    assert.deepEqual(await t.services.chatCore.effectOf({ surface: 'chat_a', message_id: asked.id }), { effect: 'run', run_id: runId });
    // A reply in that thread, not addressed to the bot, is for the run (a follow-up), not a new task.
    const more = mm.post(alice.id, room.id, 'and the 504s too', talk.id);
    await until('the follow-up', async () => (await t.services.chatCore.effectOf({ surface: 'chat_a', message_id: more.id })).effect !== null);
    assert.deepEqual(await t.services.chatCore.effectOf({ surface: 'chat_a', message_id: more.id }), { effect: 'follow_up', run_id: runId });
  });

  it('progress queues the thread catching up with its run (once per change); nothing for a run without a thread', async () => {
    const runId = /`(run_\w+)`/.exec(mm.posts.find((p) => p.user_id === bot.id && p.root_id === '' && p.message.includes('Fix the login page'))!.message)![1]!;
    const mirrors = (id: string) => t.db.selectFrom('jobs').select('key').where('kind', '=', 'chat.mirror-thread').where('key', 'like', `chat.mirror-thread:${id}:%`).execute();
    const before = (await mirrors(runId)).length;
    await t.services.surfaces.chat_a.progress(runId, 'resumed', 9999);
    await t.services.surfaces.chat_a.progress(runId, 'resumed', 9999);
    const keys = (await mirrors(runId)).map((j) => j.key);
    assert.equal(keys.length, before + 1);
    assert.ok(keys.includes(`chat.mirror-thread:${runId}:resumed:9999`));
    await t.services.surfaces.chat_a.progress('run_nothreadatall0', 'started', 1);
    assert.equal((await mirrors('run_nothreadatall0')).length, 0);
    const posts = mm.posts.length;
    await t.drainJobs();
    assert.equal(mm.posts.length, posts, 'a thread that has caught up posts nothing again');
  });

  it('a slash command\'s delivery is settled with what its message did: the run it became', async () => {
    const COMMAND = `cmd-room-${'k'.repeat(20)}`;
    await putSecret(t, 'integrations/chat_a/command_token', COMMAND);
    await setChatA(t, true, { url: mm.url, slash_command: true });
    const cmd = mm.slashCommand({ token: COMMAND, channelId: room.id, userId: alice.id, text: 'task Tidy the payments README' });
    const res = await t.request({ method: 'POST', url: '/webhooks/chat_a', headers: cmd.headers, raw: cmd.body });
    assert.equal(res.status, 200, res.text);
    await t.drainJobs();
    const [d] = (await t.request({ method: 'GET', url: '/api/v1/integrations/chat_a/deliveries?limit=1', token: t.adminToken })).body.items;
    assert.equal(d.outcome, 'processed', JSON.stringify(d));
    assert.match(d.run_id, /^run_/);
    assert.equal(d.detail, `became run ${d.run_id}`);
    const run = await t.request({ method: 'GET', url: `/api/v1/runs/${d.run_id}`, token: t.adminToken });
    assert.equal(run.body.text, 'Tidy the payments README');
    // A replay of the request is counted on the same delivery, which stays settled.
    assert.equal((await t.request({ method: 'POST', url: '/webhooks/chat_a', headers: cmd.headers, raw: cmd.body })).status, 200);
    await t.drainJobs();
    const [again] = (await t.request({ method: 'GET', url: '/api/v1/integrations/chat_a/deliveries?limit=1', token: t.adminToken })).body.items;
    assert.deepEqual([again.outcome, again.run_id, again.times_received], ['processed', d.run_id, 2]);
  });

  it('a post carries its key: a retry finds the post made before; a role without a bot of its own is named by the surface bot', async () => {
    const surface = chatASurface({ surface: chatAClient(mm.url, BOT_TOKEN), publicBaseUrl: 'http://crewhouse.test', roleClient: async () => null });
    const root = mm.post(alice.id, room.id, 'a thread');
    const out = { room_id: room.id, thread_id: root.id, text: 'Build it', as: { team, role: 'dev' }, key: uniq('key') };
    assert.equal(await surface.find(out), null);
    const first = await surface.post(out);
    assert.deepEqual(await surface.find(out), { id: first.id });
    assert.equal(repliesTo(root.id).length, 1);
    assert.equal(repliesTo(root.id)[0]!.message, '**dev**: Build it');
    assert.equal(repliesTo(root.id)[0]!.user_id, bot.id);
  });

  it('long output goes as a file attached to its post (POST /files, then the post with file_ids), uploaded by whoever posts it; a retry finds it', async () => {
    const surface = chatASurface({ surface: chatAClient(mm.url, BOT_TOKEN), publicBaseUrl: 'http://crewhouse.test', roleClient: async () => null });
    const root = mm.post(alice.id, room.id, 'a thread with a diff');
    const diff = `diff --git a/x.ts b/x.ts\n${'+added line\n'.repeat(300)}`;
    const out = { room_id: room.id, thread_id: root.id, text: 'Done: the diff is attached', as: { team, role: 'dev' }, key: uniq('key'), file: { name: 'run_x-3.diff', content: diff, type: 'text/x-diff' } };
    const made = await surface.post(out);
    const [post] = repliesTo(root.id);
    assert.equal(post!.id, made.id);
    assert.equal(post!.message, '**dev**: Done: the diff is attached');
    assert.equal(post!.file_ids.length, 1);
    const file = mm.files.get(post!.file_ids[0]!)!;
    assert.deepEqual([file.name, file.mime_type, file.bytes.toString('utf8'), file.creator_id, file.post_id], ['run_x-3.diff', 'text/x-diff', diff, bot.id, made.id]);
    const read = await chatAClient(mm.url, BOT_TOKEN).getPost(made.id);
    assert.deepEqual(read.file_ids, [file.id]);
    assert.deepEqual(await surface.find(out), { id: made.id });
    assert.equal(repliesTo(root.id).length, 1);
  });

  it('posts wait as the server asks when it rate-limits (429, X-Ratelimit-*), and every post arrives', async () => {
    const surface = chatASurface({ surface: chatAClient(mm.url, BOT_TOKEN), publicBaseUrl: 'http://crewhouse.test', roleClient: async () => null });
    const root = mm.post(alice.id, room.id, 'a busy thread');
    mm.rateLimit = { perSecond: 20, burst: 5 };
    try {
      const made = [];
      for (let i = 0; i < 12; i++) made.push(await surface.post({ room_id: room.id, thread_id: root.id, text: `step ${i}`, as: null, key: uniq('k') }));
      assert.equal(repliesTo(root.id).length, 12);
    } finally {
      mm.rateLimit = null;
    }
  });

  it('a button click with an unknown or malformed token decides nothing', async () => {
    const click = (body: unknown) => t.app.inject({ method: 'POST', url: '/webhooks/chat_a/actions', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
    const base = { user_id: alice.id, user_name: 'alice', channel_id: room.id, post_id: mm.post(alice.id, room.id, 'x').id };
    const unknown = await click({ ...base, context: { token: 'a'.repeat(32), decision: 'approve' } });
    assert.equal(unknown.statusCode, 200, unknown.body);
    assert.match(unknown.json().ephemeral_text, /unknown to Crewhouse/);
    const bad = await click({ ...base, context: { token: 'short', decision: 'maybe' } });
    assert.equal(bad.statusCode, 400);
    assert.match(bad.json().detail, /context\.token, context\.decision/);
    assert.equal((await t.app.inject({ method: 'POST', url: '/webhooks/chat_a/actions', headers: { 'content-type': 'application/json' }, payload: 'not json' })).statusCode, 400);
  });
});
