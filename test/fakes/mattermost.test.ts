import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client4, WebSocketClient, type WebSocketMessage } from '@mattermost/client';
import { waitFor } from '../harness.ts';
import { chatAClient, ChatAError } from '../../src/integrations/chat_a/client.ts';
import { startFakeMattermost, type FakeMattermost } from './mattermost.ts';

const BOT_TOKEN = 'mm-bot-token-0123456789';

describe('the fake Mattermost server, through @mattermost/client', () => {
  let mm: FakeMattermost;
  before(async () => {
    mm = await startFakeMattermost();
  });
  after(() => mm.stop());

  it('answers REST v4 with Bearer auth: me, channels, members, threads, bots, pictures, and a plain-text 429', async () => {
    const bot = mm.addUser({ username: 'crew', bot: true, token: BOT_TOKEN });
    const alice = mm.addUser({ username: 'alice' });
    const team = mm.addTeam('acme');
    const ch = mm.addChannel({ teamId: team.id, name: 'dev', displayName: 'Dev Room', members: [bot.id, alice.id] });
    const c = chatAClient(mm.url, BOT_TOKEN);
    assert.equal((await c.me()).username, 'crew');
    assert.equal((await c.channel(ch.id)).display_name, 'Dev Room');
    assert.ok(await c.membership(ch.id, bot.id));
    const root = await c.post({ channel_id: ch.id, message: 'root' });
    await c.post({ channel_id: ch.id, message: 'reply', root_id: root.id });
    assert.deepEqual((await c.thread(root.id)).map((p) => p.message), ['root', 'reply']);
    const link = c.permalink(await c.teamName(ch.team_id), root.id);
    assert.equal(link, mm.permalink(root.id));
    assert.equal((await fetch(link)).status, 200);
    assert.equal((await fetch(c.permalink('other-team', root.id))).status, 404);
    await c.setBotDisplayName(bot.id, 'Lead');
    assert.equal(await c.botDisplayName(bot.id), 'Lead');
    await c.setProfileImage(bot.id, new Blob([Buffer.from('png-bytes')], { type: 'image/png' }));
    assert.equal(mm.profileImages.get(bot.id)?.bytes.toString(), 'png-bytes');
    assert.deepEqual(mm.requests.filter((r) => r.path.startsWith('/api/v4/') && r.auth?.toLowerCase() !== 'bearer'), []);
    mm.throttleNext = 1;
    await assert.rejects(c.me(), (e: unknown) => e instanceof ChatAError && e.status === 429 && e.retryAfterSeconds === 1 && e.transient);
    await assert.rejects(chatAClient(mm.url, 'wrong-token-000000').me(), (e: unknown) => e instanceof ChatAError && e.status === 401 && !e.message.includes('wrong-token'));
  });

  it('takes file uploads as Client4.uploadFile sends them (POST /files, multipart channel_id and files) and attaches only the poster\'s own, once', async () => {
    const bot = mm.addUser({ username: 'filer', bot: true, token: 'mm-filer-token-0123456789' });
    const alice = mm.addUser({ username: 'alice', token: 'mm-alice-token-0123456789' });
    const ch = mm.addChannel({ teamId: mm.addTeam('files').id, name: 'dev', members: [bot.id, alice.id] });
    // The official client's own upload, unchanged.
    const official = new Client4();
    official.setUrl(mm.url);
    official.setToken('mm-filer-token-0123456789');
    official.setIncludeCookies(false);
    const form = new FormData();
    form.append('channel_id', ch.id);
    form.append('files', new Blob(['+a line\n'], { type: 'text/x-diff' }), 'change.diff');
    const uploaded = await official.uploadFile(form);
    assert.equal(uploaded.file_infos.length, 1);
    assert.deepEqual([uploaded.file_infos[0]!.name, uploaded.file_infos[0]!.extension, uploaded.file_infos[0]!.size, uploaded.file_infos[0]!.mime_type, uploaded.file_infos[0]!.post_id], ['change.diff', 'diff', 8, 'text/x-diff', '']);
    const c = chatAClient(mm.url, 'mm-filer-token-0123456789');
    const id = uploaded.file_infos[0]!.id;
    const post = await c.post({ channel_id: ch.id, message: 'the diff', file_ids: [id] });
    assert.deepEqual(post.file_ids, [id]);
    // Attached once: a second post naming it, or another user's post, gets no file.
    assert.equal((await c.post({ channel_id: ch.id, message: 'again', file_ids: [id] })).file_ids, undefined);
    const { id: other } = await c.uploadFile(ch.id, { name: 'b.log', content: 'x', type: 'text/plain' });
    assert.equal((await chatAClient(mm.url, 'mm-alice-token-0123456789').post({ channel_id: ch.id, message: 'not mine', file_ids: [other] })).file_ids, undefined);
    await assert.rejects(c.uploadFile(mm.addChannel({ teamId: ch.team_id, name: 'closed', type: 'P' }).id, { name: 'c.log', content: 'x', type: 'text/plain' }), (e: unknown) => e instanceof ChatAError && e.status === 403);
  });

  it('streams posted events over the WebSocket after the authentication challenge, and a dropped socket reconnects with a new connection id', async () => {
    const bot = mm.addUser({ username: 'crew2', bot: true, token: `${BOT_TOKEN}-2` });
    const bob = mm.addUser({ username: 'bob' });
    const ch = mm.addChannel({ teamId: mm.addTeam('beta').id, name: 'ops', members: [bot.id, bob.id] });
    const ws = new WebSocketClient({ minWebSocketRetryTime: 50, reconnectJitterRange: 10 });
    const seen: WebSocketMessage[] = [];
    let missed = 0;
    ws.addMessageListener((m) => seen.push(m));
    // Without a missed-message listener the client reconnects in a loop.
    ws.addMissedMessageListener(() => missed++);
    ws.initialize(`${mm.url.replace(/^http/, 'ws')}/api/v4/websocket`, `${BOT_TOKEN}-2`);
    try {
      await waitFor('hello', () => seen.some((m) => m.event === 'hello'));
      mm.post(bob.id, ch.id, 'first');
      await waitFor('the first posted event', () => seen.some((m) => m.event === 'posted'));
      const posted = seen.find((m) => m.event === 'posted')!;
      assert.equal(typeof posted.data.post, 'string');
      assert.equal(JSON.parse(posted.data.post as string).message, 'first');
      assert.equal(posted.seq, 1);
      mm.dropSockets();
      await waitFor('the reconnection', () => missed === 1 && mm.openSockets === 1);
      mm.post(bob.id, ch.id, 'second');
      await waitFor('the second posted event', () => seen.filter((m) => m.event === 'posted').length === 2);
      assert.deepEqual(seen.filter((m) => m.event === 'posted').map((m) => JSON.parse(m.data.post as string).message), ['first', 'second']);
    } finally {
      ws.close();
    }
  });
});
