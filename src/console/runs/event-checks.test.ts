import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentEvent, AgentEventBody } from '../../agent/protocol.ts';
import { mcpToolName } from '../../agent/mcp.ts';
import { checkEvents, LIMITS, type CallState, type ConversationView } from './event-checks.ts';

const at = '2026-11-26T00:00:00.000Z';

const view = (over: Partial<ConversationView> = {}): ConversationView => ({
  role: 'coder',
  lead: false,
  tools: ['shell', 'git_push', 'hand_off', 'post_progress', 'propose_skill'],
  mcpServers: ['docs'],
  roles: ['lead', 'coder', 'reviewer'],
  eventsSeen: 0,
  calls: new Map(),
  ...over,
});

/** Events numbered from `from`. */
const events = (from: number, ...bodies: Array<AgentEventBody | Record<string, unknown>>): AgentEvent[] => bodies.map((b, i) => ({ seq: from + i, at, ...b }) as AgentEvent);

const reply = (...calls: Array<[string, string]>): AgentEventBody => ({ type: 'model_reply', content: null, tool_calls: calls.map(([id, name]) => ({ id, name, arguments: '{}' })), usage: { prompt_tokens: 10, completion_tokens: 5 }, finish_reason: 'tool_calls' });
const result = (id: string, name: string, ok = true): AgentEventBody => ({ type: 'tool_result', call_id: id, name, ok, output: 'done' });
const open = (entries: Array<[string, string, Partial<CallState>?]>) => new Map(entries.map(([id, name, more]) => [id, { name, state: 'open' as const, proposed: false, ...more }]));

