// A team that lives in a chat_b (Slack-compatible) channel, end to end: the fake Slack
// (test/fakes/slack.ts) speaks to the service over the Web API and Socket Mode (events, the
// slash command, button clicks) through the official SDKs; runs go through a real `local`
// sandbox, the gateway, the model proxy and the scripted model. Each scenario is one run of one
// team homed in the channel.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BOT_SCOPES, startFakeSlack, type FakeSlack, type FakeSlackMessage, type FakeSlackUser } from '../fakes/slack.ts';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { setIntegration } from '../factories.ts';
import { uniq } from '../harness.ts';
import { putSecret } from '../integrations.ts';
import { lastText, roleOf, scenarioOf, startStack, stackSkip, waitFor, type Stack } from './stack.ts';

const BOT_TOKEN = `xoxb-e2e-${'b'.repeat(24)}`;
const APP_TOKEN = `xapp-e2e-${'a'.repeat(24)}`;

function script(req: ScriptedRequest): ScriptedAnswer {
  const text = lastText(req);
  const results = req.body.messages.filter((m) => m.role === 'tool').length;
  if (roleOf(req) === 'dev') return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'dev done' } }] };
  switch (scenarioOf(req)) {
    case 'ask':
      if (text.includes('README')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'README added too' } }] };
      if (text.startsWith('The answer:')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `shipped (${text})` } }] };
      return { tool_calls: [{ name: 'ask_person', arguments: { question: 'Ship it?' } }] };
    case 'confirm':
      if (!results) return { tool_calls: [{ name: 'shell', arguments: { command: 'echo ran > confirmed.txt' } }] };
      return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: text.includes('refused') ? 'refused' : 'the file is written' } }] };
    case 'cancel':
      return { tool_calls: [{ name: 'ask_person', arguments: { question: 'Which branch?' } }] };
    default:
      return { tool_calls: [{ name: 'finish', arguments: { outcome: 'failed', summary: `unknown scenario in ${text.slice(0, 80)}` } }] };
  }
}

