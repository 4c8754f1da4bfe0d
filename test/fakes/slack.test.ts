import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SocketModeClient, LogLevel } from '@slack/socket-mode';
import { ErrorCode, WebClient, WebClientEvent, type WebAPIPlatformError } from '@slack/web-api';
import { waitFor } from '../harness.ts';
import { startFakeSlack, type FakeSlack } from './slack.ts';

const BOT = 'xoxb-fake-bot-token-000000';
const APP = 'xapp-1-fake-app-token-000000';
const quiet = { debug() {}, info() {}, warn() {}, error() {}, setLevel() {}, getLevel: () => LogLevel.ERROR, setName() {} };

async function platformError(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.equal((err as WebAPIPlatformError).code, ErrorCode.PlatformError, String(err));
    return (err as WebAPIPlatformError).data.error;
  }
  assert.fail('the call succeeded');
}

describe('the fake Slack, through @slack/web-api and @slack/socket-mode', () => {
  let slack: FakeSlack;
  let web: WebClient;
  let alice: { id: string };
  let room: { id: string };

  before(async () => {
    slack = await startFakeSlack();
    slack.installApp({ botName: 'crewhouse', botToken: BOT, appToken: APP });
    alice = slack.addUser({ name: 'alice' });
    room = slack.addChannel({ name: 'payments', members: [slack.app!.botUser.id, alice.id] });
    web = new WebClient(BOT, { slackApiUrl: slack.apiUrl, logger: quiet, retryConfig: { retries: 0 } });
  });
  after(() => slack.stop());

  it('answers the Web API as Slack does: auth.test with scopes, errors as ok:false, form and JSON bodies', async () => {
    const me = await web.auth.test();
    assert.equal(me.user_id, slack.app!.botUser.id);
    assert.equal(me.user, 'crewhouse');
    assert.ok(me.response_metadata?.scopes?.includes('chat:write'));
    assert.equal(await platformError(new WebClient('xoxb-wrong', { slackApiUrl: slack.apiUrl, logger: quiet }).auth.test()), 'invalid_auth');
    assert.equal(await platformError(new WebClient(APP, { slackApiUrl: slack.apiUrl, logger: quiet }).auth.test()), 'not_allowed_token_type');
    assert.equal(await platformError(web.conversations.info({ channel: 'C0NOPE' })), 'channel_not_found');
    const secret = slack.addChannel({ name: 'secret', private: true, members: [alice.id] });
    assert.equal(await platformError(web.conversations.info({ channel: secret.id })), 'channel_not_found', 'a private channel the bot is not in does not exist for it');
    const outside = slack.addChannel({ name: 'elsewhere', members: [alice.id] });
    assert.equal((await web.conversations.info({ channel: outside.id })).channel?.is_member, false);
    assert.equal(await platformError(web.chat.postMessage({ channel: outside.id, text: 'hi' })), 'not_in_channel');
    assert.deepEqual((await web.conversations.members({ channel: room.id, limit: 1 })).response_metadata?.next_cursor !== '', true);
    assert.equal((await web.users.info({ user: alice.id })).user?.name, 'alice');

    // A JSON body, the token in the header, as Slack accepts for write methods.
    const res = await fetch(`${slack.apiUrl}chat.postMessage`, { method: 'POST', headers: { authorization: `Bearer ${BOT}`, 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify({ channel: room.id, text: 'as JSON' }) });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { ok: boolean }).ok, true);
    assert.equal(slack.messages.at(-1)!.text, 'as JSON');
  });

  it('applies username and icon_url only with chat:write.customize; threads, updates, permalinks, replies and files', async () => {
    const root = await web.chat.postMessage({ channel: room.id, text: 'plain', username: 'Lena the Lead', icon_url: 'https://x.example/l.png' });
    assert.equal(slack.messages.find((m) => m.ts === root.ts)!.username, undefined, 'ignored without the scope');
    slack.setScopes(BOT, [...(await web.auth.test()).response_metadata!.scopes!, 'chat:write.customize']);
    const reply = await web.chat.postMessage({ channel: room.id, text: 'in the thread', thread_ts: root.ts!, username: 'Lena the Lead', icon_url: 'https://x.example/l.png' });
    const stored = slack.messages.find((m) => m.ts === reply.ts)!;
    assert.deepEqual([stored.username, stored.icon_url, stored.thread_ts], ['Lena the Lead', 'https://x.example/l.png', root.ts]);
    await web.chat.update({ channel: room.id, ts: root.ts!, text: 'plain, updated' });
    assert.equal(slack.messages.find((m) => m.ts === root.ts)!.text, 'plain, updated');
    slack.say(alice.id, room.id, 'not yours');
    assert.equal(await platformError(web.chat.update({ channel: room.id, ts: slack.messages.at(-1)!.ts, text: 'x' })), 'cant_update_message');
    const link = await web.chat.getPermalink({ channel: room.id, message_ts: reply.ts! });
    assert.equal(link.permalink, `${slack.url}/archives/${room.id}/p${reply.ts!.replace('.', '')}?thread_ts=${root.ts}&cid=${room.id}`);
    const thread = await web.conversations.replies({ channel: room.id, ts: root.ts! });
    assert.deepEqual(thread.messages?.map((m) => m.text), ['plain, updated', 'in the thread']);
    // More replies than a page: the root first on every page, the replies after `oldest` in order, paged by cursor (the SDK's own paginator follows it).
    const more = ['r1', 'r2', 'r3', 'r4'].map((text) => slack.say(alice.id, room.id, text, root.ts!));
    const pages: Array<Array<string | undefined>> = [];
    for await (const page of web.paginate('conversations.replies', { channel: room.id, ts: root.ts!, oldest: more[0]!.ts, limit: 2 })) pages.push(((page as { messages?: Array<{ text?: string }> }).messages ?? []).map((m) => m.text));
    assert.deepEqual(pages, [['plain, updated', 'r2', 'r3'], ['plain, updated', 'r4']]);
    assert.equal(await platformError(web.conversations.replies({ channel: room.id, ts: root.ts!, cursor: 'bm9wZQ==' })), 'invalid_cursor');
    for (const m of more) slack.remove(room.id, m.ts);
    const history = await web.conversations.history({ channel: room.id, oldest: root.ts! });
    assert.deepEqual(history.messages?.map((m) => m.text), ['not yours'], 'history after a ts, newest first, without thread replies');
    await web.chat.postEphemeral({ channel: room.id, user: alice.id, text: 'only you' });
    assert.deepEqual(slack.ephemerals.at(-1), { channel: room.id, user: alice.id, text: 'only you' });

    const up = await web.filesUploadV2({ channel_id: room.id, thread_ts: root.ts!, filename: 'run.diff', title: 'the diff', content: 'diff --git a/x b/x\n' });
    assert.equal(up.ok, true);
    const file = [...slack.files.values()].at(-1)!;
    assert.deepEqual([file.title, file.bytes?.toString('utf8'), file.channel, file.thread_ts], ['the diff', 'diff --git a/x b/x\n', room.id, root.ts]);
  });

  it('rate-limits with HTTP 429 and Retry-After; the SDK waits and tries again', async () => {
    slack.throttleNext = 1;
    const limited: number[] = [];
    const patient = new WebClient(BOT, { slackApiUrl: slack.apiUrl, logger: quiet, retryConfig: { retries: 1, minTimeout: 10 } });
    patient.on(WebClientEvent.RATE_LIMITED, (sec: number) => limited.push(sec));
    assert.equal((await patient.auth.test()).ok, true);
    assert.deepEqual(limited, [1]);
    slack.throttleNext = 1;
    const strict = new WebClient(BOT, { slackApiUrl: slack.apiUrl, logger: quiet, rejectRateLimitedCalls: true });
    await assert.rejects(strict.auth.test(), (err: { code: string; retryAfter: number }) => err.code === ErrorCode.RateLimitedError && err.retryAfter === 1);
  });

  it('Socket Mode: hello, envelopes acked, unacked ones redelivered with retry_attempt, disconnect and a dropped socket reconnect', async () => {
    const socket = new SocketModeClient({ appToken: APP, logger: quiet, clientPingTimeout: 300, clientOptions: { slackApiUrl: slack.apiUrl } });
    const seen: Array<{ type: string; retry: number | undefined; id: string }> = [];
    let ackNext = true;
    socket.on('slack_event', async ({ ack, type, envelope_id, retry_num, body }) => {
      seen.push({ type: type === 'events_api' ? `${type}:${body.event.type}` : type, retry: retry_num, id: envelope_id });
      if (ackNext) await ack();
    });
    try {
      await socket.start();
      assert.equal(slack.openSockets, 1);
      // The events of the tests above waited for a connection: they come first, and are acked.
      await waitFor('the backlog acked', () => slack.unacked.length === 0);
      assert.ok(seen.length > 0 && seen.every((s) => s.retry === 0));
      seen.length = 0;
      slack.say(alice.id, room.id, `<@${slack.app!.botUser.id}> fix the login page`);
      await waitFor('the message and the mention', () => seen.length === 2);
      assert.deepEqual(seen.map((s) => s.type), ['events_api:message', 'events_api:app_mention']);
      await waitFor('both acked', () => slack.unacked.length === 0);

      ackNext = false;
      const cmd = slack.slashCommand(alice.id, room.id, 'status');
      await waitFor('the command', () => seen.some((s) => s.id === cmd));
      assert.deepEqual(slack.unacked, [cmd]);
      ackNext = true;
      assert.equal(slack.redeliverUnacked(), 1);
      await waitFor('the redelivery, acked', () => slack.unacked.length === 0);
      assert.deepEqual(seen.filter((s) => s.id === cmd).map((s) => [s.type, s.retry]), [['slash_commands', 0], ['slash_commands', 1]]);
      assert.deepEqual(slack.sent.filter((e) => e.envelope_id === cmd).map((e) => e.retry_attempt), [0, 1]);

      const button = await web.chat.postMessage({ channel: room.id, text: 'Approve?', blocks: [{ type: 'actions', elements: [{ type: 'button', action_id: 'approve', value: 'c1', text: { type: 'plain_text', text: 'Approve' } }] }] });
      const click = slack.click(alice.id, room.id, button.ts!, { action_id: 'approve', value: 'c1' });
      await waitFor('the click', () => seen.some((s) => s.id === click && s.type === 'interactive'));

      slack.disconnect();
      await waitFor('the reconnection after disconnect', () => slack.calls.filter((c) => c.method === 'apps.connections.open').length === 2 && slack.openSockets === 1);
      slack.dropSockets();
      // Sent while no connection is open: it waits for the next one.
      const missed = slack.slashCommand(alice.id, room.id, 'help');
      await waitFor('the reconnection after a dropped socket', () => slack.openSockets === 1);
      await waitFor('the command sent while down', () => seen.some((s) => s.id === missed));
      await waitFor('acked', () => slack.unacked.length === 0);
    } finally {
      await socket.disconnect();
    }
  });
});
