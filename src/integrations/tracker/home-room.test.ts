import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { makeIntegration, makeRun, makeTemplate } from '../../../test/factories.ts';
import { startFakeLinear, type FakeLinear } from '../../../test/fakes/linear.ts';
import { startFakeMattermost, type FakeMattermost } from '../../../test/fakes/mattermost.ts';
import { captureLogger, testApp, uniq, type TestApp } from '../../../test/harness.ts';
import { putSecret, setChatA } from '../../../test/integrations.ts';
import { runCliIn } from '../../../test/run-cli.ts';
import { makeHostRow } from '../../../test/sandboxes.ts';
import { systemActor } from '../../audit/audit.ts';
import { Problem } from '../../errors/problems.ts';
import { byKind } from '../../queue/queue.ts';
import { createJobRunner } from '../../queue/runner.ts';
import { handleMessageJob } from '../chat/handle-message.job.ts';
import { mirrorThreadJob } from '../chat/mirror-thread.job.ts';
import { processDeliveryJob } from '../webhooks/process-delivery.job.ts';
import { postProgressJob } from './post-progress.job.ts';

const BOT_TOKEN = `mm-home-bot-${'h'.repeat(20)}`;

// A team homed in a chat_a room takes work from its linked tracker: the run's surface is the
// tracker (progress as Linear agent activities), and the chat core opens a thread for it in the
// home room (a root naming the issue, then the run's posts), where a reply adds to the run and
// `cancel` stops it. The Console still cannot give such a team a task. No sandbox runs here: the
// surfaces' jobs are performed by a runner of those kinds alone; through a real sandbox it is
// test/e2e/trackers.test.ts.
describe('a chat-homed team\'s work from a tracker', () => {
  let t: TestApp;
  let mm: FakeMattermost;
  let linear: FakeLinear;
  let room: { id: string };
  let bot: { id: string };
  let alice: { id: string };
  let team: string;
  let engTeam: string;
  let base: string;

  /** Performs the due jobs of the surfaces (deliveries, tracker progress, chat messages and threads), not the engine's. */
  const drainSurfaces = () =>
    createJobRunner({
      db: t.db,
      logger: captureLogger().logger,
      handlers: byKind([
        processDeliveryJob.handler({ webhooks: t.services.webhooks }),
        postProgressJob.handler({ tracker_a: t.services.trackerA, tracker_b: t.services.trackerB }),
        handleMessageJob.handler(t.services.chatCore),
        mirrorThreadJob.handler(t.services.chatCore),
      ]),
    }).drain();

  before(async () => {
    t = await testApp({ modelProxy: true });
    await makeHostRow(t.db, { providers: ['local', 'microvm'] });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    [mm, linear] = await Promise.all([startFakeMattermost(), startFakeLinear()]);
    bot = mm.addUser({ username: 'crewhouse', bot: true, token: BOT_TOKEN });
    alice = mm.addUser({ username: 'alice' });
    room = mm.addChannel({ teamId: mm.addTeam(uniq('acme')).id, name: 'payments', members: [bot.id, alice.id] });
    await putSecret(t, 'integrations/chat_a/bot_token', BOT_TOKEN);
    await setChatA(t, true, { url: mm.url });
    const secret = crypto.randomBytes(16).toString('hex');
    await makeIntegration(t, 'tracker_a', { settings: { api_url: linear.url }, secrets: { access_token: linear.appToken, webhook_secret: secret } });
    linear.setWebhook({ url: `${base}/webhooks/tracker_a`, secret });
    const tpl = await makeTemplate(t);
    team = uniq('team');
    const res = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: team, template: { name: tpl.name, version: null }, home: { surface: 'chat_a', room_id: room.id } } });
    assert.equal(res.status, 201, res.text);
    engTeam = linear.addTeam({ key: 'ENG', name: 'Engineering' }).id;
    const link = await t.request({ method: 'PUT', url: `/api/v1/teams/${team}/links`, token: t.adminToken, body: { surface: 'tracker_a', external_id: 'ENG' } });
    assert.equal(link.status, 201, link.text);
  });
  after(async () => {
    await t.close();
    await Promise.all([mm.stop(), linear.stop()]);
  });

  it('createRun takes tracker and code-host work for the team; the Console and another chat are still 409', async () => {
    const fromTracker = await makeRun(t, { team, surface: 'tracker_a', external_ref: 'https://linear.app/acme/issue/ENG-1', actor: 'tracker_a:Alice' });
    assert.equal((await t.services.runs.get(fromTracker.run_id)).run.surface, 'tracker_a');
    const fromCode = await makeRun(t, { team, surface: 'code_host', actor: 'code_host:alice' });
    assert.equal((await t.services.runs.get(fromCode.run_id)).run.surface, 'code_host');
    // A run from the console has no link back (nor one from a chat: its thread is chat_thread_url).
    assert.equal((await t.services.runs.get((await makeRun(t)).run_id)).run.origin_url, null);
    const refused = (err: unknown) => err instanceof Problem && err.status === 409 && /lives on Mattermost: give it work in its chat room/.test(err.detail);
    await assert.rejects(makeRun(t, { team }), refused);
    await assert.rejects(makeRun(t, { team, surface: 'chat_b', external_ref: 'C1/1.2' }), refused);
    const route = await t.request({ method: 'POST', url: `/api/v1/teams/${team}/tasks`, token: t.adminToken, body: { text: 'x' } });
    assert.equal(route.status, 409, route.text);
    for (const id of [fromTracker.run_id, fromCode.run_id]) await t.services.runs.cancel(systemActor('test'), id);
  });

  it('a Linear issue becomes a run told in Linear and in a thread of the home room; a reply in the thread adds to it, `cancel` there stops it, and Linear hears of both', async () => {
    const ada = linear.addUser({ name: 'Ada' });
    const issue = linear.addIssue({ teamId: engTeam, title: 'Fix the footer', description: 'It overlaps.', creatorId: ada.id });
    const { session, delivery } = await linear.assignToApp(issue.id, ada.id);
    assert.equal(delivery.status, 202, delivery.response);
    await drainSurfaces();
    const rows = (await t.request({ method: 'GET', url: '/api/v1/integrations/tracker_a/deliveries?limit=50', token: t.adminToken })).body.items as Array<Record<string, any>>;
    const row = rows.find((d) => d.id === delivery.id)!;
    assert.equal(row.outcome, 'processed', row.detail);
    const runId = row.run_id as string;
    const run = (await t.services.runs.get(runId)).run;
    assert.deepEqual([run.surface, run.team, run.state], ['tracker_a', team, 'running']);

    // The thread's root names the issue with its link and who asked there; the run links to the thread.
    const root = mm.posts.find((p) => p.channel_id === room.id && p.root_id === '' && p.message.includes(runId));
    assert.ok(root, 'a root post in the home room');
    assert.equal(root.user_id, bot.id);
    const issueUrl = `${linear.url.replace(/\/graphql$/, '')}/issue/${issue.identifier}`;
    assert.ok(root.message.includes(`took work from [${issue.identifier} on Linear](${issueUrl}), asked by Ada.`), root.message);
    assert.equal((await t.services.runs.get(runId)).run.chat_thread_url, mm.permalink(root.id));
    // The run links back to the issue, through the API too.
    const shown = await t.request({ method: 'GET', url: `/api/v1/runs/${runId}`, token: t.adminToken });
    assert.deepEqual([shown.body.origin_url, shown.body.chat_thread_url], [issueUrl, mm.permalink(root.id)]);
    // And through the CLI, where a person looks: `runs show` says where the work came from and where it is talked about; `runs list` where it came from.
    const env = { CREWHOUSE_URL: base, CREWHOUSE_TOKEN: t.adminToken, HOME: '/nonexistent', XDG_CONFIG_HOME: '/nonexistent' };
    const cliShown = await runCliIn(['runs', 'show', runId], { env });
    assert.equal(cliShown.code, 0, cliShown.stderr);
    assert.match(cliShown.stdout, /^surface: +tracker_a$/m);
    assert.ok(cliShown.stdout.split('\n').some((l) => /^origin_url: +/.test(l) && l.endsWith(` ${issueUrl}`)), cliShown.stdout);
    assert.ok(cliShown.stdout.split('\n').some((l) => /^chat_thread_url: +/.test(l) && l.endsWith(` ${mm.permalink(root.id)}`)), cliShown.stdout);
    const cliListed = await runCliIn(['runs', 'list', '--team', team], { env });
    assert.equal(cliListed.code, 0, cliListed.stderr);
    assert.match(cliListed.stdout, /^ID +TEAM +FROM +STATE/m);
    assert.ok(cliListed.stdout.split('\n').some((l) => l.startsWith(runId) && /\btracker_a\b/.test(l)), cliListed.stdout);
    // A listener's catch-up after a reconnection reads this thread too (a reply written while it was down still counts).
    assert.ok((await t.services.chatCore.openThreads('chat_a')).some((th) => th.room_id === room.id && th.root_id === root.id), 'the home-room thread is among those caught up on');
    const ours = () => linear.activities.filter((a) => a.sessionId === session.id && a.userId === linear.app.id);
    assert.deepEqual(ours().map((a) => a.content.type), ['thought']);

    // A person in the room adds to the run in its thread: one follow-up however often the message is seen.
    const message = { surface: 'chat_a' as const, message_id: crypto.randomUUID(), room_id: room.id, thread_id: root.id, user_id: alice.id, user_name: 'alice', text: 'keep the old colours', addressed: false, command: false, via: 'event' as const };
    assert.equal(await t.services.chatCore.receive(message), true);
    assert.equal(await t.services.chatCore.receive(message), false);
    await drainSurfaces();
    const replies = (await t.services.runs.posts(runId, 0, 100)).items.filter((p) => p.kind === 'reply');
    assert.deepEqual(replies.map((p) => [p.text, p.data.by]), [['keep the old colours', 'chat_a:@alice']]);

    // `cancel` in the thread stops the run; the thread and Linear both say so.
    await t.services.chatCore.receive({ ...message, message_id: crypto.randomUUID(), text: 'cancel' });
    await drainSurfaces();
    assert.equal((await t.services.runs.get(runId)).run.state, 'cancelled');
    assert.ok(mm.threadOf(root.id).some((p) => /The run was cancelled by @alice\./.test(p.message)), mm.threadOf(root.id).map((p) => p.message).join('\n'));
    assert.deepEqual(ours().map((a) => a.content.type), ['thought', 'error']);
  });
});
