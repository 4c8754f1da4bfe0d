import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { approvalOf, isChatSurface, memoryBlock, outcomeEntry, pipelineOrder, postOfEvent, routeHandOff, subjectOf, transitionOf, type RunView } from './runs.rules.ts';

const view = (over: Partial<RunView> = {}): RunView => ({
  lead: 'lead',
  roles: ['lead', 'coder', 'reviewer'],
  pipeline: { lead: 'coder', coder: 'reviewer', reviewer: 'lead' },
  rework_rounds: 1,
  rework_used: 0,
  waiting_on_lead: [],
  ...over,
});
const call = { id: 'c1', name: 'shell', arguments: '{}' };

describe('run rules', () => {
  it('orders roles along the pipeline from the lead, once each, then the rest', () => {
    assert.deepEqual(pipelineOrder(view()), ['lead', 'coder', 'reviewer']);
    assert.deepEqual(pipelineOrder({ lead: 'a', roles: ['a', 'b', 'c', 'd'], pipeline: { a: 'b', b: 'a' } }), ['a', 'b', 'c', 'd']);
  });

  it('hands work on along the pipeline, back for rework while rounds remain, then on with the notes', () => {
    assert.deepEqual(routeHandOff(view(), 'lead', null), { to: 'coder', rework: false, exhausted: false });
    assert.deepEqual(routeHandOff(view(), 'coder', null), { to: 'reviewer', rework: false, exhausted: false });
    assert.deepEqual(routeHandOff(view(), 'reviewer', 'coder'), { to: 'coder', rework: true, exhausted: false });
    assert.deepEqual(routeHandOff(view({ rework_used: 1 }), 'reviewer', 'coder'), { to: 'lead', rework: false, exhausted: true });
    // Back to the lead is never rework: the lead closes the loop.
    assert.deepEqual(routeHandOff(view(), 'reviewer', 'lead'), { to: 'lead', rework: false, exhausted: false });
    // No pipeline step after a role: the work goes to the lead.
    assert.deepEqual(routeHandOff(view({ pipeline: { lead: 'coder' } }), 'coder', null), { to: 'lead', rework: false, exhausted: false });
  });

  it('counts a rework round on the transition and says when the rounds are used up', () => {
    const t = transitionOf(view(), 'reviewer', { kind: 'hand_off', to_role: 'coder', summary: 'fix the typo', branch: 'b' });
    assert.equal(t.kind, 'continue');
    if (t.kind !== 'continue') return;
    assert.equal(t.rework_used, 1);
    assert.deepEqual(t.tasks.map((x) => x.role), ['coder']);
    const done = transitionOf(view({ rework_used: 1 }), 'reviewer', { kind: 'hand_off', to_role: 'coder', summary: 'still a typo', branch: null });
    assert.ok(done.kind === 'continue' && done.tasks[0].role === 'lead' && /rework rounds are used up/.test(done.posts[0].text));
  });

  it('the lead asks the person; another role asks the lead, and the lead\'s hand-off answers it', () => {
    const own = transitionOf(view(), 'lead', { kind: 'question', question: 'Which colour?', options: ['red'] });
    assert.ok(own.kind === 'wait' && own.waiting_for.kind === 'question' && own.posts[0].kind === 'question');
    const coder = transitionOf(view(), 'coder', { kind: 'question', question: 'Tabs or spaces?', options: [] });
    assert.ok(coder.kind === 'continue' && coder.task_state === 'waiting' && coder.tasks[0].role === 'lead');
    const answer = transitionOf(view({ waiting_on_lead: ['coder'] }), 'lead', { kind: 'hand_off', to_role: 'coder', summary: 'spaces', branch: null });
    assert.ok(answer.kind === 'continue' && answer.tasks[0].input.kind === 'answer');
  });

  it('a confirmation waits for the person whatever the role; the end of the task ends the run', () => {
    const c = transitionOf(view(), 'coder', { kind: 'confirmation', call, reason: 'shell command: rm -rf build' });
    assert.ok(c.kind === 'wait' && c.waiting_for.role === 'coder' && c.waiting_for.kind === 'confirmation');
    const ok = transitionOf(view(), 'lead', { kind: 'finished', outcome: 'succeeded', summary: 'done', branch: 'b', pull_request_url: null });
    assert.ok(ok.kind === 'succeeded' && ok.posts[0].kind === 'completed');
    const bad = transitionOf(view(), 'lead', { kind: 'finished', outcome: 'failed', summary: 'cannot', branch: null, pull_request_url: null });
    assert.ok(bad.kind === 'failed' && bad.reason === 'cannot');
    const cap = transitionOf(view(), 'coder', { kind: 'iteration_cap', iterations: 30 });
    assert.ok(cap.kind === 'failed' && /coder role used its 30 model calls/.test(cap.reason));
    // A failure's cause (a spent budget, a model that refuses) rides on the failed post; none when a retry may mend it.
    const spent = transitionOf(view(), 'coder', { kind: 'failed', reason: 'the budget is spent', cause: 'budget' });
    assert.ok(spent.kind === 'failed' && spent.posts[0].kind === 'failed');
    assert.deepEqual(spent.posts[0].data, { cause: 'budget' });
    const flaky = transitionOf(view(), 'coder', { kind: 'failed', reason: 'the model could not be reached' });
    assert.equal(flaky.posts[0].data, undefined);
  });

  it('turns agent events into posts; model calls stay in the journal', () => {
    const at = '2026-01-01T00:00:00Z';
    assert.equal(postOfEvent('coder', { seq: 1, at, type: 'model_call', iteration: 1 }), null);
    assert.equal(postOfEvent('coder', { seq: 2, at, type: 'model_reply', content: '  ', tool_calls: [], usage: null, finish_reason: 'stop' }), null);
    assert.equal(postOfEvent('coder', { seq: 3, at, type: 'model_reply', content: 'Looking.', tool_calls: [], usage: null, finish_reason: 'stop' })?.kind, 'working');
    assert.equal(postOfEvent('coder', { seq: 4, at, type: 'tool_result', call_id: 'c', name: 'shell', ok: false, output: 'x', interrupted: true })?.kind, 'notice');
    assert.equal(postOfEvent('lead', { seq: 4, at, type: 'tool_result', call_id: 'c', name: 'finish', ok: true, output: 'finish done; a new message follows.' }), null);
    assert.equal(postOfEvent('lead', { seq: 4, at, type: 'tool_result', call_id: 'c', name: 'ask_person', ok: false, output: 'refused' })?.kind, 'working');
    assert.equal(postOfEvent('coder', { seq: 5, at, type: 'context_masked', up_to_seq: 3, tool_results: 2, chars: 900 })?.kind, 'notice');
  });

  it('a tool\'s post says what it worked on: the file or the command of the model\'s call', () => {
    const at = '2026-01-01T00:00:00Z';
    assert.equal(subjectOf('{"path":"src/app.ts","content":"x"}'), 'src/app.ts');
    assert.equal(subjectOf('{"command":"npm  test\\n  --silent"}'), 'npm test --silent');
    assert.equal(subjectOf('{"content":"x"}'), null);
    assert.equal(subjectOf('not json'), null);
    assert.equal(subjectOf(JSON.stringify({ command: 'x'.repeat(500) }))?.length, 121);
    const written = postOfEvent('coder', { seq: 6, at, type: 'tool_result', call_id: 'c', name: 'write_file', ok: true, output: 'wrote 3 bytes' }, 'src/app.ts');
    assert.equal(written?.text, 'write_file src/app.ts: done');
    assert.equal((written?.data as { subject?: string }).subject, 'src/app.ts');
    assert.equal(postOfEvent('coder', { seq: 7, at, type: 'tool_result', call_id: 'd', name: 'shell', ok: false, output: '1 failing' })?.text, 'shell: failed');
  });

  it('reads approvals from a reply, and writes memory', () => {
    const sha = 'a'.repeat(40);
    assert.equal(approvalOf('Approve, go ahead'), true);
    assert.equal(approvalOf('no.'), false);
    assert.equal(approvalOf('maybe later'), null);
    assert.equal(memoryBlock([], 10), null);
    assert.equal(memoryBlock([{ text: 'a', created_at: '2026-01-01T00:00:00Z' }, { text: 'b', created_at: '2026-01-02T00:00:00Z' }], 1), '- 2026-01-02: b');
    assert.equal(memoryBlock([{ text: 'a', created_at: '2026-01-01T00:00:00Z' }], 0), null);
    assert.match(outcomeEntry({ text: 'Add a README', state: 'succeeded', summary: 'Added it', branch: 'b', commit: sha, pull_request_url: null }), /^Asked: Add a README \| Done: Added it \| Delivered: branch b, commit aaaaaaaaaaaa$/);
  });

  it('a run lives on a chat surface only on chat_a and chat_b; the console, the code host and the trackers are answered through the routes', () => {
    assert.deepEqual(['chat_a', 'chat_b'].map(isChatSurface), [true, true]);
    assert.deepEqual(['console', 'code_host', 'tracker_a', 'tracker_b', 'none', ''].map(isChatSurface), [false, false, false, false, false, false]);
  });
});
