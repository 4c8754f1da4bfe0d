import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { addressedText, postText } from './text.ts';

describe('chat_a text', () => {
  it('defuses mass mentions and leaves the rest alone', () => {
    assert.equal(postText('done, @channel and @ALL: see @here.'), 'done, `@channel` and `@ALL`: see `@here`.');
    assert.equal(postText('mail ops@all.example.com, ping @alice, `@channel` already quoted, @channels'), 'mail ops@all.example.com, ping @alice, `@channel` already quoted, @channels');
  });

  it('cuts a long message to the limit and says so', () => {
    const long = 'x'.repeat(100);
    const cut = postText(long, 60);
    assert.equal(cut.length <= 60, true);
    assert.match(cut, /\(cut: \d+ more characters\)$/);
    assert.equal(postText('short', 60), 'short');
    const emoji = postText('a' + '😀'.repeat(40), 60);
    assert.ok(!/[\ud800-\udbff]$/.test(emoji.split('\n')[0]!), 'no half of a surrogate pair is left at the cut');
  });

  it('finds the messages addressed to the bot, and their text without the mention', () => {
    assert.equal(addressedText('@crewhouse fix the login page', 'crewhouse'), 'fix the login page');
    assert.equal(addressedText('hey @Crewhouse, add a test', 'crewhouse'), 'hey, add a test');
    assert.equal(addressedText('mail me at a@crewhouse.dev', 'crewhouse'), null);
    assert.equal(addressedText('@crewhouse-bot do it', 'crewhouse'), null);
    assert.equal(addressedText('nothing for the bot', 'crewhouse'), null);
  });
});
