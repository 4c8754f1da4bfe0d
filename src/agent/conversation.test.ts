import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Conversation, estimateTokens, messagesOf } from './conversation.ts';
import { bodyOf, type ModelRequest } from './model.ts';
import type { AgentConfig, AgentEvent, AgentEventBody } from './protocol.ts';

const config: AgentConfig = {
  role: 'lead',
  lead: true,
  model: 'fake',
  base_url: 'http://llm.invalid/v1',
  system_prompt: 'You are a careful engineer.',
  tools: ['shell', 'read_file', 'finish'],
  confirmation_policy: 'never_confirm',
  max_iterations: 50,
  roles: ['lead', 'coder'],
  next_role: 'coder',
  workspace: '/workspace',
  repo_dir: '/workspace/repo',
  branch: 'crewhouse/run-1',
  documents: [{ path: '/workspace/context/a.md', description: 'the brief', type: 'text/markdown', size: 12, scope: 'team' }],
  skills: [],
  context_tokens: 100_000,
};

/** A journal's events as a turn records them: two tasks, answers with and without calls, results ok and failed, long and with escapes, then masking and a summary, then more steps. */
function journalEvents(): AgentEvent[] {
  const bodies: AgentEventBody[] = [
    { type: 'input', input: { kind: 'task', text: 'Fix the "bug"\nin src/ — quickly', from: 'person', memory: 'earlier: it worked' } },
    { type: 'model_call', iteration: 1 },
    { type: 'model_reply', content: 'Looking.', tool_calls: [{ id: 'c1', name: 'shell', arguments: '{"command":"ls"}' }, { id: 'c2', name: 'read_file', arguments: '{"path":"a"}' }], usage: null, finish_reason: 'tool_calls' },
    { type: 'tool_started', call: { id: 'c1', name: 'shell', arguments: '{"command":"ls"}' } },
    { type: 'tool_result', call_id: 'c1', name: 'shell', ok: true, output: `exit code: 0\nstdout:\n${'file\t✓ \u2028 "quoted"\n'.repeat(40)}` },
    { type: 'tool_result', call_id: 'c2', name: 'read_file', ok: false, output: 'no such file' },
    { type: 'model_call', iteration: 2 },
    { type: 'model_error', attempt: 1, reason: 'HTTP 502', final: false },
    { type: 'model_reply', content: null, tool_calls: [], usage: { prompt_tokens: 10, completion_tokens: 2 }, finish_reason: 'stop' },
    { type: 'input', input: { kind: 'task', from: 'the runtime', text: 'Answer with a tool call.' } },
    { type: 'input', input: { kind: 'answer', text: 'blue' } },
    { type: 'progress', text: 'half way' },
    { type: 'model_call', iteration: 3 },
    { type: 'model_reply', content: 'Again.', tool_calls: [{ id: 'c3', name: 'shell', arguments: '{"command":"cat big"}' }], usage: null, finish_reason: 'tool_calls' },
    { type: 'tool_started', call: { id: 'c3', name: 'shell', arguments: '{"command":"cat big"}' } },
    { type: 'tool_result', call_id: 'c3', name: 'shell', ok: true, output: 'x'.repeat(5000) },
    { type: 'context_masked', up_to_seq: 16, tool_results: 2, chars: 5000 },
    { type: 'model_call', iteration: 4 },
    { type: 'model_reply', content: null, tool_calls: [{ id: 'c4', name: 'shell', arguments: '{"command":"true"}' }], usage: null, finish_reason: 'tool_calls' },
    { type: 'tool_result', call_id: 'c4', name: 'shell', ok: true, output: 'y'.repeat(300) },
    { type: 'context_summarized', up_to_seq: 18, summary: 'SUMMARY: read big twice' },
    { type: 'input', input: { kind: 'resume' } },
    { type: 'model_call', iteration: 5 },
    { type: 'model_reply', content: 'Done.', tool_calls: [{ id: 'c5', name: 'finish', arguments: '{"outcome":"succeeded","summary":"ok"}' }], usage: null, finish_reason: 'tool_calls' },
    { type: 'turn_end', outcome: { kind: 'finished', outcome: 'succeeded', summary: 'ok', branch: null, pull_request_url: null } },
  ];
  return bodies.map((b, i) => ({ seq: i + 1, at: new Date(0).toISOString(), ...b }) as AgentEvent);
}

describe('the conversation kept in step with its journal', () => {
  it('is, after every event and after any batch of them, what deriving it from the whole journal makes: messages, token estimate and JSON', () => {
    const events = journalEvents();
    for (const batch of [1, 2, 3, 7]) {
      const conversation = new Conversation(config);
      for (let n = 0; n <= events.length; n += batch) {
        const upTo = events.slice(0, Math.min(n, events.length));
        conversation.update(upTo);
        const derived = messagesOf(config, upTo);
        assert.deepEqual(conversation.messages, derived, `after ${upTo.length} events, in batches of ${batch}`);
        assert.equal(conversation.tokens, estimateTokens(derived));
        assert.equal(Buffer.concat(conversation.json()).toString('utf8'), JSON.stringify(derived));
      }
    }
    // The marks did change earlier messages: masked output, then everything before the summary dropped.
    const whole = new Conversation(config).update(events.slice(0, 17)).messages;
    assert.ok(whole.some((m) => m.role === 'tool' && m.content.startsWith('[output of shell masked')));
    assert.equal(new Conversation(config).update(events).messages[1].content, 'Summary of the conversation so far (earlier messages were dropped to fit the context window):\nSUMMARY: read big twice');
  });

  it('hands out the messages as they were at the call: a later update does not change a list already given', () => {
    const events = journalEvents();
    const conversation = new Conversation(config).update(events.slice(0, 6));
    const given = conversation.messages;
    conversation.update(events.slice(0, 16));
    assert.deepEqual(given, messagesOf(config, events.slice(0, 6)));
  });

  it('sends the same request body from the kept JSON as from the messages, byte for byte', () => {
    const messages = messagesOf(config, journalEvents());
    const tools = [{ type: 'function' as const, function: { name: 'shell', description: 'Runs "a" command ✓', parameters: { type: 'object', properties: { command: { type: 'string' } } } } }];
    for (const over of [{}, { stream: true }, { tools }, { stream: true, tools, temperature: 0.2 }, { temperature: 0 }] as Array<Partial<ModelRequest>>) {
      const req: ModelRequest = { baseUrl: 'http://x/v1', model: 'fa"ke', messages, tools: [], stream: false, timeoutMs: 1000, ...over };
      // As callModel serialised it before: the body object, keys in this order.
      const plain: Record<string, unknown> = { model: req.model, messages: req.messages, stream: req.stream };
      if (req.tools.length) {
        plain.tools = req.tools;
        plain.tool_choice = 'auto';
      }
      if (req.stream) plain.stream_options = { include_usage: true };
      if (req.temperature !== undefined && req.temperature !== null) plain.temperature = req.temperature;
      const expected = Buffer.from(JSON.stringify(plain));
      assert.deepEqual(bodyOf(req), expected);
      assert.deepEqual(bodyOf({ ...req, messagesJson: new Conversation(config).update(journalEvents()).json() }), expected);
      // The tools' JSON is reused for the same list.
      assert.deepEqual(bodyOf(req), expected);
    }
  });
});