describe('a team in a chat_b channel, end to end', { skip: stackSkip }, () => {
  let stack: Stack;
  let slack: FakeSlack;
  let channel: { id: string };
  let alice: FakeSlackUser;
  let bot: FakeSlackUser;
  let team: string;

  const api = (method: string, url: string, body?: unknown) => stack.t.request({ method, url: `/api/v1${url}`, token: stack.t.adminToken, body });
  const rootOf = (marker: string) => slack.messages.find((m) => m.channel === channel.id && !m.thread_ts && m.user === bot.id && m.text.includes(marker));
  const thread = (root: FakeSlackMessage) => slack.messages.filter((m) => m.channel === channel.id && m.thread_ts === root.ts && m.ts !== root.ts);
  /** The run a message started: its thread's root appears in the channel, then its link on the run. */
  const started = async (marker: string) => {
    const root = await waitFor(`the thread of "${marker}"`, async () => rootOf(marker));
    const runId = /Run `(run_[A-Za-z0-9]+)`/.exec(root.text)![1]!;
    await waitFor(`the thread link of ${runId}`, async () => (await stack.run(runId)).chat_thread_url);
    return { root, runId };
  };
  const said = (root: FakeSlackMessage, what: RegExp) => waitFor(`${what} in the thread`, async () => thread(root).find((m) => what.test(m.text)));
  const runsOf = async (marker: string) => (await api('GET', `/teams/${team}/runs?limit=50`)).body.items.filter((r: { text: string }) => r.text.includes(marker));

  before(async () => {
    slack = await startFakeSlack();
    stack = await startStack({ script });
    slack.installApp({ botName: 'crewhouse', botToken: BOT_TOKEN, appToken: APP_TOKEN, scopes: [...BOT_SCOPES, 'chat:write.customize'] });
    bot = slack.app!.botUser;
    alice = slack.addUser({ name: 'alice' });
    channel = slack.addChannel({ name: uniq('payments'), members: [bot.id, alice.id] });
    await putSecret(stack.t, 'integrations/chat_b/bot_token', BOT_TOKEN);
    await putSecret(stack.t, 'integrations/chat_b/app_token', APP_TOKEN);
    await setIntegration(stack.t, 'chat_b', true, { api_url: slack.apiUrl });
    const tools = ['shell', 'ask_person', 'hand_off', 'finish'];
    const role = { memory: { inject: false } };
    team = await stack.makeTeam({ roles: { lead: { tools, role: { ...role, confirmation_policy: 'confirm_risky' } }, dev: { tools, role } }, pipeline: { lead: 'dev' }, home: { surface: 'chat_b', room_id: channel.id } });
    // The worker opens a Socket Mode connection once it sees chat_b enabled.
    await waitFor('the worker to connect over Socket Mode', async () => slack.openSockets === 1, 60_000);
  });

  after(async () => {
    await stack?.stop();
    await slack?.stop();
  });

  it('a mention becomes one run with a thread (its envelope redelivered), the question mentions the person and is answered in the thread across a dropped socket, a follow-up reopens it; the Console answers 409', async () => {
    const marker = uniq('ask');
    const mention = slack.say(alice.id, channel.id, `<@${bot.id}> SCENARIO ask ${marker}`);
    const { root, runId } = await started(marker);
    const run = await stack.run(runId);
    assert.equal(run.surface, 'chat_b');
    // Slack's mrkdwn: bold with one star, code, the mention of the person a real one.
    assert.match(root.text, new RegExp(`^Run \`${runId}\` started for <@${alice.id}>: team \\*${team}\\* is on it`));
    assert.equal(run.chat_thread_url, slack.permalink(channel.id, root.ts));

    // Slack sends the mention's envelopes again (an ack lost): acknowledged again, and still one run.
    const envelopes = slack.sent.filter((e) => (e.payload.event as { ts?: string } | undefined)?.ts === mention.ts).map((e) => e.envelope_id);
    assert.equal(envelopes.length, 2, 'the message and app_mention events');
    for (const id of envelopes) slack.redeliver(id);
    await waitFor('the redeliveries acknowledged', async () => envelopes.every((id) => slack.acks.filter((a) => a.envelope_id === id).length >= 2));

    const question = await said(root, /Ship it\?/);
    assert.ok(question.text.startsWith(`<@${alice.id}>`), `the question mentions the person who gave the task: ${question.text}`);
    assert.ok(question.username, 'the role posts under its own name');

    const console409 = await api('POST', `/runs/${runId}/replies`, { text: 'yes', in_reply_to: (await stack.run(runId)).open_question.seq });
    assert.equal(console409.status, 409, console409.text);
    assert.match(console409.body.detail, /Slack/);
    const cancel409 = await api('POST', `/runs/${runId}/cancel`);
    assert.equal(cancel409.status, 409, cancel409.text);

    // The answer is written in the thread while the socket is down and Slack gives up on its event: the channel's
    // history does not show thread replies, so only reading the open run's thread after the reconnection finds it, once.
    const opens = slack.callsOf('apps.connections.open');
    slack.loseWhileDisconnected = true;
    slack.dropSockets();
    const answer = slack.say(alice.id, channel.id, 'yes, ship it', root.ts);
    await waitFor('the reconnection', async () => slack.callsOf('apps.connections.open') > opens && slack.openSockets === 1);
    slack.loseWhileDisconnected = false;
    assert.ok(!slack.sent.some((e) => (e.payload.event as { ts?: string } | undefined)?.ts === answer.ts), 'no event ever carried the answer');
    await stack.waitForState(runId, 'succeeded');
    await said(root, /Done: shipped/);
    assert.ok(slack.calls.some((c) => c.method === 'conversations.replies' && c.body.ts === root.ts), 'the catch-up read the run\'s thread');
    const afterAnswer = (await stack.posts(runId)).filter((p) => p.kind === 'answer');
    assert.deepEqual(afterAnswer.map((p) => p.text), ['yes, ship it'], 'the answer was one effect');

    slack.say(alice.id, channel.id, 'please add a README too', root.ts);
    await said(root, /Done: README added too/);
    assert.equal((await stack.posts(runId)).filter((p) => p.kind === 'reply').length, 1, 'the follow-up was one task');
    assert.equal((await runsOf(marker)).length, 1, 'a redelivered mention is one run');
  });

  it('the slash command starts a run; its confirmation is approved by a button and the message says who decided', async () => {
    const marker = uniq('confirm');
    slack.slashCommand(alice.id, channel.id, `SCENARIO confirm ${marker}`);
    const { root, runId } = await started(marker);
    await stack.waitForState(runId, 'waiting');
    const confirmation = await waitFor('the confirmation with buttons', async () => thread(root).find((m) => m.blocks?.some((b) => (b as { type?: string }).type === 'actions')));
    const actions = confirmation.blocks!.find((b) => (b as { type?: string }).type === 'actions') as { elements: Array<{ action_id: string; value: string }> };
    const approve = actions.elements.find((e) => e.action_id === 'crewhouse.approve')!;
    slack.click(alice.id, channel.id, confirmation.ts, { action_id: approve.action_id, value: approve.value });
    await stack.waitForState(runId, 'succeeded');
    await waitFor('the confirmation updated', async () => new RegExp(`Approved by <@${alice.id}>`).test(slack.messages.find((m) => m.ts === confirmation.ts)!.text));
    // The update keeps the message's own mrkdwn (the mention of the person), not escaped a second time.
    assert.ok(slack.messages.find((m) => m.ts === confirmation.ts)!.text.startsWith(`<@${alice.id}> *lead* asks for a confirmation`), slack.messages.find((m) => m.ts === confirmation.ts)!.text);
    await said(root, /Done: the file is written/);
    assert.equal((await runsOf(marker)).length, 1);
  });

  it('cancel in the thread cancels the run', async () => {
    const marker = uniq('cancel');
    slack.say(alice.id, channel.id, `<@${bot.id}> SCENARIO cancel ${marker}`);
    const { root, runId } = await started(marker);
    await stack.waitForState(runId, 'waiting');
    slack.say(alice.id, channel.id, '!cancel', root.ts);
    await stack.waitForState(runId, 'cancelled');
    await said(root, /The run was cancelled by @alice\./);
  });
});
