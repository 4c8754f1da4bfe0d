// Replies and cancels a person gets wrong or sends at the same time, on real runs (a real `local`
// sandbox, the gateway, the model proxy, a scripted model): blank or oversized text, a reply to a
// run with no open question or to a post that is not one, two answers at once, and a reply racing
// a cancel. Each is a clear 4xx or one effect: nothing lost, nothing done twice.
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { after, before, describe, it } from 'node:test';
import { MAX_REPLY_CHARS } from '../../src/console/runs/runs.schemas.ts';
import { advanceRunJob } from '../../src/runtime/engine/advance-run.job.ts';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { lastText, startStack, stackSkip, waitFor, type Stack } from './stack.ts';

describe('replies and cancels that are wrong or race', { skip: stackSkip }, () => {
  let stack: Stack;
  const seen: string[] = [];

  function script(req: ScriptedRequest): ScriptedAnswer {
    const text = lastText(req);
    seen.push(text);
    if (text.startsWith('The answer:')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `answered: ${text}` } }] };
    return { tool_calls: [{ name: 'ask_person', arguments: { question: 'Which colour?', options: ['red', 'blue'] } }] };
  }

  before(async () => {
    stack = await startStack({ script });
  });

  after(async () => {
    await stack?.stop();
  });

  const api = (method: string, url: string, body?: unknown) => stack.t.request({ method, url: `/api/v1${url}`, token: stack.t.adminToken, body });
  /** Waits until no engine job of the run is queued or running: whatever the run does next, it has done. */
  const settled = (runId: string) =>
    waitFor(`the engine to be done with ${runId}`, async () => {
      const open = await sql<{ n: number }>`select count(*)::int as n from jobs where kind = ${advanceRunJob.kind} and payload->>'run_id' = ${runId} and state in ('queued', 'running')`.execute(stack.t.db);
      return open.rows[0].n === 0;
    });

  it('refuses blank and oversized text, a reply to what is not the open question, and the second of two answers', async () => {
    const team = await stack.makeTeam({ roles: { lead: { tools: ['ask_person', 'finish'] } } });
    const runId = await stack.giveTask(team, 'Pick a colour with me.');
    const waiting = await stack.waitForState(runId, 'waiting');
    const q = waiting.open_question.seq as number;
    const postsBefore = (await stack.posts(runId)).length;

    const blank = await api('POST', `/runs/${runId}/replies`, { text: '   ', in_reply_to: q });
    assert.equal(blank.status, 422, blank.text);
    assert.equal(blank.body.errors[0].field, 'text');
    const long = await api('POST', `/runs/${runId}/replies`, { text: 'x'.repeat(MAX_REPLY_CHARS + 1), in_reply_to: q });
    assert.equal(long.status, 400, long.text);
    const notQuestion = await api('POST', `/runs/${runId}/replies`, { text: 'red', in_reply_to: 1 });
    assert.equal(notQuestion.status, 422, notQuestion.text);
    assert.equal(notQuestion.body.errors[0].field, 'in_reply_to');
    assert.match(notQuestion.body.detail, /not a question/);
    assert.equal((await api('POST', `/runs/${runId}/replies`, { text: 'red', in_reply_to: 99_999 })).status, 422);
    assert.equal((await stack.posts(runId)).length, postsBefore, 'a refused reply leaves no post');
    assert.equal((await stack.run(runId)).state, 'waiting');

    // Two answers at once: one is taken, the other is told the question is no longer open.
    const both = await Promise.all([api('POST', `/runs/${runId}/replies`, { text: 'red', in_reply_to: q }), api('POST', `/runs/${runId}/replies`, { text: 'blue', in_reply_to: q })]);
    assert.deepEqual(both.map((r) => r.status).sort(), [202, 409], both.map((r) => r.text).join(' | '));
    const done = await stack.waitForState(runId, 'succeeded');
    assert.equal(done.open_question, null);
    await settled(runId);
    const posts = await stack.posts(runId);
    const answers = posts.filter((p) => p.kind === 'answer');
    assert.equal(answers.length, 1, 'one answer was taken');
    const taken = both.find((r) => r.status === 202)!;
    assert.equal(answers[0].seq, taken.body.seq);
    assert.equal(seen.filter((s) => s.startsWith('The answer:')).length, 1, 'the lead heard one answer');
    assert.deepEqual(posts.filter((p) => p.kind === 'completed').map((p) => p.text), [`answered: The answer: ${answers[0].text}`]);

    // The run has no open question now: answering the old one is 409, saying so; nothing changes.
    const stale = await api('POST', `/runs/${runId}/replies`, { text: 'red', in_reply_to: q });
    assert.equal(stale.status, 409, stale.text);
    assert.match(stale.body.detail, /no open question/);
    const blankFollowUp = await api('POST', `/runs/${runId}/replies`, { text: '\n' });
    assert.equal(blankFollowUp.status, 422, blankFollowUp.text);
    assert.equal((await stack.posts(runId)).length, posts.length);
    assert.equal((await stack.run(runId)).state, 'succeeded');
  });

  it('a reply racing a cancel: the run ends cancelled, the reply is taken before it or refused, never acted on after it', async () => {
    const team = await stack.makeTeam({ roles: { lead: { tools: ['ask_person', 'finish'] } } });
    const statuses: number[] = [];
    // A few rounds on one team: each needs the lead's sandbox the last cancelled run let go.
    for (let round = 0; round < 3; round++) {
      const runId = await stack.giveTask(team, `Round ${round}: pick a colour.`);
      const waiting = await stack.waitForState(runId, 'waiting');
      const q = waiting.open_question.seq as number;
      const [reply, cancel] = await Promise.all([api('POST', `/runs/${runId}/replies`, { text: 'red', in_reply_to: q }), api('POST', `/runs/${runId}/cancel`)]);
      assert.equal(cancel.status, 200, cancel.text);
      assert.ok([202, 409].includes(reply.status), reply.text);
      statuses.push(reply.status);
      await settled(runId);

      const run = await stack.run(runId);
      assert.equal(run.state, 'cancelled');
      assert.ok(run.tasks.every((t: { state: string }) => ['done', 'cancelled', 'failed'].includes(t.state)), JSON.stringify(run.tasks));
      const posts = await stack.posts(runId);
      posts.forEach((p, i) => assert.equal(p.seq, i + 1));
      assert.equal(posts.filter((p) => p.kind === 'canceled').length, 1);
      assert.equal(posts.filter((p) => p.kind === 'completed').length, 0, 'nothing was finished after the cancel');
      const answers = posts.filter((p) => p.kind === 'answer');
      if (reply.status === 202) {
        assert.equal(answers.length, 1);
        assert.ok(answers[0].seq < posts.find((p) => p.kind === 'canceled')!.seq, 'the answer was taken before the cancel');
      } else {
        assert.equal(answers.length, 0);
        assert.match(reply.body.detail, /no longer open|cancelled/);
      }

      // After the cancel: a second cancel, an answer and a follow-up are each 409, and change nothing.
      assert.equal((await api('POST', `/runs/${runId}/cancel`)).status, 409);
      assert.equal((await api('POST', `/runs/${runId}/replies`, { text: 'blue', in_reply_to: q })).status, 409);
      const follow = await api('POST', `/runs/${runId}/replies`, { text: 'go on anyway' });
      assert.equal(follow.status, 409);
      assert.match(follow.body.detail, /cancelled/);
      assert.equal((await stack.posts(runId)).length, posts.length);
    }
    assert.equal(statuses.length, 3);
  });

  it('a task for a team whose lead is busy with another run waits for it, says why, and goes on when that run ends', async () => {
    const team = await stack.makeTeam({ roles: { lead: { tools: ['ask_person', 'finish'] } } });
    const first = await stack.giveTask(team, 'First: pick a colour.');
    const q1 = (await stack.waitForState(first, 'waiting')).open_question.seq;
    // The lead's one replica takes one run at a time, and the first run holds it while it waits.
    const second = await stack.giveTask(team, 'Second: pick a colour.');
    const notice = await waitFor('the second run to say it waits for the lead', async () => (await stack.posts(second)).find((p) => p.kind === 'notice'));
    assert.match(notice.text, /at its limit.*goes on when another run of the team ends/);
    await settled(second);
    assert.equal((await stack.run(second)).state, 'running', 'it waits, it does not fail');

    assert.equal((await api('POST', `/runs/${first}/replies`, { text: 'red', in_reply_to: q1 })).status, 202);
    await stack.waitForState(first, 'succeeded');
    const q2 = (await stack.waitForState(second, 'waiting')).open_question.seq;
    assert.equal((await api('POST', `/runs/${second}/replies`, { text: 'blue', in_reply_to: q2 })).status, 202);
    await stack.waitForState(second, 'succeeded');
    await settled(second);
    assert.equal((await stack.posts(second)).filter((p) => p.kind === 'notice').length, 1, 'said once');
  });
});
