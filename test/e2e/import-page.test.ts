/**
 * The web console's Import page in a real browser (Chromium): the plan of a configuration
 * directory with its diff, then Apply.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { testApp, type TestApp } from '../harness.ts';
import { open, openBrowser, signIn, skipWithoutChromium, webDir, type Browser } from './browser.ts';

describe('the Import page', { skip: skipWithoutChromium }, () => {
  let tmp: string;
  let t: TestApp;
  let base: string;
  let browser: Browser;

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-import-page-'));
    const repo = path.join(tmp, 'repo');
    fs.mkdirSync(path.join(repo, 'policies'), { recursive: true });
    fs.writeFileSync(path.join(repo, 'policies', 'docs.yaml'), 'host: docs.example.org\nwhat: documentation\n');
    t = await testApp({ config: { SERVICE_WEB_DIR: await webDir(tmp), SERVICE_IMPORT_REPOSITORY: repo } });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const address = t.app.server.address();
    assert.ok(address && typeof address === 'object');
    base = `http://127.0.0.1:${address.port}`;
    browser = await openBrowser(path.join(tmp, 'profile'));
  });
  after(async () => {
    await browser?.context.close();
    await t?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('shows the plan with its diff, and Apply writes it', async () => {
    const { page } = browser;
    await signIn(page, base, t.adminToken, t.config.publicBaseUrl, 'admin');
    await page.getByRole('navigation', { name: 'sections' }).getByRole('link', { name: 'Import' }).click();
    await open(page, '#/import');
    const row = page.getByRole('row').filter({ hasText: 'docs' });
    await row.getByText('create', { exact: true }).waitFor();
    await row.getByText('+ host: docs.example.org').waitFor();
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByRole('button', { name: /^Write 1 change\(s\) from the directory/ }).click();
    await page.getByRole('status').getByText('Imported from the configuration directory: 1 change(s) written.').waitFor();
    await row.getByText('unchanged', { exact: true }).waitFor();
    const res = await t.request({ method: 'GET', url: '/api/v1/destinations/docs', token: t.adminToken });
    assert.equal(res.status, 200);
    assert.deepEqual(browser.problems, []);
  });
});
