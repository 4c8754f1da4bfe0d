import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mrkdwnText } from '../chat_b/text.ts';
import { postText } from '../chat_a/text.ts';
import { commandList } from './commands.ts';
import { formatOf } from './format.ts';
import { renderPost, renderStart, statusLine } from './render.ts';

const markdown = formatOf('markdown');
const mrkdwn = formatOf('mrkdwn');
const HOSTILE = 'Done **fast** & <!channel> <!here|here> <!everyone> @channel, ping <@U123> and <@U0ALICE|alice>; *a* < b > c; see [the docs](https://docs.example/a?x=1&y=2) or <https://evil.example|click>';

describe('chat dialects: the core writes each surface\'s markup, others\' words never become it', () => {
  it('markdown (chat_a): **bold**, `code`, [label](url); agents\' Markdown kept, mass mentions defused when posted', () => {
    assert.equal(markdown.bold('payments'), '**payments**');
    assert.equal(markdown.code('run_`x`'), "`run_'x'`");
    assert.equal(markdown.link('the diff', 'https://x.example/a b'), '[the diff](https://x.example/a%20b)');
    assert.equal(markdown.text(HOSTILE), HOSTILE, 'Mattermost renders the Markdown agents write');
    assert.equal(postText(markdown.text('tell @channel and @here')), 'tell `@channel` and `@here`');
  });

  it('mrkdwn (chat_b): *bold*, `code`, <url|label>; agents\' &, <, > escaped, their Markdown written as Slack\'s, no <!...> or <@...> of their own', () => {
    assert.equal(mrkdwn.bold('a<b'), '*a&lt;b*');
    assert.equal(mrkdwn.code('skills accept <name>'), '`skills accept &lt;name&gt;`');
    assert.equal(mrkdwn.link('the diff | log', 'https://x.example/a?b=1&c=<2>'), '<https://x.example/a?b=1&amp;c=%3C2%3E|the diff / log>');
    const said = mrkdwn.text(HOSTILE);
    assert.equal(
      said,
      'Done *fast* &amp; &lt;!channel&gt; &lt;!here|here&gt; &lt;!everyone&gt; @channel, ping &lt;@U123&gt; and &lt;@U0ALICE|alice&gt;; *a* &lt; b &gt; c; see <https://docs.example/a?x=1&amp;y=2|the docs> or &lt;https://evil.example|click&gt;',
    );
    // The only <...> left are the links the agent wrote in Markdown, made by the format.
    assert.deepEqual(said.match(/<[^>]*>/g), ['<https://docs.example/a?x=1&amp;y=2|the docs>']);
    // Posting defuses mass mentions written as words too.
    assert.match(mrkdwnText(said), /`@channel`/);
    // Code is left as written (escaped, never converted).
    assert.equal(mrkdwn.text('run `a **b** [c](https://d.example)` then **e**\n```\n**f** <x>\n```'), 'run `a **b** [c](https://d.example)` then *e*\n```\n**f** &lt;x&gt;\n```');
    assert.equal(mrkdwn.text('~~old~~ plan'), '~old~ plan');
  });

  it('the adapter\'s last guard: a <!...> command is never posted, whoever wrote it; mentions and links are kept', () => {
    assert.equal(mrkdwnText('<!channel> hi <!subteam^S123|@team> <@U0ALICE> <https://x.example|x>'), '&lt;!channel&gt; hi &lt;!subteam^S123|@team&gt; <@U0ALICE> <https://x.example|x>');
    assert.equal(mrkdwnText('a <!here b'), 'a &lt;!here b');
  });

  it('renders a run\'s posts in either dialect: the requester\'s mention and the roles are the core\'s, the agent\'s words are escaped', () => {
    const run = { id: 'run_x', cost_usd: 0.5, delivery: { branch: 'crewhouse/run_x', pull_request: { url: 'https://code.example/pr/7?a=1&b=2' } } };
    const post = (kind: string, role: string | null, text: string, data: Record<string, unknown> = {}) => ({ seq: 1, kind, role, text, data });
    const question = post('question', 'lead', 'Ship it to <!channel>? **really**', { kind: 'question' });
    assert.equal(renderPost(question, { requester: '@alice', lastRole: null, run, format: markdown })!.text, '@alice **lead** asks: Ship it to <!channel>? **really**\nReply in this thread to answer.');
    assert.equal(renderPost(question, { requester: '<@U0ALICE>', lastRole: null, run, format: mrkdwn })!.text, '<@U0ALICE> *lead* asks: Ship it to &lt;!channel&gt;? *really*\nReply in this thread to answer.');
    const done = renderPost(post('completed', 'lead', 'Shipped <@U123>', { branch: 'crewhouse/run_x' }), { requester: '<@U0ALICE>', lastRole: null, run, format: mrkdwn })!.text;
    assert.equal(done, 'Done: Shipped &lt;@U123&gt;\nBranch: `crewhouse/run_x`\nPull request: https://code.example/pr/7?a=1&amp;b=2\nCost: $0.5000\nReply in this thread to ask for changes or more.');
    const handOff = renderPost(post('task', 'dev', 'Build *it* & test', { from: 'lead' }), { requester: '<@U0ALICE>', lastRole: null, run, format: mrkdwn })!;
    assert.equal(handOff.text, '*dev* takes over from *lead*:\nBuild *it* &amp; test');
    assert.equal(renderStart({ requester: '<@U0ALICE>', team: 'payments', runId: 'run_x', text: 'Fix <the> login\n& signup', format: mrkdwn }), 'Run `run_x` started for <@U0ALICE>: team *payments* is on it. Follow it in this thread; reply here to add to it, `cancel` to stop it.\n> Fix &lt;the&gt; login\n> &amp; signup');
    const line = statusLine({ id: 'run_x', team: 'payments', surface: 'chat_b', created_by: 'chat_b:U0ALICE', state: 'waiting', text: 'deploy <!here> now', cost_usd: 0.01, waiting_for: { role: 'lead', kind: 'question' }, open_question: null, delivery: null, created_at: '' }, mrkdwn);
    assert.equal(line, "- `run_x` waiting (waiting for an answer to the lead's question), $0.0100: deploy &lt;!here&gt; now");
  });

  it('the command list in either dialect', () => {
    assert.match(commandList('@crewhouse', markdown), /- `@crewhouse skills accept <name>`: make a proposed skill curated/);
    const slack = commandList('@crewhouse', mrkdwn);
    assert.match(slack, /- `@crewhouse skills accept &lt;name&gt;`: make a proposed skill curated/);
    assert.ok(!/<(?!@)/.test(slack), 'no < of its own on Slack');
  });
});
