// A team does real work: a task arrives, the lead runs in a real `local` sandbox, hands the work
// to the dev role, the dev writes a file, the lead asks the person a question, a reply answers
// it, and the run succeeds. The model is a scripted fake behind the real model proxy, reached
// from the sandbox only through the real credential gateway, which injects the role's key.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startGateway, type RunningGateway } from '../../src/gateway/gateway.component.ts';
import { Registry } from '../../src/http/metrics.ts';
import { findProgram } from '../../src/runtime/sandboxes/system.ts';
import { workerComponent } from '../../src/runtime/worker.component.ts';
import { loadShared } from '../../src/services.ts';
import type { RunningComponent } from '../../src/components.ts';
import { makeAgent } from '../factories.ts';
import { startScriptedModel, type ScriptedAnswer, type ScriptedModel, type ScriptedRequest } from '../fakes/scripted-model.ts';
import { captureLogger, testApp, uniq, type TestApp } from '../harness.ts';

const canRun = process.getuid?.() === 0 && ['bwrap', 'nft', 'ip', 'nsenter', 'setpriv'].every((p) => findProgram(p) !== null);


async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '0.0.0.0', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>, ms = 120_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    if (process.env.E2E_DEBUG) process.stderr.write(`waiting for ${what}\n`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The role a request is for, from the system prompt the runtime writes. */
const roleOf = (req: ScriptedRequest) => /You are the "([a-z0-9._-]+)" role/.exec(req.system)?.[1] ?? '?';
const lastText = (req: ScriptedRequest) => String(req.last?.content ?? '');

describe('a team runs a task end to end', { skip: canRun ? false : 'needs root, bubblewrap, nftables, iproute2 and util-linux (the local sandbox provider)' }, () => {
  let t: TestApp;
  let model: ScriptedModel;
  let gateway: RunningGateway;
  let worker: RunningComponent;
  let sandboxDir: string;
  const seen: Array<{ role: string; authorization: string | undefined }> = [];
  let logLines: string[] = [];

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
    model = await startScriptedModel(script);
    sandboxDir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-e2e-'));
    const gatewayPort = await freePort();
    const subnet = `10.${200 + crypto.randomInt(50)}.${crypto.randomInt(256)}.0/24`;
    const config = {
      SERVICE_MODELS: JSON.stringify([{ alias: 'fast', model: 'scripted', api: 'openai', base_url: model.baseUrl, api_key_secret: null, input_usd_per_mtok: 1, output_usd_per_mtok: 2, max_output_tokens: 1000, context_window: 100_000 }]),
      SERVICE_GATEWAY_PORT: String(gatewayPort),
      SERVICE_SANDBOX_DIR: sandboxDir,
      SERVICE_SANDBOX_SUBNET: subnet,
      SERVICE_SANDBOX_HOST_DEAD_AFTER: '30',
    };
    t = await testApp({ modelProxy: true, config });
    const captured = captureLogger('debug');
    logLines = captured.lines;
    const logger = captured.logger;
    const shared = loadShared(t.config);
    const ctx = { config: t.config, db: t.db, logger, metrics: new Registry(), ...shared, services: t.services };
    gateway = await startGateway({ ...ctx, listen: { host: '0.0.0.0', port: gatewayPort } });
    worker = await workerComponent.start(ctx);
  });

  after(async () => {
    if (process.env.E2E_DEBUG) process.stderr.write(logLines.filter((l) => /"level":(30|40|50)/.test(l)).join(''));
    await worker?.stop();
    await gateway?.stop();
    await t?.close();
    await model?.close();
    if (sandboxDir) fs.rmSync(sandboxDir, { recursive: true, force: true });
  });

  it('goes from a task to a question, an answer and success, every step a post', async () => {
    const env = uniq('env');
    assert.equal((await t.request({ method: 'POST', url: '/api/v1/environments', token: t.adminToken, body: { name: env, provider: 'local', profile: 'small', vcpus: 1, memory_mib: 512, disk_gib: 1, idle_after_seconds: 600, deep_sleep_after_seconds: 3600 } })).status, 201);
    const tools = ['write_file', 'read_file', 'shell', 'update_plan', 'ask_person', 'hand_off', 'finish'];
    const lead = await makeAgent(t, { version: { system_prompt: 'You lead the team.', tools } });
    const dev = await makeAgent(t, { version: { system_prompt: 'You write code.', tools } });
    const tpl = await t.request({
      method: 'POST',
      url: '/api/v1/team-templates',
      token: t.adminToken,
      body: { name: uniq('tpl'), lead: 'lead', roles: { lead: { agent: lead.name, model: 'fast', vm: env }, dev: { agent: dev.name, model: 'fast', vm: env } }, sleep: {}, idle_after_seconds: 600, deep_sleep_after_seconds: 3600, budget_usd_per_day: 10, pipeline: { lead: 'dev' } },
    });
    assert.equal(tpl.status, 201, tpl.text);
    const team = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: uniq('team'), template: { name: tpl.body.name, version: null } } });
    assert.equal(team.status, 201, team.text);

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
    const keyOfLead = await t.services.teams.roleModelKey(team.body.name, 'lead');
    assert.ok(keyOfLead && !envFile.includes(keyOfLead));
    assert.ok(seen.every((s) => s.authorization === undefined || !s.authorization.includes(keyOfLead!)));
  });
});
