// A team that lives in a chat_a (Mattermost-compatible) room, end to end: the fake Mattermost
// server (test/fakes/mattermost.ts) speaks to the service over REST, the WebSocket, the slash
// command and button clicks; runs go through a real `local` sandbox, the gateway, the model
// proxy and the scripted model. Each scenario is one run of one team homed in the room.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startFakeMattermost, type FakeMattermost, type FakeMmPost } from '../fakes/mattermost.ts';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { uniq } from '../harness.ts';
import { putSecret, setChatA } from '../integrations.ts';
import { freePort, lastText, roleOf, scenarioOf, startStack, stackSkip, waitFor, type Stack } from './stack.ts';

const BOT_TOKEN = `mm-e2e-surface-${'b'.repeat(16)}`;
const DEV_BOT_TOKEN = `mm-e2e-dev-${'d'.repeat(16)}`;
const COMMAND_TOKEN = `mm-e2e-command-${'c'.repeat(16)}`;

function script(req: ScriptedRequest): ScriptedAnswer {
  const role = roleOf(req);
  const text = lastText(req);
  const results = req.body.messages.filter((m) => m.role === 'tool').length;
  // The dev's conversation starts from the lead's hand-off: it hands back at once.
  if (role === 'dev') return { tool_calls: [{ name: 'hand_off', arguments: { summary: 'notes.txt is written' } }] };
  switch (scenarioOf(req)) {
    case 'handoff':
      if (text.includes('README')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'README added too' } }] };
      if (text.startsWith('The answer:')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `shipped (${text})` } }] };
      if (text.includes('notes.txt is written')) return { tool_calls: [{ name: 'ask_person', arguments: { question: 'Ship it?' } }] };
      return { content: 'Planning.', tool_calls: [{ name: 'hand_off', arguments: { summary: 'Write notes.txt. @channel look!' } }] };
    case 'confirm':
      if (!results) return { tool_calls: [{ name: 'shell', arguments: { command: 'echo ran > confirmed.txt' } }] };
      return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: text.includes('refused') ? 'refused' : 'the file is written' } }] };
    case 'cancel':
      return { tool_calls: [{ name: 'ask_person', arguments: { question: 'Which branch?' } }] };
    case 'diff':
      return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'the fix is in:\n```diff\n--- a/login.ts\n+++ b/login.ts\n-  return 500;\n+  return 200;\n```' } }] };
    case 'skill':
      if (!results) return { tool_calls: [{ name: 'propose_skill', arguments: { name: 'release-notes', description: 'Writing release notes', instructions: '# Release notes\n\nNewest first.' } }] };
      return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'proposed a skill' } }] };
    default:
      return { tool_calls: [{ name: 'finish', arguments: { outcome: 'failed', summary: `unknown scenario in ${text.slice(0, 80)}` } }] };
  }
}

