import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { envelopeWork } from './events.ts';
import { addressedText, messageText, plainText } from './text.ts';

const me = { userId: 'U0BOT00001', botId: 'B0BOT00001' };

describe('chat_b text and envelopes', () => {
  it('escapes what agents wrote, defuses mass mentions and cuts to Slack\'s size', () => {
    assert.equal(messageText('if a < b && c > d <!channel> <@U123> ping @here'), 'if a &lt; b &amp;&amp; c &gt; d &lt;!channel&gt; &lt;@U123&gt; ping `@here`');
    const long = messageText('x'.repeat(50_000));
    assert.equal(long.length, 40_000);
    assert.match(long, /\(cut: 10000 more characters\)$/);
  });

  it('tells a message addressed to the bot and gives its text without the mention', () => {
    assert.equal(addressedText('<@U0BOT00001> fix the login, please', me.userId), 'fix the login, please');
    assert.equal(addressedText('hey <@U0BOT00001|crewhouse>: deploy', me.userId), 'hey: deploy');
    assert.equal(addressedText('<@U0OTHER001> fix it', me.userId), null);
    assert.equal(plainText('see <https://x.example/a|the page> &amp; <https://y.example> &lt;ok&gt;'), 'see the page (https://x.example/a) & https://y.example <ok>');
  });

  it('parses envelopes into work: a DM, a bot\'s message, an edit and a view submission are not work', () => {
    const event = (e: Record<string, unknown>) => envelopeWork('events_api', { event_id: 'Ev1', event: { type: 'message', channel: 'C0ROOM0001', user: 'U0ALICE001', ts: '1.000001', text: 'hi', channel_type: 'channel', ...e } }, me);
    assert.equal(event({})?.kind, 'message');
    assert.equal(event({ channel_type: 'im', channel: 'D0DM000001' }), null);
    assert.equal(event({ bot_id: 'B0OTHER001' }), null);
    assert.equal(event({ user: me.userId }), null);
    assert.equal(event({ subtype: 'message_changed' }), null);
    assert.equal(event({ subtype: 'channel_join' }), null);
    assert.equal(event({ subtype: 'thread_broadcast', thread_ts: '0.5' })?.kind, 'message');
    assert.equal(envelopeWork('interactive', { type: 'view_submission', user: { id: 'U0ALICE001' } }, me), null);
    const cmd = envelopeWork('slash_commands', { channel_id: 'C0ROOM0001', user_id: 'U0ALICE001', command: '/crewhouse', text: 'frobnicate', trigger_id: 't1' }, me);
    assert.deepEqual(cmd && cmd.kind === 'command' && cmd.what, { kind: 'unknown', word: 'frobnicate' });
    assert.equal(envelopeWork('slash_commands', { channel_id: 'C0ROOM0001', text: 'help' }, me), null, 'a command without its user or trigger');
  });
});
