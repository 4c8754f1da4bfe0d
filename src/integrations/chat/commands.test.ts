import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commandList, isThreadCancel, parseCommand } from './commands.ts';
import { formatOf } from './format.ts';
import { renderPost, renderStart } from './render.ts';

describe('chat commands', () => {
  it('a known first word is its command; one unknown word or !word is unknown; anything else is a task', () => {
    assert.deepEqual(parseCommand(''), { kind: 'help' });
    assert.deepEqual(parseCommand('help'), { kind: 'help' });
    assert.deepEqual(parseCommand('Status'), { kind: 'status' });
    assert.deepEqual(parseCommand('cancel run_abc'), { kind: 'cancel', run: 'run_abc' });
    assert.deepEqual(parseCommand('cancel'), { kind: 'cancel', run: null });
    assert.deepEqual(parseCommand('skills'), { kind: 'skills' });
    assert.deepEqual(parseCommand('skills accept lint-rules'), { kind: 'skill', decision: 'accept', name: 'lint-rules' });
    assert.deepEqual(parseCommand('skills Reject lint'), { kind: 'skill', decision: 'reject', name: 'lint' });
    assert.deepEqual(parseCommand('skills frob'), { kind: 'unknown', word: 'skills frob' });
    assert.deepEqual(parseCommand('mcp'), { kind: 'mcp' });
    assert.deepEqual(parseCommand('frobnicate'), { kind: 'unknown', word: 'frobnicate' });
    assert.deepEqual(parseCommand('!frobnicate now'), { kind: 'unknown', word: 'frobnicate' });
    assert.deepEqual(parseCommand('task fix the login page'), { kind: 'task', text: 'fix the login page' });
    assert.deepEqual(parseCommand('Fix the login page, it 500s'), { kind: 'task', text: 'Fix the login page, it 500s' });
    assert.deepEqual(parseCommand('Refactor.'), { kind: 'task', text: 'Refactor.' });
  });

  it('a thread is cancelled by cancel, !cancel or /cancel alone', () => {
    for (const t of ['cancel', '!cancel', '/cancel', ' Cancel. ']) assert.ok(isThreadCancel(t), t);
    for (const t of ['cancel the second step', 'please cancel', 'cancellation']) assert.ok(!isThreadCancel(t), t);
  });

  it('the list names every command in the form people type', () => {
    const list = commandList('@crewhouse', formatOf('markdown'));
    for (const c of ['help', 'status', 'cancel <run id>', 'skills accept <name>', 'skills reject <name>', 'mcp']) assert.ok(list.includes(`\`@crewhouse ${c}\``), c);
    assert.match(list, /`!cancel`/);
  });
});

describe('run posts in a chat thread', () => {
  const run = { id: 'run_x', cost_usd: 0.0123, delivery: { branch: 'crewhouse/run_x', pull_request: { url: 'https://code.example/pr/7' } } };
  const ctx = { requester: '@alice', lastRole: null, run, format: formatOf('markdown') };
  const post = (kind: string, role: string | null, text: string, data: Record<string, unknown> = {}) => ({ seq: 1, kind, role, text, data });

  it('says which role works once, hand-offs by the role taking over, questions to the person, the delivery and the cost', () => {
    assert.deepEqual(renderPost(post('working', 'lead', 'read_file: done'), ctx), { text: '**lead** is working.', role: 'lead', confirmation: false, working: 'lead' });
    assert.equal(renderPost(post('working', 'lead', 'again'), { ...ctx, lastRole: 'lead' }), null);
    const handOff = renderPost(post('task', 'dev', 'Build it', { from: 'lead' }), ctx)!;
    assert.equal(handOff.role, 'dev');
    assert.match(handOff.text, /\*\*dev\*\* takes over from \*\*lead\*\*/);
    assert.equal(renderPost(post('task', 'lead', 'the task', { from: 'person' }), ctx), null);
    const q = renderPost(post('question', 'lead', 'Which database?', { kind: 'question' }), ctx)!;
    assert.match(q.text, /^@alice \*\*lead\*\* asks: Which database\?/);
    const c = renderPost(post('question', 'dev', 'dev wants to run rm -rf build. Approve or refuse?', { kind: 'confirmation' }), ctx)!;
    assert.equal(c.confirmation, true);
    assert.match(c.text, /reply `approve` or `refuse`/);
    const done = renderPost(post('completed', 'lead', 'Shipped', { branch: 'crewhouse/run_x', pull_request_url: null }), ctx)!;
    assert.match(done.text, /Done: Shipped\nBranch: `crewhouse\/run_x`\nPull request: https:\/\/code.example\/pr\/7\nCost: \$0\.0123/);
    assert.match(renderPost(post('failed', null, 'the model refused'), ctx)!.text, /The run failed: the model refused\nCost/);
    assert.match(renderPost(post('canceled', null, 'cancelled by chat_a:@alice'), ctx)!.text, /The run was cancelled by chat_a:@alice/);
    for (const k of ['answer', 'reply', 'artifact', 'command_result']) assert.equal(renderPost(post(k, 'lead', 'x'), ctx), null, k);
    assert.equal(renderPost(post('notice', 'lead', 'a model call failed'), ctx), null);
    assert.match(renderPost(post('notice', 'dev', 'dev proposes skill "lint"', { proposal: 'skill', name: 'lint' }), ctx)!.text, /skills accept lint/);
  });

  it('the root post names the run, the person and the task', () => {
    assert.match(renderStart({ requester: '@alice', team: 'payments', runId: 'run_x', text: 'Fix it\nplease', format: formatOf('markdown') }), /^Run `run_x` started for @alice: team \*\*payments\*\*[\s\S]*\n> Fix it\n> please$/);
  });
});
