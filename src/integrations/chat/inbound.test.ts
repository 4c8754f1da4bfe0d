import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { postFacts } from '../chat_a/listener.ts';
import { messageFacts, messageWork } from '../chat_b/events.ts';
import { isPersonsMessage } from './inbound.ts';

// One rule for both chat surfaces: each kind of message that must not become work, written as
// each surface writes it, is refused by the core's predicate through each adapter's facts, and a
// person's message (with the kinds of it that carry a type or subtype) is taken by both.
describe('chat core: which inbound messages are a person\'s', () => {
  const BOT = 'bot1';
  const me = { userId: 'UBOT', botId: 'BBOT' };
  const post = (over: Record<string, unknown>) => ({ id: 'p1', channel_id: 'c1', root_id: '', user_id: 'u1', message: 'hi', create_at: 1, ...over });
  const msg = (over: Record<string, unknown>) => ({ ts: '1.1', channel: 'C123456', user: 'U1', text: 'hi', ...over });
  const cases: Array<[string, boolean, Record<string, unknown>[], Record<string, unknown>[]]> = [
    ['a person\'s message', true, [{}], [{}, { subtype: 'file_share' }, { subtype: 'thread_broadcast', thread_ts: '0.9' }]],
    ['the bot\'s own', false, [{ user_id: BOT }], [{ user: 'UBOT' }]],
    ['another bot\'s or an integration\'s', false, [{ props: { from_bot: 'true' } }, { props: { from_bot: true } }, { props: { from_webhook: 'true' } }], [{ bot_id: 'B2' }, { subtype: 'bot_message', bot_id: 'B2' }]],
    ['an edit', false, [{ edit_at: 5 }], [{ edited: { user: 'U1', ts: '1.2' } }, { subtype: 'message_changed' }]],
    ['a deletion', false, [{ delete_at: 5 }], [{ subtype: 'message_deleted' }]],
    ['a system message', false, [{ type: 'system_join_channel' }, { type: 'system_header_change' }], [{ subtype: 'channel_join' }, { subtype: 'channel_topic' }]],
    ['one without an author', false, [{ user_id: '' }], [{ user: undefined }]],
  ];
  for (const [what, taken, asA, asB] of cases) {
    it(`${what}: ${taken ? 'taken' : 'refused'} by both surfaces`, () => {
      for (const p of asA) assert.equal(isPersonsMessage(postFacts(post(p) as never, BOT)), taken, `chat_a ${JSON.stringify(p)}`);
      for (const m of asB) {
        assert.equal(isPersonsMessage(messageFacts(msg(m) as never, me)), taken, `chat_b ${JSON.stringify(m)}`);
        assert.equal(messageWork(msg(m) as never, me, 'event') !== null, taken, `chat_b's work of ${JSON.stringify(m)}`);
      }
    });
  }
});
