/**
 * The web console's runs and spend pages in headless Chromium, against the whole run stack (console,
 * model proxy, scripted model, gateway, worker with a real `local` sandbox). An operator gives a task
 * in the form and watches the run live: the lead hands work to the dev, asks a question (answered in
 * the reply box), asks to run a risky shell command (approved with the button), and succeeds. A viewer
 * sees the same run without a write control. The spend page charts the team's spend against its budget.
 * Set SERVICE_TEST_SCREENSHOT_DIR to keep a screenshot of every page.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startJaegerQuery } from '../fakes/jaeger-query.ts';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { openBrowser, signIn, skipWithoutChromium, webDir, type Browser } from './browser.ts';
import { lastText, roleOf, stackSkip, startStack, type Stack } from './stack.ts';

const TOOLS = ['write_file', 'read_file', 'shell', 'ask_person', 'hand_off', 'finish'];
const LONG = 180_000;
const SLOW_TASK = 'Sleep for a long time';
const REFUSED_TASK = 'Clean the build';

// The lead hands off; the dev writes and hands back; the lead asks, then runs a risky command (needs approval), then finishes.
function script(req: ScriptedRequest): ScriptedAnswer {
  const text = lastText(req);
  if (req.body.messages.some((m) => String(m.content ?? '').includes(REFUSED_TASK))) {
    const result = req.body.messages.find((m) => m.role === 'tool');
    if (!result) return { tool_calls: [{ name: 'shell', arguments: { command: 'rm -rf build' } }] };
    return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `left alone: ${String(result.content).slice(0, 80)}` } }] };
  }
  if (req.body.messages.some((m) => String(m.content ?? '').includes(SLOW_TASK))) {
    if (!req.body.messages.some((m) => m.role === 'tool')) return { content: 'Sleeping.', tool_calls: [{ name: 'shell', arguments: { command: 'sleep 600' } }] };
    return { tool_calls: [{ name: 'finish', arguments: { outcome: 'failed', summary: 'the sleep was not cancelled' } }] };
  }
  if (roleOf(req) === 'dev') {
    if (!req.body.messages.some((m) => m.role === 'tool')) return { content: 'Writing it.', tool_calls: [{ name: 'write_file', arguments: { path: 'hello.txt', content: 'hello\n' } }] };
    return { tool_calls: [{ name: 'hand_off', arguments: { summary: 'hello.txt is written' } }] };
  }
  if (req.last?.role === 'tool' && text.includes('shipped-ok')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'shipped after approval' } }] };
  if (text.startsWith('The answer: yes')) return { content: 'Shipping.', tool_calls: [{ name: 'shell', arguments: { command: 'echo shipped-ok' } }] };
  if (text.includes('hello.txt is written')) return { tool_calls: [{ name: 'ask_person', arguments: { question: 'The file is written. Ship it?', options: ['yes', 'no'] } }] };
  return { content: 'Planning.', tool_calls: [{ name: 'hand_off', arguments: { summary: 'Write hello.txt.' } }] };
}

const skip = skipWithoutChromium || stackSkip;

describe('web console: runs and spend', { skip }, () => {
  let stack: Stack;
  const browsers: Browser[] = [];
  let base: string;
  let tmp: string;
  let jaeger: Awaited<ReturnType<typeof startJaegerQuery>>;

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-webruns-'));
    const dir = await webDir(tmp);
    jaeger = await startJaegerQuery();
    // Four roles' sandboxes (three teams) live at once: offer more vCPUs than a 2-core machine has.
    stack = await startStack({ script, config: { SERVICE_WEB_DIR: dir, SERVICE_JAEGER_URL: jaeger.url, SERVICE_SANDBOX_VCPUS: '8' } });
    await stack.t.app.listen({ host: '127.0.0.1', port: 0 });
    const address = stack.t.app.server.address();
    assert.ok(address && typeof address === 'object');
    base = `http://127.0.0.1:${address.port}`;
  });

  after(async () => {
    for (const b of browsers) await b.context.close();
    await stack?.stop();
    await jaeger?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** A browser of its own for a new person of `role`, signed in through their setup link. */
  async function person(role: 'viewer' | 'operator', width = 1280): Promise<Browser> {
    const b = await openBrowser(path.join(tmp, `${role}-${browsers.length}`), width);
    browsers.push(b);
    b.page.setDefaultTimeout(30_000);
    await signIn(b.page, base, stack.t.adminToken, stack.t.config.publicBaseUrl, role);
    return b;
  }

  it('an operator gives a task, answers, approves and watches it succeed; a viewer sees no write control; spend is charted', { timeout: 600_000 }, async () => {
    const team = await stack.makeTeam({
      roles: { lead: { tools: TOOLS, role: { confirmation_policy: 'confirm_risky' } }, dev: { tools: TOOLS } },
      pipeline: { lead: 'dev' },
      budget_usd_per_day: 5,
    });
    const operator = await person('operator');
    const { page } = operator;
    try {
      await flow(team, operator);
    } catch (err) {
      const file = path.join(os.tmpdir(), `crewhouse-webruns-failure-${process.pid}.png`);
      await page.screenshot({ path: file, fullPage: true }).catch(() => {});
      throw new Error(`${err instanceof Error ? err.message : String(err)} (screenshot: ${file})`, { cause: err });
    }
  });

  async function flow(team: string, operator: Browser) {
    const { page, shot } = operator;

    // The runs list is empty and leads to the form.
    await page.goto(`${base}/#/runs`);
    await page.getByRole('heading', { name: 'Runs' }).waitFor();
    await page.getByText('No runs yet.').waitFor();
    await shot('runs-1-empty');
    await page.getByRole('link', { name: 'Give a task' }).first().click();
    await page.waitForURL(/#\/runs\/new$/);

    // An unknown team's refusal is spelled out (the form names the problem and the server's detail).
    await page.goto(`${base}/#/runs/new?team=no-such-team`);
    const form = page.getByRole('form', { name: 'give a task' });
    await form.getByLabel('Task').fill('Anything');
    await form.getByRole('button', { name: 'Start the run' }).click();
    await form.getByRole('alert').filter({ hasText: 'There is no such team.' }).waitFor();
    await shot('runs-2-task-refused');

    // Give the task in the form: the page moves to the new run.
    await form.getByLabel('Team').selectOption(team);
    await form.getByLabel('Task').fill('Write hello.txt and ship it');
    await form.getByRole('button', { name: 'Start the run' }).click();
    await page.waitForURL(/#\/runs\/[A-Za-z0-9_-]+$/);
    const runId = decodeURIComponent(new URL(page.url()).hash.replace('#/runs/', ''));
    await page.getByRole('heading', { name: new RegExp(`Run ${runId}`) }).waitFor();
    await page.getByText('Write hello.txt and ship it').first().waitFor();
    const conversation = page.getByRole('list', { name: 'conversation' });

    // The question arrives over the live stream; the reply box answers it.
    const question = page.getByRole('region', { name: 'question', exact: true });
    await question.getByText('The file is written. Ship it?').waitFor({ timeout: LONG });
    await page.getByRole('status').filter({ hasText: 'live' }).waitFor();
    await conversation.locator('.post-question').filter({ hasText: 'Ship it?' }).waitFor();
    await conversation.locator('.post-task').first().waitFor();
    await page.getByRole('table', { name: 'tasks' }).getByRole('row').filter({ hasText: 'dev' }).getByText('done').waitFor();
    await shot('runs-3-question');

    // A viewer sees the open question but no reply box, cancel or task control.
    const viewer = await person('viewer', 390);
    await viewer.page.goto(`${base}/#/runs/${runId}`);
    await viewer.page.getByRole('region', { name: 'question', exact: true }).getByText('An operator answers this.').waitFor();
    assert.equal(await viewer.page.getByRole('button', { name: /Send answer|Cancel run|Approve|Refuse/ }).count(), 0);
    await viewer.shot('runs-4-viewer-narrow');
    await viewer.page.goto(`${base}/#/runs`);
    await viewer.page.getByRole('table', { name: 'runs' }).getByRole('row').filter({ hasText: runId }).getByText('waiting: question').waitFor();
    assert.equal(await viewer.page.getByRole('link', { name: 'Give a task' }).count(), 0);
    await viewer.shot('runs-5-viewer-list');

    // The question's options are buttons: one click answers with it.
    await question.getByRole('group', { name: 'options' }).getByRole('button', { name: 'no' }).waitFor();
    await question.getByRole('group', { name: 'options' }).getByRole('button', { name: 'yes' }).click();

    // The risky shell command waits for a confirmation; Approve lets it run.
    const confirmation = page.getByRole('region', { name: 'confirmation', exact: true });
    await confirmation.getByText(/shell command: echo shipped-ok/).waitFor({ timeout: LONG });
    await conversation.locator('.post-answer').filter({ hasText: 'yes' }).waitFor();
    await shot('runs-6-confirmation');
    await confirmation.getByRole('button', { name: 'Approve' }).click();

    // The run succeeds, live: the badge, the completed post, every task done, the cost.
    await page.locator('h1 .run-state-succeeded').filter({ hasText: 'succeeded' }).waitFor({ timeout: LONG });
    await conversation.locator('.post-completed').waitFor();
    // The stream's badge no longer says live; the dev's tool post says which file it wrote.
    await page.getByRole('status').filter({ hasText: 'run ended' }).waitFor();
    assert.equal(await page.locator('.stream-live').count(), 0);
    await conversation.locator('.post-working .post-detail').filter({ hasText: /hello\.txt/ }).first().waitFor();
    // The viewer's list, left open at a narrow width, refreshes itself.
    await viewer.page.getByRole('table', { name: 'runs' }).getByRole('row').filter({ hasText: runId }).getByText('succeeded').waitFor();
    await viewer.shot('runs-5b-viewer-list-refreshed');
    const run = await stack.run(runId);
    assert.equal(run.state, 'succeeded');
    assert.ok(run.cost_usd > 0);
    const taskRows = page.getByRole('table', { name: 'tasks' }).getByRole('row');
    await taskRows.nth(run.tasks.length).waitFor();
    assert.equal(await taskRows.count(), run.tasks.length + 1, 'a row per task under the header');
    for (const task of run.tasks) assert.equal(task.state, 'done');
    assert.equal(await page.getByRole('button', { name: 'Cancel run' }).count(), 0, 'an ended run has no cancel');
    await page.getByRole('form', { name: 'follow-up' }).waitFor();
    // Every post the API has is on the page, in order, once.
    const posts = await stack.posts(runId);
    await conversation.locator('li.post').nth(posts.length - 1).waitFor();
    const seqs = await conversation.locator('li.post').evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-seq'))));
    assert.deepEqual(seqs, posts.map((p) => p.seq));
    assert.ok(posts.some((p) => p.kind === 'answer' && p.data?.approved === true), 'the approval is recorded');
    await page.getByText('No spans for this run').waitFor(); // the trace store has not got it yet
    await shot('runs-7-succeeded');

    // The list shows it succeeded; filters narrow it.
    await page.goto(`${base}/#/runs`);
    await page.getByRole('table', { name: 'runs' }).getByRole('row').filter({ hasText: runId }).getByText('succeeded').waitFor();
    await page.getByRole('form', { name: 'filter runs' }).getByLabel('State').selectOption('failed');
    await page.getByText('No runs match these filters.').waitFor();
    await page.getByRole('form', { name: 'filter runs' }).getByLabel('State').selectOption('succeeded');
    await page.getByRole('table', { name: 'runs' }).getByRole('row').filter({ hasText: runId }).waitFor();
    assert.match(new URL(page.url()).hash, /state=succeeded/);
    await shot('runs-8-list');

    // The trace: the store's spans as a timeline, each child under its parent, with a link to Jaeger.
    const traceId = (await stack.t.request({ method: 'GET', url: `/api/v1/runs/${runId}/trace`, token: stack.t.adminToken })).body.trace_id;
    jaeger.put(traceId, [
      { id: 'a0000000000000a1', name: 'run', startMs: 0, durationMs: 4000 },
      { id: 'a0000000000000b2', parent: 'a0000000000000a1', name: 'task lead', startMs: 100, durationMs: 1500 },
      { id: 'a0000000000000c3', parent: 'a0000000000000b2', name: 'chat fast', startMs: 200, durationMs: 800, tags: { 'gen_ai.request.model': 'fast' } },
      { id: 'a0000000000000d4', parent: 'a0000000000000a1', name: 'task dev', startMs: 1700, durationMs: 2000 },
    ]);
    await page.goto(`${base}/#/runs/${runId}`);
    const trace = page.getByRole('list', { name: 'trace' });
    await trace.getByRole('listitem').nth(3).waitFor();
    assert.deepEqual(await trace.locator('.trace-name').allInnerTexts(), ['run', 'task lead', 'chat fast', 'task dev']);
    assert.equal(await page.getByRole('link', { name: 'Open in Jaeger' }).getAttribute('href'), `${jaeger.url}/trace/${traceId}`);
    await shot('runs-9-trace');

    // Refuse: the risky command does not run; the refusal is recorded and the run goes on.
    // (A team of its own: a finished run keeps its sandbox claims today, so the first team's lead is "at its limit".)
    const carefulTeam = await stack.makeTeam({ roles: { lead: { tools: TOOLS, role: { confirmation_policy: 'confirm_risky' } } } });
    await page.goto(`${base}/#/runs/new?team=${carefulTeam}`);
    await form.getByLabel('Task').fill(REFUSED_TASK);
    await form.getByRole('button', { name: 'Start the run' }).click();
    await page.waitForURL(/#\/runs\/[A-Za-z0-9_-]+$/);
    const refusedId = decodeURIComponent(new URL(page.url()).hash.replace('#/runs/', ''));
    await confirmation.getByText(/shell command: rm -rf build/).waitFor({ timeout: LONG });
    await confirmation.getByLabel('Note (optional)').fill('keep the build');
    await confirmation.getByRole('button', { name: 'Refuse' }).click();
    await page.locator('h1 .run-state-succeeded').waitFor({ timeout: LONG });
    const refusedPosts = await stack.posts(refusedId);
    assert.ok(refusedPosts.some((p) => p.kind === 'answer' && p.data?.approved === false && p.text === 'keep the build'), JSON.stringify(refusedPosts));
    await conversation.locator('.post-answer').filter({ hasText: 'keep the build' }).waitFor();
    await shot('runs-10-refused');

    // Cancel: a run busy in a long shell command stops at once and says so.
    // Its budget is less than one model call, so the spend page shows it exceeded.
    const slowTeam = await stack.makeTeam({ roles: { lead: { tools: TOOLS, role: { confirmation_policy: 'never_confirm' } } }, budget_usd_per_day: 0.00001 });
    await page.goto(`${base}/#/runs/new?team=${slowTeam}`);
    await form.getByLabel('Task').fill(SLOW_TASK);
    await form.getByRole('button', { name: 'Start the run' }).click();
    await page.waitForURL(/#\/runs\/[A-Za-z0-9_-]+$/);
    const slowId = decodeURIComponent(new URL(page.url()).hash.replace('#/runs/', ''));
    await conversation.locator('.post-working').filter({ hasText: 'Sleeping.' }).waitFor({ timeout: LONG });
    await page.getByRole('button', { name: 'Cancel run' }).click();
    await page.getByRole('button', { name: 'Cancel it now' }).click();
    await page.locator('h1 .run-state-cancelled').waitFor({ timeout: LONG });
    assert.equal((await stack.run(slowId)).state, 'cancelled');
    assert.equal(await page.getByRole('button', { name: 'Cancel run' }).count(), 0);
    await shot('runs-11-cancelled');

    // Spend (read first now, after every model call: it is cached for a minute): the team's spend, tokens and
    // requests, charted against its budget, state in words.
    const spend = (await stack.t.request({ method: 'GET', url: '/api/v1/spend', token: stack.t.adminToken })).body;
    const mine = spend.teams.find((x: { team: string }) => x.team === team);
    assert.ok(mine && mine.totals.requests > 0, JSON.stringify(spend));
    await page.getByRole('navigation', { name: 'sections' }).getByRole('link', { name: 'Spend' }).click();
    const region = page.getByRole('region', { name: `team ${team}`, exact: true });
    await region.getByText('within budget').waitFor();
    await region.locator('svg.recharts-surface').first().waitFor();
    assert.equal(await region.locator('svg.recharts-surface').count(), 3, 'spend, tokens and requests charts');
    assert.ok((await region.locator('.recharts-reference-line').count()) >= 1, 'the budget line is drawn');
    await region.getByText('As a table').click();
    const today = region.getByRole('table').getByRole('row').last();
    assert.match(await today.innerText(), new RegExp(`\\b${mine.series.at(-1).requests}\\b`));
    await page.getByRole('region', { name: 'all teams' }).locator('svg.recharts-surface').first().waitFor();
    // A team past its budget says so in words, not only in colour.
    const spentRegion = page.getByRole('region', { name: `team ${slowTeam}`, exact: true });
    await spentRegion.getByText('budget exceeded').waitFor();
    assert.match(String(await spentRegion.getAttribute('class')), /budget-exceeded/);
    await shot('spend-1');

    assert.deepEqual(operator.problems, []);
    assert.deepEqual(viewer.problems, []);
  }
});
