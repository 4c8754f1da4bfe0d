// Team memory and the daily budget, end to end through a real `local` sandbox, the gateway and
// the model proxy: a finished run leaves an outcome entry; the next run's first task carries a
// "team memory" block of at most `max_entries` entries when `inject`, none when not. A team
// whose budget is spent by a model call mid-run fails with a reason a person understands (the
// budget resets at 00:00 UTC; no one can unblock it sooner but by raising it), and a new task is 429.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { lastText, startStack, stackSkip, type Stack } from './stack.ts';

/** The team an agent works for, from the marker its system prompt carries. */
const teamOf = (req: ScriptedRequest) => /\[team (\w+)\]/.exec(req.system)?.[1] ?? '?';
const firstTask = (req: ScriptedRequest) => String(req.body.messages.find((m) => m.role === 'user')?.content ?? '');

describe('team memory and the daily budget', { skip: stackSkip }, () => {
  let stack: Stack;
  const requests: Array<{ team: string; first: string; req: ScriptedRequest }> = [];

  function script(req: ScriptedRequest): ScriptedAnswer {
    const team = teamOf(req);
    requests.push({ team, first: firstTask(req), req });
    const text = lastText(req);
    if (team === 'budget') {
      // The first call costs 1 USD (a million prompt tokens at 1 USD each), past the 0.5 USD budget.
      // Its tool is instant: the next call comes before the proxy would have written this call's
      // cost behind its answer, and must be refused all the same.
      if (!req.body.messages.some((m) => m.role === 'tool')) return { content: 'Thinking hard.', tool_calls: [{ name: 'update_plan', arguments: { steps: [{ step: 'think', status: 'in_progress' }] } }], usage: { prompt_tokens: 1_000_000, completion_tokens: 10 } };
      return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'should never get here' } }] };
    }
    const task = /Task:\n(.*)$/s.exec(text)?.[1] ?? text;
    return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `did "${task.trim()}"` } }] };
  }

  before(async () => {
    stack = await startStack({ script });
  });

  after(async () => {
    await stack?.stop();
  });

  const tools = ['update_plan', 'finish', 'ask_person'];
  const runTo = async (team: string, text: string, state = 'succeeded') => {
    const id = await stack.giveTask(team, text);
    return { id, run: await stack.waitForState(id, state) };
  };
  const firstRequestOf = (team: string, task: string) => requests.find((r) => r.team === team && r.first.endsWith(task));

  it('writes an outcome entry per finished run and injects at most max_entries of them into a new conversation', async () => {
    const team = await stack.makeTeam({ roles: { lead: { tools, system_prompt: 'You lead. [team mem]', role: { memory: { inject: true, max_entries: 2, write_outcomes: true } } } } });

    const one = await runTo(team, 'First job: count the apples.');
    assert.doesNotMatch(firstRequestOf('mem', 'count the apples.')!.first, /Team memory/, 'nothing to remember yet');
    const entries = await stack.t.services.runs.memory(team);
    assert.equal(entries.length, 1);
    assert.equal(entries[0].run_id, one.id);
    assert.match(entries[0].text, /^Asked: First job: count the apples\. \| Done: did "First job: count the apples\."/);

    await runTo(team, 'Second job: count the pears.');
    await runTo(team, 'Third job: count the plums.');
    assert.equal((await stack.t.services.runs.memory(team)).length, 3);

    await runTo(team, 'Fourth job: sum it up.');
    const first = firstRequestOf('mem', 'sum it up.')!.first;
    const block = /Team memory \(outcomes of earlier work\):\n([\s\S]*?)\n\nTask:/.exec(first);
    assert.ok(block, first);
    const lines = block[1].split('\n');
    assert.equal(lines.length, 2, 'at most max_entries entries');
    assert.match(lines[0], /pears/);
    assert.match(lines[1], /plums/, 'newest last');
    assert.doesNotMatch(block[1], /apples/);
    // Only a conversation's first task gets it: every later request of the run starts with that same task.
    assert.ok(requests.filter((r) => r.first.endsWith('sum it up.')).every((r) => r.first === first));
  });

  it('with inject false a new conversation gets no memory block, and outcomes are still written', async () => {
    const team = await stack.makeTeam({ roles: { lead: { tools, system_prompt: 'You lead. [team quiet]', role: { memory: { inject: false, max_entries: 5, write_outcomes: true } } } } });
    await runTo(team, 'Quiet job one.');
    await runTo(team, 'Quiet job two.');
    assert.equal((await stack.t.services.runs.memory(team)).length, 2);
    const first = firstRequestOf('quiet', 'Quiet job two.')!.first;
    assert.equal(first, 'Task:\nQuiet job two.');
  });

  it('a budget spent mid-run fails the run with the reason, and a new task is 429', async () => {
    const team = await stack.makeTeam({ budget_usd_per_day: 0.5, roles: { lead: { tools, system_prompt: 'You lead. [team budget]', role: { memory: { write_outcomes: false } } } } });
    const { id, run } = await runTo(team, 'Think very hard.', 'failed');
    assert.match(run.failure_reason, /budget/i);
    assert.match(run.failure_reason, /00:00 UTC/);
    assert.ok(run.cost_usd >= 1, `the first call was charged: ${run.cost_usd}`);
    // The proxy refused the second call: the upstream saw only the first.
    assert.equal(requests.filter((r) => r.team === 'budget').length, 1);
    const posts = await stack.posts(id);
    assert.equal(posts.at(-1)?.kind, 'failed');
    assert.match(posts.at(-1)!.text, /budget/);
    // Why a retry cannot help rides on the failed post: the surfaces say when the budget resets instead of "reply to try again".
    assert.equal(posts.at(-1)!.data?.cause, 'budget');

    const refused = await stack.t.request({ method: 'POST', url: `/api/v1/teams/${team}/tasks`, token: stack.t.adminToken, body: { text: 'Again.' } });
    assert.equal(refused.status, 429, refused.text);
    assert.match(refused.body.detail, /daily budget/);
    assert.equal((await stack.t.services.runs.memory(team)).length, 0, 'write_outcomes false leaves no entry');
  });
});
