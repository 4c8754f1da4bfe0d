import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commandList, isThreadCancel, parseCommand } from './commands.ts';
import { formatOf } from './format.ts';
import { LONG_POST, longOutput, renderPost, renderStart } from './render.ts';
import { NO_TEAM } from './core.ts';
import { settlementOf } from './surface.ts';

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
    assert.match(renderPost(post('canceled', null, 'cancelled by @alice on Mattermost'), ctx)!.text, /The run was cancelled by @alice on Mattermost/);
    for (const k of ['answer', 'reply', 'artifact', 'command_result']) assert.equal(renderPost(post(k, 'lead', 'x'), ctx), null, k);
    assert.equal(renderPost(post('notice', 'lead', 'a model call failed'), ctx), null);
    assert.match(renderPost(post('notice', 'dev', 'dev proposes skill "lint"', { proposal: 'skill', name: 'lint' }), ctx)!.text, /skills accept lint/);
  });

  it('the root post names the run, the person and the task', () => {
    assert.match(renderStart({ requester: '@alice', team: 'payments', runId: 'run_x', text: 'Fix it\nplease', format: formatOf('markdown') }), /^Run `run_x` started for @alice: team \*\*payments\*\*[\s\S]*\n> Fix it\n> please$/);
  });
});

describe('long output', () => {
  it('a short post stays as it is; a long one, or one holding a diff or a log, becomes its first lines and the whole as a file', () => {
    assert.equal(longOutput('Done: fixed the login page.', 'run_x-1'), null);
    assert.equal(longOutput('x'.repeat(LONG_POST.chars), 'run_x-1'), null);
    assert.equal(longOutput('Run `ls` and ```\nthe code\n``` here', 'run_x-1'), null);

    const text = `Line\n`.repeat(LONG_POST.lines + 5);
    const long = longOutput(text, 'run_x-2')!;
    assert.deepEqual(long.file, { name: 'run_x-2.md', content: text, type: 'text/markdown' });
    assert.equal(long.text, `${'Line\n'.repeat(8)}_The whole text (${LONG_POST.lines + 6} lines) is attached as \`run_x-2.md\`._`);

    const withDiff = 'Done: the fix.\n```diff\n--- a/x\n+++ b/x\n-old\n+new\n```\nBranch: `fix`';
    assert.deepEqual(longOutput(withDiff, 'run_x-3'), { text: 'Done: the fix.\n_The diff is attached as `run_x-3.diff`._', file: { name: 'run_x-3.diff', content: withDiff, type: 'text/x-diff' } });
    const bareDiff = 'diff --git a/x b/x\n--- a/x\n+++ b/x';
    assert.equal(longOutput(bareDiff, 'run_x-4')!.file.name, 'run_x-4.diff');
    const log = 'The build failed:\n```log\nerror TS2304\n```';
    assert.deepEqual([longOutput(log, 'run_x-5')!.text, longOutput(log, 'run_x-5')!.file.type], ['The build failed:\n_The log is attached as `run_x-5.log`._', 'text/plain']);
    // A summary never leaves a code block open.
    const open = `Intro\n\`\`\`\n${'code\n'.repeat(60)}`;
    assert.equal((longOutput(open, 'run_x-6')!.text.match(/```/g) ?? []).length % 2, 0);
  });
});

describe('a chat delivery settled', () => {
  it('says what its message did: processed with its run, refused with what the person was told', () => {
    assert.deepEqual(settlementOf('run', 'run_a'), { outcome: 'processed', detail: 'became run run_a', run_id: 'run_a' });
    assert.deepEqual(settlementOf('cancel', 'run_a'), { outcome: 'processed', detail: 'cancelled run run_a', run_id: 'run_a' });
    assert.deepEqual(settlementOf('command:status', null), { outcome: 'processed', detail: 'the command `status` was answered', run_id: null });
    assert.deepEqual(settlementOf('refused: the team\'s budget is spent', null), { outcome: 'refused', detail: 'the team\'s budget is spent', run_id: null });
    assert.deepEqual(settlementOf('no_team', null), { outcome: 'refused', detail: NO_TEAM, run_id: null });
  });
});