describe('what the host believes of agent events', () => {
  it('accepts a well-formed turn and answers what became of its calls and its end', () => {
    const batch = events(
      4,
      { type: 'input', input: { kind: 'task', from: 'lead', text: 'do it' } },
      { type: 'model_call', iteration: 1 },
      reply(['c1', 'shell'], ['c2', 'git_push']),
      { type: 'tool_started', call: { id: 'c1', name: 'shell', arguments: '{}' } },
      result('c1', 'shell'),
      result('c2', 'git_push'),
      { type: 'progress', text: 'half way' },
      { type: 'model_call', iteration: 2 },
      reply(['c3', 'hand_off']),
      { type: 'turn_end', outcome: { kind: 'hand_off', to_role: 'reviewer', summary: 'done', branch: null } },
    );
    const a = checkEvents(view({ eventsSeen: 3 }), batch);
    assert.equal(a.refusal, null);
    assert.equal(a.accepted.length, batch.length);
    assert.deepEqual(a.turnEnd, { seq: 13, outcome: { kind: 'hand_off', to_role: 'reviewer', summary: 'done', branch: null } });
    assert.deepEqual(Object.fromEntries(a.calls), {
      c1: { name: 'shell', state: 'settled', proposed: false, subject: null },
      c2: { name: 'git_push', state: 'settled', proposed: false, subject: null },
      c3: { name: 'hand_off', state: 'open', proposed: false, subject: null },
    });
  });

  it('remembers what each call works on, from the model\'s own call, for its result\'s post', () => {
    const called = checkEvents(view(), events(1, { type: 'model_reply', content: null, tool_calls: [{ id: 'w1', name: 'write_file', arguments: '{"path":"src/app.ts","content":"x"}' }], usage: null, finish_reason: 'tool_calls' }));
    assert.equal(called.refusal, null);
    assert.equal(called.calls.get('w1')?.subject, 'src/app.ts');
  });

  it('takes seq strictly in order from what was recorded, refusing gaps, repeats and numbers no column stores', () => {
    assert.match(checkEvents(view({ eventsSeen: 5 }), events(7, { type: 'progress', text: 'x' })).refusal!.reason, /skipped from 5 to 7/);
    assert.match(checkEvents(view({ eventsSeen: 5 }), events(5, { type: 'progress', text: 'x' })).refusal!.reason, /skipped from 5 to 5/);
    const huge = checkEvents(view({ eventsSeen: 5 }), events(6, { type: 'progress', text: 'ok' }, { type: 'progress', text: 'x' }).map((e, i) => (i === 1 ? { ...e, seq: 2_000_000_000 } : e)));
    assert.equal(huge.accepted.length, 1, 'what came before the bad event is kept');
    assert.match(huge.refusal!.reason, /skipped from 6 to 2,000,000,000/);
    assert.match(checkEvents(view({ eventsSeen: LIMITS.seq }), events(LIMITS.seq + 1, { type: 'progress', text: 'x' })).refusal!.reason, /beyond what a conversation can hold/);
    assert.match(checkEvents(view(), [{ at, type: 'progress', text: 'x' } as unknown as AgentEvent]).refusal!.reason, /no usable sequence number/);
    assert.match(checkEvents(view(), [{ seq: 1.5, at, type: 'progress', text: 'x' } as unknown as AgentEvent]).refusal!.reason, /no usable sequence number/);
  });

  it('refuses kinds the protocol does not have, and texts beyond their bounds', () => {
    assert.match(checkEvents(view(), events(1, { type: 'delivery', branch: 'main' })).refusal!.reason, /a kind the protocol does not have \("delivery"\)/);
    assert.match(checkEvents(view(), events(1, { type: 'progress', text: 'x'.repeat(LIMITS.progress + 1) })).refusal!.reason, /progress 1: the progress note is 4,001 characters long, more than the 4,000 allowed/);
    assert.equal(checkEvents(view(), events(1, { type: 'progress', text: 'x'.repeat(LIMITS.progress) })).refusal, null);
    assert.match(checkEvents(view(), events(1, { type: 'progress', text: 'x' }).map((e) => ({ ...e, at: 'yesterday' }))).refusal!.reason, /not a time/);
    assert.match(checkEvents(view(), events(1, { type: 'plan', steps: Array.from({ length: 51 }, () => ({ step: 's', status: 'done' })) })).refusal!.reason, /at most 50 steps/);
    assert.match(checkEvents(view(), events(1, { type: 'model_reply', content: 'x'.repeat(LIMITS.replyContent + 1), tool_calls: [], usage: null, finish_reason: null })).refusal!.reason, /model's reply is/);
  });

  it('refuses a negative or broken usage', () => {
    const neg = checkEvents(view(), events(1, { ...reply(), usage: { prompt_tokens: -1_000_000_000, completion_tokens: 0 } }));
    assert.match(neg.refusal!.reason, /the prompt tokens is not a whole number of at least 0/);
    assert.match(checkEvents(view(), events(1, { ...reply(), usage: { prompt_tokens: 1, completion_tokens: 'many' } })).refusal!.reason, /completion tokens/);
  });

  it('accepts a tool result only for a call the model made, once, of a tool the role has', () => {
    assert.match(checkEvents(view(), events(1, result('forged', 'git_push'))).refusal!.reason, /git_push for a call the model never made/);
    assert.match(checkEvents(view({ calls: open([['c1', 'shell']]) }), events(1, result('c1', 'git_push'))).refusal!.reason, /never made/, 'under another name');
    const twice = checkEvents(view({ calls: open([['c1', 'git_push']]) }), events(1, result('c1', 'git_push'), result('c1', 'git_push')));
    assert.equal(twice.accepted.length, 1);
    assert.match(twice.refusal!.reason, /tool_result 2: it reported a second result of the same git_push call/);
    // A call of a tool the role lacks gets the runtime's refusal (a failed result), never a success.
    assert.equal(checkEvents(view({ calls: open([['c1', 'open_pull_request']]) }), events(1, result('c1', 'open_pull_request', false))).refusal, null);
    assert.match(checkEvents(view({ calls: open([['c1', 'open_pull_request']]) }), events(1, result('c1', 'open_pull_request', true))).refusal!.reason, /successful result of open_pull_request, a tool the coder role does not have/);
    // An MCP server's tools are the role's when the server is.
    assert.equal(checkEvents(view(), events(1, reply(['m1', mcpToolName('docs', 'search')]), result('m1', mcpToolName('docs', 'search')))).refusal, null);
    assert.match(checkEvents(view(), events(1, reply(['m1', mcpToolName('other', 'search')]), result('m1', mcpToolName('other', 'search')))).refusal!.reason, /does not have/);
    assert.match(checkEvents(view(), events(1, { type: 'tool_started', call: { id: 'x', name: 'shell', arguments: '{}' } })).refusal!.reason, /tool_started 1: it started shell, but the model never asked for it/);
  });

  it('accepts a proposal only in answer to an open call of the matching tool, by a role that has it', () => {
    const skill = { type: 'proposal', proposal: { kind: 'skill', name: 'lint-fix', description: 'fixes lint', instructions: 'run it' } } as const;
    const server = { type: 'proposal', proposal: { kind: 'mcp_server', name: 'evil', url: 'https://evil.example/mcp', destination: 'x', auth: 'none', header: null, roles: [], reason: null } } as const;
    assert.match(checkEvents(view(), events(1, skill)).refusal!.reason, /proposed a skill without a call of propose_skill/);
    const ok = checkEvents(view(), events(1, reply(['p1', 'propose_skill']), skill, result('p1', 'propose_skill')));
    assert.equal(ok.refusal, null);
    assert.deepEqual(ok.calls.get('p1'), { name: 'propose_skill', state: 'settled', proposed: true, subject: null });
    assert.match(checkEvents(view(), events(1, reply(['p1', 'propose_skill']), skill, skill)).refusal!.reason, /proposal 3/, 'one proposal per call');
    assert.match(checkEvents(view(), events(1, reply(['p1', 'propose_skill']), server)).refusal!.reason, /an MCP server without a call of propose_mcp_server/);
    assert.match(checkEvents(view({ tools: ['shell'] }), events(1, reply(['p1', 'propose_skill']), skill)).refusal!.reason, /by a role that has it/);
  });

  it('believes the run\'s end only from the lead, and a turn end only for the call that makes it', () => {
    const finished = { type: 'turn_end', outcome: { kind: 'finished', outcome: 'succeeded', summary: 'all done', branch: null, pull_request_url: null } } as const;
    const lead = view({ role: 'lead', lead: true, tools: ['finish', 'ask_person', 'open_pull_request'] });
    assert.match(checkEvents(view({ tools: ['finish'] }), events(1, reply(['f', 'finish']), finished)).refusal!.reason, /the coder role tried to end the run, which only the lead may do/);
    assert.equal(checkEvents(lead, events(1, reply(['f', 'finish']), finished)).refusal, null);
    assert.match(checkEvents(lead, events(1, finished)).refusal!.reason, /never called finish/);
    // A finish call already answered in this batch ends nothing.
    assert.match(checkEvents({ ...lead, calls: open([['f', 'finish']]) }, events(1, result('f', 'finish'), finished)).refusal!.reason, /never called finish/);
    assert.match(checkEvents(lead, events(1, reply(['f', 'finish']), finished, { type: 'progress', text: 'later' })).refusal!.reason, /after the turn had ended/);
    const pr = (id: string) => ({ type: 'turn_end', outcome: { kind: 'pull_request', call: { id, name: 'open_pull_request', arguments: '{}' }, title: 't', body: '', head: null, base: null, draft: false } });
    assert.match(checkEvents(lead, events(1, pr('forged'))).refusal!.reason, /open a pull request, but the model never asked for it/);
    assert.equal(checkEvents(lead, events(1, reply(['p', 'open_pull_request']), pr('p'))).refusal, null);
    assert.match(checkEvents(view({ calls: open([['p', 'open_pull_request']]) }), events(1, pr('p'))).refusal!.reason, /does not have/);
    const question = (options: string[]) => ({ type: 'turn_end', outcome: { kind: 'question', question: 'which?', options } });
    assert.equal(checkEvents(lead, events(1, reply(['q', 'ask_person']), question(['a', 'b']))).refusal, null);
    assert.match(checkEvents(lead, events(1, reply(['q', 'ask_person']), question(Array.from({ length: 11 }, (_, i) => `o${i}`)))).refusal!.reason, /11 options, more than the 10 allowed/);
    assert.match(checkEvents(lead, events(1, reply(['q', 'ask_person']), question(['x'.repeat(201)]))).refusal!.reason, /an option of the question/);
    const handTo = (to: string | null) => ({ type: 'turn_end', outcome: { kind: 'hand_off', to_role: to, summary: 's', branch: null } });
    assert.match(checkEvents(view(), events(1, reply(['h', 'hand_off']), handTo('admin'))).refusal!.reason, /"admin", which is not a role of the team/);
    assert.match(checkEvents(view(), events(1, reply(['h', 'hand_off']), handTo('coder'))).refusal!.reason, /its own role/);
    assert.match(checkEvents(view(), events(1, { type: 'turn_end', outcome: { kind: 'merged' } })).refusal!.reason, /\("merged"\)/);
    assert.equal(checkEvents(view(), events(1, { type: 'turn_end', outcome: { kind: 'iteration_cap', iterations: 3 } })).refusal, null);
    // A failure may say why a retry cannot help (its cause), among the causes an agent knows.
    const failed = (cause: unknown) => ({ type: 'turn_end', outcome: { kind: 'failed', reason: 'the budget is spent', cause } });
    assert.deepEqual(checkEvents(view(), events(1, failed('budget'))).turnEnd?.outcome, { kind: 'failed', reason: 'the budget is spent', cause: 'budget' });
    assert.equal(checkEvents(view(), events(1, failed('model_refused'))).refusal, null);
    assert.match(checkEvents(view(), events(1, failed('archived'))).refusal!.reason, /the failure's cause is neither budget nor model_refused/);
  });

  it('lets a refused event change nothing: neither the calls nor the turn\'s end', () => {
    const big = checkEvents(view({ lead: true, tools: ['finish'] }), events(1, reply(['f', 'finish']), { type: 'turn_end', outcome: { kind: 'finished', outcome: 'succeeded', summary: 's', branch: null, pull_request_url: null }, padding: 'x'.repeat(LIMITS.event) }));
    assert.match(big.refusal!.reason, /turn_end 2: an event of [\d,]+ characters is larger than the 12,582,912 allowed/);
    assert.equal(big.turnEnd, null);
    assert.equal(big.accepted.length, 1);
    const dup = checkEvents(view(), events(1, reply(['c1', 'shell']), reply(['c2', 'shell'], ['c2', 'shell'])));
    assert.match(dup.refusal!.reason, /names the call c2 twice/);
    assert.deepEqual([...dup.calls.keys()], ['c1']);
  });
});
