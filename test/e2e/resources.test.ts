/**
 * The web console's resource pages end to end, in headless Chromium: an admin creates an agent
 * (after a refused name shows its field error), gives it a second version, compares the two and
 * makes the first current again; creates a template and a team through the forms; a change made
 * through the API between the page's read and its write is a 412 the page explains; a viewer
 * sees no write controls and an operator no admin-only ones. With SERVICE_TEST_SCREENSHOT_DIR set, every page is kept as a screenshot.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { makeEnvironment } from '../factories.ts';
import { testApp, uniq } from '../harness.ts';
import { open, openBrowser, signIn, skipWithoutChromium, webDir, type Browser } from './browser.ts';

test('web console: agents, templates and teams through the forms; 412; field errors; a viewer sees no write controls, an operator no admin ones', { skip: skipWithoutChromium, timeout: 300_000 }, async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-e2e-res-'));
  const dir = await webDir(tmp);
  const app = await testApp({ modelProxy: true, config: { SERVICE_WEB_DIR: dir } });
  await app.app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.app.server.address();
  assert.ok(address && typeof address === 'object');
  const base = `http://127.0.0.1:${address.port}`;
  const api = async (method: string, url: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}/api/v1${url}`, {
      method,
      headers: { authorization: `Bearer ${app.adminToken}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, etag: res.headers.get('etag'), body: (res.headers.get('content-type')?.includes('json') ? await res.json() : null) as any };
  };
  const env = await makeEnvironment(app);

  let admin: Browser | null = null;
  let viewer: Browser | null = null;
  let operator: Browser | null = null;
  try {
    admin = await openBrowser(path.join(tmp, 'admin'));
    const { page, shot } = admin;
    await signIn(page, base, app.adminToken, app.config.publicBaseUrl, 'admin');

    // An empty Teams page leads to what to create first.
    await open(page, '#/teams');
    await page.getByText('No teams yet.').waitFor();
    await page.getByRole('link', { name: 'Create an agent' }).waitFor();
    await shot('res-01-teams-empty');

    // An agent: a refused name shows the server's field error next to the field; then it is created.
    const agent = uniq('e2e-agent');
    await page.getByRole('link', { name: 'Create an agent' }).click();
    const form = page.getByRole('form', { name: 'new agent' });
    await form.getByLabel('Name', { exact: true }).fill('Not A Name!');
    await form.getByLabel('Description').fill('writes code');
    await form.getByLabel('System prompt').fill('You write code.');
    await form.getByRole('button', { name: 'Create agent' }).click();
    await form.locator('.field.invalid').filter({ hasText: 'Name' }).locator('.field-error').first().waitFor();
    assert.match(await form.locator('.field.invalid .field-error').first().innerText(), /^name: must be lowercase letters/);
    // Said once: the line under the form counts the fields and leaves their problems to them.
    const line = await form.locator('p.problem').innerText();
    assert.match(line, /one field needs a change/);
    assert.doesNotMatch(line, /lowercase/);
    await shot('res-02-agent-field-error');
    await form.getByLabel('Name', { exact: true }).fill(agent);
    await form.getByRole('button', { name: 'Create agent' }).click();
    await page.waitForURL(new RegExp(`#/agents/${agent}$`));
    await page.getByRole('heading', { name: agent }).waitFor();
    await page.getByText('Loading…').first().waitFor({ state: 'detached' });
    await shot('res-03-agent');

    // A second version through the version form; compare it with the first; make the first current again.
    await page.getByRole('button', { name: 'Edit as a new version' }).click();
    const versionForm = page.getByRole('form', { name: 'new version' });
    assert.equal(await versionForm.getByLabel('System prompt').inputValue(), 'You write code.');
    await versionForm.getByLabel('System prompt').fill('You write careful code.');
    await versionForm.getByLabel('Note').fill('more care');
    await versionForm.getByRole('button', { name: 'Save as new version' }).click();
    await page.getByRole('heading', { name: 'Current version (2)' }).waitFor();
    const versions = page.getByRole('table', { name: 'versions' });
    await versions.getByRole('row').filter({ hasText: 'more care' }).waitFor();
    await versions.getByRole('row').filter({ hasText: 'first version' }).getByRole('button', { name: 'Compare with current' }).click();
    const diff = page.getByRole('table', { name: /version 1 .* against version 2/ });
    await diff.locator('tr.diff-changed').filter({ hasText: 'careful' }).waitFor();
    await shot('res-04-agent-diff');
    await versions.getByRole('row').filter({ hasText: 'first version' }).getByRole('button', { name: 'Make current' }).click();
    await page.getByRole('heading', { name: 'Current version (3)' }).waitFor();
    const stored = await api('GET', `/agents/${agent}`);
    assert.equal(stored.body.current_version, 3);
    assert.equal(stored.body.current.system_prompt, 'You write code.');

    // An avatar: a PNG through the file input, shown on the page once stored.
    const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');
    await page.getByLabel(/Set avatar/).setInputFiles({ name: 'face.png', mimeType: 'image/png', buffer: png });
    await page.getByRole('img', { name: `avatar of ${agent}` }).waitFor();
    await page.waitForFunction(`[...document.querySelectorAll('img.avatar')].some((i) => i.complete && i.naturalWidth > 0)`);

    // A template through the roles editor; its pipeline is drawn as a chain.
    const template = uniq('e2e-tpl');
    await open(page, '#/team-templates/new');
    const tform = page.getByRole('form', { name: 'new template' });
    await tform.getByLabel('Name', { exact: true }).fill(template);
    await tform.getByRole('button', { name: 'Add a role' }).click();
    const lead = tform.getByRole('group', { name: 'role 1' });
    const dev = tform.getByRole('group', { name: 'role 2' });
    await dev.getByLabel('Role').fill('dev');
    for (const role of [lead, dev]) {
      await role.getByLabel('Agent').selectOption(agent);
      await role.getByLabel('Model').selectOption('fast');
      await role.getByLabel('Environment').selectOption(env.name);
    }
    await lead.getByLabel('Hands off to').selectOption('dev');
    await tform.getByLabel('Lead', { exact: true }).selectOption('lead');
    await tform.getByRole('list', { name: 'pipeline' }).getByText('dev').waitFor();
    await shot('res-05-template-new');
    await tform.getByRole('button', { name: 'Create template' }).click();
    await page.waitForURL(new RegExp(`#/team-templates/${template}$`));
    const chain = page.getByRole('list', { name: 'pipeline' });
    // The page loads the template after the address changes: wait for its chain before reading it.
    await chain.getByRole('listitem').nth(1).waitFor();
    assert.deepEqual((await chain.getByRole('listitem').allInnerTexts()).map((s) => s.replace('→', '').trim()), ['lead', 'dev']);
    await shot('res-06-template');

    // A team from the template.
    const team = uniq('e2e-team');
    await page.getByRole('link', { name: 'Create a team from it' }).click();
    const teamForm = page.getByRole('form', { name: 'new team' });
    await teamForm.getByLabel('Name', { exact: true }).fill(team);
    // The form chooses the template named in the link once the templates have loaded (until then the select has only "choose…").
    const templateField = teamForm.getByLabel('Template', { exact: true });
    await templateField.locator('option', { hasText: template }).waitFor({ state: 'attached' });
    assert.equal(await templateField.inputValue(), template);
    await teamForm.getByRole('button', { name: 'Create team' }).click();
    await page.waitForURL(new RegExp(`#/teams/${team}$`), { timeout: 120_000 });
    await page.getByRole('heading', { name: team }).waitFor();
    await page.getByText('Loading…').first().waitFor({ state: 'detached' });
    assert.equal(await page.getByRole('link', { name: 'Give a task' }).getAttribute('href'), `#/runs/new?team=${team}`);
    await shot('res-07-team');

    // 412: the page read the team; the API changes it; the page's save is refused and says what changed.
    const settings = page.getByRole('form', { name: 'team settings' });
    await settings.getByLabel('Budget (USD per day)').fill('12');
    const before = await api('GET', `/teams/${team}`);
    const changed = await api('PATCH', `/teams/${team}`, { rework_rounds: 5 }, { 'if-match': before.etag! });
    assert.equal(changed.status, 200);
    await settings.getByRole('button', { name: 'Save settings' }).click();
    await settings.getByRole('alert').filter({ hasText: /Someone changed this.*rework_rounds/ }).waitFor();
    await shot('res-08-team-412');
    await settings.getByRole('button', { name: 'Save settings' }).click();
    await settings.getByText('Saved.').waitFor();
    assert.equal(await settings.getByLabel('Rework rounds').inputValue(), '5', 'the re-read shows the other change');
    const after412 = (await api('GET', `/teams/${team}`)).body;
    assert.equal(after412.budget_usd_per_day, 12);
    assert.equal(after412.settings.rework_rounds, 5, 'saving again keeps the change made meanwhile');

    // A document of the team, through the shared editor.
    await page.getByRole('button', { name: 'New document' }).click();
    const docForm = page.getByRole('form', { name: 'new document' });
    await docForm.getByLabel('File name').fill('notes.md');
    await docForm.getByLabel('Content').fill('# Notes\nBe kind.');
    await docForm.getByRole('button', { name: 'Add document' }).click();
    await page.getByRole('region', { name: 'document notes.md' }).waitFor();
    assert.equal((await api('GET', `/teams/${team}/documents/notes.md`)).body.content, '# Notes\nBe kind.');

    // A destination through its form (the sample's host kept), and a platform skill with its SKILL.md.
    const destination = uniq('e2e-dest');
    await open(page, '#/destinations/new');
    await page.getByRole('form', { name: 'new destination' }).getByLabel('Name', { exact: true }).fill(destination);
    await page.getByRole('button', { name: 'Create destination' }).click();
    await page.waitForURL(new RegExp(`#/destinations/${destination}$`));
    assert.equal((await api('GET', `/destinations/${destination}`)).body.host, 'api.example.com');
    const skill = uniq('e2e-skill').replace(/[^a-z0-9-]/g, '');
    await open(page, '#/skills/new');
    await page.getByRole('form', { name: 'new skill' }).getByLabel('Name', { exact: true }).fill(skill);
    await page.getByRole('button', { name: 'Create skill' }).click();
    await page.waitForURL(new RegExp(`#/skills/${skill}$`));
    assert.match((await api('GET', `/skills/${skill}`)).body.body, new RegExp(`name: ${skill}`));

    // An integration: the webhook URL the service gives out, its secrets' state, a test, its deliveries.
    await open(page, '#/integrations/code_host');
    await page.getByLabel('webhook URL').getByText(`${app.config.publicBaseUrl.replace(/\/+$/, '')}/webhooks/code_host`).waitFor();
    await page.getByRole('form', { name: 'secret app_key' }).getByText('no value').waitFor();
    await page.getByRole('button', { name: 'Test the connection' }).click();
    await page.getByRole('status').filter({ hasText: /error|unknown/ }).waitFor();
    await page.getByText('No webhook deliveries yet.').waitFor();
    await shot('res-09-integration-code-host');

    // Every section and page, for the screenshots and for script errors under the CSP.
    const pages = ['#/agents', '#/team-templates', '#/teams', '#/destinations', '#/destinations/new', '#/environments', `#/environments/${env.name}`, '#/skills', '#/skills/new', '#/integrations', '#/mcp-servers', '#/secrets', '#/users', '#/audit', '#/account'];
    for (const [i, hash] of pages.entries()) {
      await open(page, hash);
      await shot(`res-${String(10 + i).padStart(2, '0')}-${hash.slice(2).replace(/\//g, '-')}`);
    }
    assert.deepEqual(admin.problems, []);
    await open(page, '#/audit');
    await page.getByRole('table', { name: 'audit log' }).getByRole('row').filter({ hasText: 'agent.create' }).filter({ hasText: agent }).waitFor();

    // A viewer sees the same pages without a single write control.
    viewer = await openBrowser(path.join(tmp, 'viewer'), 420);
    await signIn(viewer.page, base, app.adminToken, app.config.publicBaseUrl, 'viewer');
    const writes = /^(New |Create|Edit|Save|Delete|Archive|Give a task|Make current|Add |Override|Set value|Replace|Remove|Link$|Accept|Upgrade|Disable|Enable)/;
    for (const hash of ['#/agents', `#/agents/${agent}`, '#/team-templates', `#/team-templates/${template}`, '#/teams', `#/teams/${team}`, '#/destinations', `#/environments/${env.name}`, '#/skills', '#/secrets', '#/mcp-servers']) {
      await open(viewer.page, hash);
      const controls: string[] = [...(await viewer.page.getByRole('button').allInnerTexts()), ...(await viewer.page.locator('a.button').allInnerTexts())].filter((s) => writes.test(s.trim()));
      assert.deepEqual(controls, [], `${hash} shows no write controls to a viewer`);
    }
    await open(viewer.page, `#/teams/${team}`);
    await viewer.shot('res-30-team-as-viewer-narrow');
    assert.deepEqual(viewer.problems, []);
    await viewer.context.close();
    viewer = null;

    // An operator runs teams but sees none of the admin-only controls.
    operator = await openBrowser(path.join(tmp, 'operator'));
    await signIn(operator.page, base, app.adminToken, app.config.publicBaseUrl, 'operator');
    const nav = await operator.page.getByRole('navigation', { name: 'sections' }).getByRole('link').allInnerTexts();
    assert.ok(!nav.includes('Users') && !nav.includes('Audit log'), nav.join(', '));
    await open(operator.page, `#/teams/${team}`);
    await operator.page.getByRole('link', { name: 'Give a task' }).waitFor();
    await operator.page.getByRole('button', { name: 'Archive team' }).waitFor();
    await operator.page.getByRole('button', { name: 'Save settings' }).waitFor();
    assert.equal(await operator.page.getByRole('button', { name: /^(Override|Change override)$/ }).count(), 0, 'egress overrides are for admins');
    await operator.shot('res-31-team-as-operator');
    for (const hash of ['#/agents', `#/agents/${agent}`, `#/team-templates/${template}`, '#/destinations', '#/skills', '#/secrets']) {
      await open(operator.page, hash);
      const controls: string[] = (await operator.page.getByRole('button').allInnerTexts()).concat(await operator.page.locator('a.button').allInnerTexts()).filter((x) => /^(New |Edit|Delete|Make current|Set value|Replace)/.test(x.trim()));
      assert.deepEqual(controls, [], `${hash} shows no admin controls to an operator`);
    }
    assert.deepEqual(operator.problems, []);
  } catch (err) {
    const file = path.join(os.tmpdir(), `crewhouse-e2e-res-failure-${process.pid}.png`);
    await admin?.page.screenshot({ path: file, fullPage: true }).catch(() => {});
    t.diagnostic(`screenshot of the failure: ${file}`);
    throw err;
  } finally {
    await viewer?.context.close();
    await operator?.context.close();
    await admin?.context.close();
    await app.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
