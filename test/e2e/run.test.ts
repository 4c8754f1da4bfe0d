// A team does real work: a task arrives, the lead runs in a real `local` sandbox, hands the work
// to the dev role, the dev writes a file, the lead asks the person a question, a reply answers
// it, and the run succeeds. The model is a scripted fake behind the real model proxy, reached
// from the sandbox only through the real credential gateway, which injects the role's key.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { lastText, roleOf, startStack, stackSkip, waitFor, type Stack } from './stack.ts';

describe('a team runs a task end to end', { skip: stackSkip }, () => {
  let stack: Stack;
  const seen: Array<{ role: string; authorization: string | undefined }> = [];

  // The lead plans and hands off; the dev writes a file, checks it and hands back; the lead asks the person, then finishes.
  function script(req: ScriptedRequest): ScriptedAnswer {
    const role = roleOf(req);
    seen.push({ role, authorization: req.headers.authorization });
    const text = lastText(req);
    if (role === 'dev') {
      if (!req.body.messages.some((m) => m.role === 'tool')) return { content: 'Writing it.', tool_calls: [{ name: 'write_file', arguments: { path: 'hello.txt', content: 'hello from the dev\n' } }] };
      if (text.startsWith('wrote')) return { tool_calls: [{ name: 'shell', arguments: { command: 'cat hello.txt && env | sort > env.txt' } }] };
      return { tool_calls: [{ name: 'hand_off', arguments: { summary: 'hello.txt is written and checked' } }] };
    }
    if (text.startsWith('The answer: yes')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'hello.txt written by the dev' } }] };
    if (text.includes('hello.txt is written')) return { tool_calls: [{ name: 'ask_person', arguments: { question: 'The file is written. Ship it?', options: ['yes', 'no'] } }] };
    return { content: 'Planning.', tool_calls: [{ name: 'update_plan', arguments: { steps: [{ step: 'have the dev write hello.txt', status: 'in_progress' }] } }, { name: 'hand_off', arguments: { summary: 'Write hello.txt saying hello.' } }] };
  }

  before(async () => {
    stack = await startStack({ script });
  });

  after(async () => {
    await stack?.stop();
  });

  it('goes from a task to a question, an answer and success, every step a post', async () => {
    const t = stack.t;
    const sandboxDir = stack.sandboxDir;
    const tools = ['write_file', 'read_file', 'shell', 'update_plan', 'ask_person', 'hand_off', 'finish'];
    const team = { body: { name: await stack.makeTeam({ roles: { lead: { tools, system_prompt: 'You lead the team.' }, dev: { tools, system_prompt: 'You write code.' } }, pipeline: { lead: 'dev' } }) } };

    const task = await t.request({ method: 'POST', url: `/api/v1/teams/${team.body.name}/tasks`, token: t.adminToken, body: { text: 'Write hello.txt' } });
    assert.equal(task.status, 202, task.text);
    assert.equal(task.headers.location, `/api/v1/runs/${task.body.run_id}`);
    const runUrl = `/api/v1/runs/${task.body.run_id}`;

    const waiting = await waitFor('the run to wait for the person', async () => {
      const r = await t.request({ method: 'GET', url: runUrl, token: t.adminToken });
      assert.notEqual(r.body.state, 'failed', `the run failed: ${r.body.failure_reason}`);
      return r.body.state === 'waiting' ? r.body : null;
    });
    assert.equal(waiting.waiting_for.kind, 'question');
    assert.equal(waiting.waiting_for.role, 'lead');
    assert.match(waiting.open_question.text, /Ship it\?/);

    // A stale or wrong seq is refused; the open question's seq answers it.
    assert.equal((await t.request({ method: 'POST', url: `${runUrl}/replies`, token: t.adminToken, body: { text: 'yes', in_reply_to: 1 } })).status, 422);
    const reply = await t.request({ method: 'POST', url: `${runUrl}/replies`, token: t.adminToken, body: { text: 'yes', in_reply_to: waiting.open_question.seq } });
    assert.equal(reply.status, 202, reply.text);
    assert.equal((await t.request({ method: 'POST', url: `${runUrl}/replies`, token: t.adminToken, body: { text: 'yes', in_reply_to: waiting.open_question.seq } })).status, 409);

    const done = await waitFor('the run to succeed', async () => {
      const r = await t.request({ method: 'GET', url: runUrl, token: t.adminToken });
      assert.notEqual(r.body.state, 'failed', `the run failed: ${r.body.failure_reason}`);
      return r.body.state === 'succeeded' ? r.body : null;
    });
    assert.equal(done.open_question, null);
    assert.deepEqual(done.tasks.map((x: { role: string; state: string }) => `${x.role}:${x.state}`), ['lead:done', 'dev:done', 'lead:done']);
    assert.ok(done.cost_usd > 0, 'the model calls were priced');

    const posts = (await t.request({ method: 'GET', url: `${runUrl}/posts`, token: t.adminToken })).body.items as Array<{ seq: number; kind: string; role: string | null; text: string }>;
    posts.forEach((p, i) => assert.equal(p.seq, i + 1, 'posts are numbered without gaps'));
    const kinds = posts.map((p) => p.kind);
    for (const k of ['task', 'working', 'question', 'answer', 'completed']) assert.ok(kinds.includes(k), `a ${k} post`);
    assert.ok(posts.some((p) => p.kind === 'working' && p.role === 'dev' && p.text === 'write_file hello.txt: done'), 'the tool\'s post names the file it wrote');
    assert.equal(kinds.at(-1), 'completed', JSON.stringify(posts.map((p) => [p.seq, p.kind, p.role, p.text.slice(0, 60)])));
    assert.equal(new Set(posts.map((p) => `${p.kind}|${p.role}|${p.text}`)).size, posts.length, 'no post is repeated');
    const newer = (await t.request({ method: 'GET', url: `${runUrl}/posts?cursor=${posts.length - 1}`, token: t.adminToken })).body.items;
    assert.deepEqual(newer.map((p: { seq: number }) => p.seq), [posts.length]);

    // The dev's file is in its sandbox's workspace; the sandbox never held a key.
    const files = fs.readdirSync(sandboxDir, { recursive: true }) as string[];
    const hello = files.find((f) => f.endsWith(`workspace${path.sep}hello.txt`));
    assert.ok(hello, 'hello.txt is in a sandbox workspace');
    assert.equal(fs.readFileSync(path.join(sandboxDir, hello!), 'utf8'), 'hello from the dev\n');
    const envFile = fs.readFileSync(path.join(sandboxDir, hello!.replace(/hello\.txt$/, 'env.txt')), 'utf8');
    assert.match(envFile, /^HTTPS_PROXY=http:\/\/10\./m);
    assert.doesNotMatch(envFile, /sk-|Bearer|SERVICE_/);
    // Every model call reached the proxy with the role's key, put there by the gateway (the upstream sees the proxy's own credential, never the role key).
    assert.ok(seen.length >= 6);
    const keyOfLead = await t.services.teamsDirectory.roleModelKey(team.body.name, 'lead');
    assert.ok(keyOfLead && !envFile.includes(keyOfLead));
    assert.ok(seen.every((s) => s.authorization === undefined || !s.authorization.includes(keyOfLead!)));
  });
});