describe('a team in a chat_a room, end to end', { skip: stackSkip }, () => {
  let stack: Stack;
  let mm: FakeMattermost;
  let room: { id: string };
  let alice: { id: string };
  let bot: { id: string };
  let devBot: { id: string };
  let team: string;

  const api = (method: string, url: string, body?: unknown) => stack.t.request({ method, url: `/api/v1${url}`, token: stack.t.adminToken, body });
  const rootOf = (runText: string) => mm.posts.find((p) => p.root_id === '' && p.user_id === bot.id && p.message.includes(runText));
  const thread = (root: FakeMmPost) => mm.threadOf(root.id).slice(1);
  const runOfRoot = async (root: FakeMmPost) => /Run `(run_[A-Za-z0-9]+)`/.exec(root.message)![1]!;
  /** The run a message started: its thread's root appears in the room. */
  const started = async (marker: string) => {
    const root = await waitFor(`the thread of "${marker}"`, async () => rootOf(marker));
    const runId = await runOfRoot(root);
    // The thread's link is recorded right after its root is posted.
    await waitFor(`the thread link of ${runId}`, async () => (await stack.run(runId)).chat_thread_url);
    return { root, runId };
  };
  const said = (root: FakeMmPost, what: RegExp) => waitFor(`${what} in the thread`, async () => thread(root).find((p) => what.test(p.message)));

  before(async () => {
    mm = await startFakeMattermost();
    const port = await freePort();
    stack = await startStack({ script, config: { SERVICE_PUBLIC_BASE_URL: `http://127.0.0.1:${port}` } });
    await stack.t.app.listen({ host: '127.0.0.1', port });
    bot = mm.addUser({ username: 'crewhouse', bot: true, token: BOT_TOKEN });
    devBot = mm.addUser({ username: 'dev-bot', bot: true, token: DEV_BOT_TOKEN });
    alice = mm.addUser({ username: 'alice' });
    room = mm.addChannel({ teamId: mm.addTeam(uniq('acme')).id, name: 'payments', members: [bot.id, devBot.id, alice.id] });
    await putSecret(stack.t, 'integrations/chat_a/bot_token', BOT_TOKEN);
    await putSecret(stack.t, 'integrations/chat_a/command_token', COMMAND_TOKEN);
    await setChatA(stack.t, true, { url: mm.url, slash_command: true });
    const tools = ['shell', 'ask_person', 'hand_off', 'finish', 'propose_skill'];
    // No team memory: each run's conversation is told apart by its own task's SCENARIO.
    const role = { memory: { inject: false } };
    team = await stack.makeTeam({ roles: { lead: { tools, role: { ...role, confirmation_policy: 'confirm_risky' } }, dev: { tools, role } }, pipeline: { lead: 'dev' }, home: { surface: 'chat_a', room_id: room.id } });
    await putSecret(stack.t, `integrations/chat_a/bots/${team}/dev`, DEV_BOT_TOKEN);
    // The worker follows the chat server once it sees chat_a enabled.
    await waitFor('the worker to listen to the chat server', async () => mm.openSockets === 1, 60_000);
  });

  after(async () => {
    await stack?.stop();
    await mm?.stop();
  });

  it('a mention becomes a run with a thread: hand-off by the role\'s bot, a question answered in the thread across a dropped WebSocket, a follow-up reopens it; the Console\'s reply and cancel answer 409', async () => {
    const marker = uniq('handoff');
    mm.post(alice.id, room.id, `@crewhouse SCENARIO handoff ${marker}`);
    const { root, runId } = await started(marker);
    const run = await stack.run(runId);
    assert.equal(run.surface, 'chat_a');
    assert.equal(run.chat_thread_url, mm.permalink(root.id));

    const handOff = await said(root, /\*\*dev\*\* takes over from \*\*lead\*\*/);
    assert.equal(handOff.user_id, devBot.id, 'the dev posts as its own bot');
    assert.match(handOff.message, /`@channel` look!/, 'mass mentions in agent text are defused');
    const question = await said(root, /asks: Ship it\?/);
    assert.match(question.message, /^@alice /);
    assert.equal(question.user_id, bot.id, 'the lead has no bot of its own: the surface bot names it');
    assert.match(question.message, /\*\*lead\*\*/);

    const console409 = await api('POST', `/runs/${runId}/replies`, { text: 'yes', in_reply_to: (await stack.run(runId)).open_question.seq });
    assert.equal(console409.status, 409, console409.text);
    assert.match(console409.body.detail, /Mattermost/);
    const cancel409 = await api('POST', `/runs/${runId}/cancel`);
    assert.equal(cancel409.status, 409, cancel409.text);

    // The answer is sent while the WebSocket is down: the catch-up after the reconnection takes it, once.
    mm.dropSockets();
    mm.post(alice.id, room.id, 'yes, ship it', root.id);
    await stack.waitForState(runId, 'succeeded');
    await waitFor('the reconnection', async () => mm.openSockets === 1);
    const done = await said(root, /Done: shipped/);
    assert.match(done.message, /Cost: \$/);
    const answers = (await stack.posts(runId)).filter((p) => p.kind === 'answer');
    assert.equal(answers.length, 1, 'the answer was one effect');

    mm.post(alice.id, room.id, 'please add a README too', root.id);
    await said(root, /Done: README added too/);
    const posts = await stack.posts(runId);
    assert.equal(posts.filter((p) => p.kind === 'reply').length, 1, 'the follow-up was one task');
    const keys = thread(root).map((p) => p.props.crewhouse_key).filter(Boolean);
    assert.equal(new Set(keys).size, keys.length, 'no run post appears twice in the thread');
  });

  it('the slash command starts a run (a replay of it has one effect, a bad token is refused); its confirmation is approved by a button', async () => {
    const marker = uniq('confirm');
    const send = (req: { headers: Record<string, string>; body: string }) => stack.t.app.inject({ method: 'POST', url: '/webhooks/chat_a', headers: req.headers, payload: req.body });
    const cmd = mm.slashCommand({ token: COMMAND_TOKEN, channelId: room.id, userId: alice.id, text: `SCENARIO confirm ${marker}` });
    assert.equal((await send(mm.slashCommand({ token: 'not-the-command-token-0', channelId: room.id, userId: alice.id, text: `SCENARIO confirm ${marker}` }))).statusCode, 401);
    const first = await send(cmd);
    assert.equal(first.statusCode, 200, first.body);
    assert.equal((await send(cmd)).statusCode, 200);
    const { root, runId } = await started(marker);
    const confirmation = await said(root, /asks for a confirmation/);
    await stack.waitForState(runId, 'waiting');
    const clicked = await mm.clickAction(confirmation.id, 'approve', alice.id);
    assert.equal(clicked.status, 200, JSON.stringify(clicked.body));
    assert.match(mm.posts.find((p) => p.id === confirmation.id)!.message, /Approved by @alice/);
    await stack.waitForState(runId, 'succeeded');
    const again = await mm.clickAction(confirmation.id, 'refuse', alice.id).catch((err: Error) => ({ status: 0, body: err.message }));
    assert.notEqual(again.status, 500);
    await said(root, /Done: the file is written/);
    const runs = (await api('GET', `/teams/${team}/runs?limit=50`)).body.items.filter((r: { text: string }) => r.text.includes(marker));
    assert.equal(runs.length, 1, 'a replayed slash command is one run');
    // Its delivery, counted twice, is settled with the run it became.
    const deliveries = (await api('GET', '/integrations/chat_a/deliveries?limit=50')).body.items.filter((d: { run_id: string | null }) => d.run_id === runId);
    assert.deepEqual(deliveries.map((d: { outcome: string; times_received: number; event: string }) => [d.event, d.outcome, d.times_received]), [['command.task', 'processed', 2]]);
  });

  it('long output (a diff) goes as a short post with the diff attached as a file, never a wall of text', async () => {
    const marker = uniq('diff');
    mm.post(alice.id, room.id, `@crewhouse SCENARIO diff ${marker}`);
    const { root, runId } = await started(marker);
    await stack.waitForState(runId, 'succeeded');
    const done = await said(root, /Done: the fix is in:/);
    assert.doesNotMatch(done.message, /return 200/);
    assert.match(done.message, /The diff is attached as `run_\w+-\d+\.diff`/);
    assert.equal(done.file_ids.length, 1);
    const file = mm.files.get(done.file_ids[0]!)!;
    assert.match(file.name, new RegExp(`^${runId}-\\d+\\.diff$`));
    assert.match(file.bytes.toString('utf8'), /\+ {2}return 200;/);
    assert.equal(file.post_id, done.id);
  });

  it('cancel in the thread cancels the run', async () => {
    const marker = uniq('cancel');
    mm.post(alice.id, room.id, `@crewhouse SCENARIO cancel ${marker}`);
    const { root, runId } = await started(marker);
    await stack.waitForState(runId, 'waiting');
    mm.post(alice.id, room.id, '!cancel', root.id);
    await stack.waitForState(runId, 'cancelled');
    await said(root, /^The run was cancelled by @alice\./);
  });

  it('a skill an agent proposes is accepted by a chat command and becomes curated', async () => {
    const marker = uniq('skill');
    mm.post(alice.id, room.id, `@crewhouse SCENARIO skill ${marker}`);
    const { root, runId } = await started(marker);
    await stack.waitForState(runId, 'succeeded');
    await said(root, /skills accept release-notes/);
    const accept = mm.post(alice.id, room.id, '@crewhouse skills accept release-notes');
    await waitFor('the answer', async () => mm.posts.find((p) => p.root_id === accept.id && /is curated/.test(p.message)));
    const skills = await api('GET', `/teams/${team}/skills`);
    assert.deepEqual(skills.body.items.map((s: { name: string; status: string }) => [s.name, s.status]), [['release-notes', 'curated']]);
  });
});
