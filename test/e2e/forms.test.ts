/**
 * The forms built from the contract's schemas, in headless Chromium at 1366 px: an environment
 * (a refused name at its field before sending, the server's refusal at its field, then saved
 * and edited), a destination (a list field checked line by line), and an integration whose
 * settings come from its kind's definition, with a missing secret named at its box and set
 * there in place, never shown again; and a template's new version, its roles a map of groups.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type { Locator } from 'playwright-core';
import { makeTemplate } from '../factories.ts';
import { testApp, uniq } from '../harness.ts';
import { open, openBrowser, signIn, skipWithoutChromium, webDir, type Browser } from './browser.ts';

/** The problems shown right below one field of a form (by its path, as the server names it). */
const errorsAt = (form: Locator, field: string) => form.locator(`[data-field="${field}"] > .field-error`);

test('web console forms: an environment, a destination and an integration through forms built from the contract, errors at their fields', { skip: skipWithoutChromium, timeout: 300_000 }, async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-e2e-forms-'));
  const dir = await webDir(tmp);
  const app = await testApp({ config: { SERVICE_WEB_DIR: dir } });
  await app.app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.app.server.address();
  assert.ok(address && typeof address === 'object');
  const base = `http://127.0.0.1:${address.port}`;
  const api = async (url: string) => {
    const res = await fetch(`${base}/api/v1${url}`, { headers: { authorization: `Bearer ${app.adminToken}` } });
    return { status: res.status, body: (await res.json()) as any };
  };

  let admin: Browser | null = null;
  try {
    admin = await openBrowser(path.join(tmp, 'admin'), 1366);
    const { page, shot, problems } = admin;
    await signIn(page, base, app.adminToken, app.config.publicBaseUrl, 'admin');

    // An environment: the form starts from a provider this host runs, with help from the contract.
    const envName = uniq('e2e-env');
    await open(page, '#/environments/new');
    const envForm = page.getByRole('form', { name: 'new environment' });
    const provider = envForm.getByLabel('Provider');
    assert.equal(await provider.inputValue(), '"local"');
    assert.deepEqual(await provider.locator('option').allInnerTexts(), ['microvm', 'hosted', 'local']);
    await envForm.getByText('when an idle agent is snapshotted; default 900').waitFor();
    await envForm.getByLabel('Memory (MiB)').waitFor();

    // A name the contract refuses is named at its field, in words, before anything is sent.
    await envForm.getByLabel('Name', { exact: true }).fill('Big Box');
    await envForm.getByRole('button', { name: 'Create environment' }).click();
    await errorsAt(envForm, 'name').filter({ hasText: 'must be lowercase letters, digits, "_" and "-", starting with a letter or digit' }).waitFor();
    assert.equal(await errorsAt(envForm, 'name').count(), 1, 'the problem is said once');
    assert.doesNotMatch(await envForm.innerText(), /\^\[|\{0,62\}/, 'no regular expression on the page');
    await shot('forms-01-environment-name-refused');

    // A rule only the server knows (a checkpoint is refused for local) lands at its field too.
    await envForm.getByLabel('Name', { exact: true }).fill(envName);
    await envForm.getByLabel('Checkpoint ID').fill('ckpt-1');
    await envForm.getByRole('button', { name: 'Create environment' }).click();
    await errorsAt(envForm, 'checkpoint_id').filter({ hasText: /local/ }).waitFor();
    assert.equal(await errorsAt(envForm, 'name').count(), 0);
    const summary = await envForm.locator('p.problem').innerText();
    assert.match(summary, /one field needs a change/);
    assert.doesNotMatch(summary, /local/, 'the field\'s problem is not repeated in the summary');
    await shot('forms-02-environment-server-refusal');

    await envForm.getByLabel('Checkpoint ID').fill('');
    await envForm.getByRole('button', { name: 'Create environment' }).click();
    await page.waitForURL(new RegExp(`#/environments/${envName}$`));
    const created = await api(`/environments/${envName}`);
    assert.equal(created.body.provider, 'local');
    assert.equal(created.body.memory_mib, 1024);
    assert.equal(created.body.checkpoint_id, null);

    // Edited through the same form (a replace), and the YAML view shows the same value.
    await page.getByRole('button', { name: 'Edit', exact: true }).click();
    const editForm = page.getByRole('form', { name: 'edit environment' });
    await editForm.getByLabel('Memory (MiB)').fill('100');
    await editForm.getByRole('button', { name: 'Save' }).click();
    await errorsAt(editForm, 'memory_mib').filter({ hasText: 'must be at least 128' }).waitFor();
    await editForm.getByLabel('Memory (MiB)').fill('2048');
    await editForm.getByRole('button', { name: 'YAML (advanced)' }).click();
    assert.match(await editForm.getByLabel('Environment as YAML').inputValue(), /memory_mib: 2048/);
    await editForm.getByRole('button', { name: 'Form', exact: true }).click();
    await editForm.getByRole('button', { name: 'Save' }).click();
    await editForm.waitFor({ state: 'detached' });
    assert.equal((await api(`/environments/${envName}`)).body.memory_mib, 2048);
    await shot('forms-03-environment-saved');

    // A destination: lists are one item per line, each item checked against the contract.
    const destName = uniq('e2e-dest');
    await open(page, '#/destinations/new');
    const destForm = page.getByRole('form', { name: 'new destination' });
    await destForm.getByLabel('Name', { exact: true }).fill(destName);
    await destForm.getByLabel('Host').fill('api.example.org');
    await destForm.getByLabel('Methods').fill('GET\nPOST');
    await destForm.getByLabel('Paths').fill('/v1/*\nv2');
    await destForm.getByRole('button', { name: 'Create destination' }).click();
    await errorsAt(destForm, 'paths').filter({ hasText: 'item 2: must be a path starting with "/"' }).waitFor();
    await shot('forms-04-destination-refused');
    await destForm.getByLabel('Paths').fill('/v1/*\n/v2/*');
    await destForm.getByRole('button', { name: 'Create destination' }).click();
    await page.waitForURL(new RegExp(`#/destinations/${destName}$`));
    const dest = (await api(`/destinations/${destName}`)).body;
    assert.deepEqual([dest.host, dest.methods, dest.paths], ['api.example.org', ['GET', 'POST'], ['/v1/*', '/v2/*']]);

    // An integration: its settings and secrets from the kind's definition.
    await open(page, '#/integrations/chat_a');
    const settings = page.getByRole('form', { name: 'integration settings' });
    await settings.getByText('base URL of the chat server').waitFor();
    await settings.getByLabel('Slash command').waitFor();
    await settings.getByLabel('Enabled').check();
    await settings.getByLabel('URL').fill('https://chat.example.com');
    await settings.getByRole('button', { name: 'Save settings' }).click();
    // Enabling needs the bot token: the server's refusal is shown at the secret's own box.
    const box = page.getByRole('form', { name: 'secret bot_token' });
    await box.locator('.field-error').filter({ hasText: 'has no value yet; an admin sets it first' }).waitFor();
    assert.doesNotMatch(await page.locator('main').innerText(), /\/api\/v1|PUT \//, 'no API path on the page');
    await shot('forms-05-integration-needs-secret');

    const token = `bot-${uniq('t')}`;
    await box.getByLabel(/bot token/).fill(token);
    await box.getByRole('button', { name: 'Set' }).click();
    await box.getByText('Stored. It will not be shown again.').waitFor();
    await box.locator('.badge', { hasText: /^set$/ }).waitFor();
    assert.equal((await api('/secrets/integrations/chat_a/bot_token')).body.set, true);
    assert.equal(await box.getByLabel(/bot token/).inputValue(), '', 'the box is emptied');

    await settings.getByRole('button', { name: 'Save settings' }).click();
    await settings.getByText('Saved.').waitFor();
    const integration = (await api('/integrations/chat_a')).body;
    assert.equal(integration.enabled, true);
    assert.deepEqual(integration.settings, { url: 'https://chat.example.com' });
    assert.ok(!(await page.content()).includes(token), 'the secret is never shown');
    await shot('forms-06-integration-enabled');

    // From an integration to the Secrets page: a second link with ?name= fills the open form too.
    await open(page, '#/secrets?name=integrations/chat_a/command_token');
    const secretForm = page.getByRole('form', { name: 'set a secret' });
    assert.equal(await secretForm.getByLabel('Secret name').inputValue(), 'integrations/chat_a/command_token');
    await open(page, '#/secrets?name=integrations/chat_a/bot_token');
    await page.waitForFunction(`document.querySelector('form[aria-label="set a secret"] input')?.value === 'integrations/chat_a/bot_token'`);
    await secretForm.getByRole('button', { name: 'Replace value' }).waitFor();

    // A template's new version: a map of roles, each a group of fields, in the same form.
    const template = await makeTemplate(app);
    await open(page, `#/team-templates/${template.name}`);
    await page.getByRole('button', { name: 'Edit as a new version' }).click();
    const versionForm = page.getByRole('form', { name: 'new version' });
    await versionForm.getByLabel('Budget (USD per day)').fill('25');
    const dev = versionForm.locator('[data-field="roles.dev"]');
    await dev.getByLabel('Max iterations').fill('0');
    await versionForm.getByRole('button', { name: 'Save as new version' }).click();
    await errorsAt(dev, 'roles.dev.max_iterations').filter({ hasText: 'must be at least 1' }).waitFor();
    await shot('forms-07-template-version-refused');
    await dev.getByLabel('Max iterations').fill('40');
    await versionForm.getByLabel('Note').fill('a bigger budget');
    await versionForm.getByRole('button', { name: 'Save as new version' }).click();
    await versionForm.waitFor({ state: 'detached' });
    const stored = (await api(`/team-templates/${template.name}`)).body;
    assert.equal(stored.current_version, 2);
    assert.equal(stored.current.budget_usd_per_day, 25);
    assert.equal(stored.current.roles.dev.max_iterations, 40);

    assert.deepEqual(problems, []);
  } finally {
    await admin?.context.close();
    await app.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
