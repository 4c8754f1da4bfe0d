/**
 * The interactive API documentation (/api/docs) in headless Chromium (Debian's
 * /usr/bin/chromium through playwright-core): it loads under the console's CSP
 * (default-src 'self') with no refused load or script error, and, for a signed-in person,
 * shows every operation of the served contract. Skips when Chromium is not installed.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { chromium } from 'playwright-core';
import { newSecret } from '../../src/auth/credentials.ts';
import { SESSION_COOKIE } from '../../src/http/auth.ts';
import { testApp, uniq } from '../harness.ts';

const CHROMIUM = '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const SCREENSHOTS = process.env.SERVICE_TEST_SCREENSHOT_DIR || null;
const skip = fs.existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed (apt-get install chromium); the browser test cannot run`;

test('API docs: Swagger UI from this origin under the console CSP, every operation listed', { skip, timeout: 180_000 }, async (t) => {
  const app = await testApp();
  await app.app.listen({ host: '127.0.0.1', port: 0 });
  const base = `http://127.0.0.1:${(app.app.server.address() as { port: number }).port}`;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-docs-'));
  const context = await chromium.launchPersistentContext(path.join(tmp, 'profile'), { executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: 1280, height: 900 } });
  try {
    // A person with a password and a browser session, as the console would have.
    const name = uniq('reader');
    const created = await app.request({ method: 'POST', url: '/api/v1/users', token: app.adminToken, body: { name, role: 'viewer' } });
    assert.equal(created.status, 201, created.text);
    const setup = await app.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: created.body.setup_token, password: `pw-${newSecret('', 12)}` } });
    assert.equal(setup.status, 201, setup.text);
    const cookie = new RegExp(`${SESSION_COOKIE}=([^;]+)`).exec(String(setup.headers['set-cookie']))?.[1];
    assert.ok(cookie, 'a session cookie');

    const page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(60_000);
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(msg.text());
    });
    // A load the browser itself abandoned is not refused: the signed-out page's favicon, still on its
    // way when the next navigation leaves that page, ends net::ERR_ABORTED. A CSP refusal is
    // net::ERR_BLOCKED_BY_CSP (and a console error), and every other failure still counts.
    page.on('requestfailed', (req) => {
      if (req.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`failed: ${req.url()} ${req.failure()?.errorText}`);
    });

    // Signed out: the page itself loads under the CSP, and says it cannot read the contract.
    const first = await page.goto(`${base}/api/docs`);
    assert.equal(first?.status(), 200);
    assert.match(String(first?.headers()['content-security-policy']), /^default-src 'self';/);
    await page.getByText(/Failed to load API definition/i).waitFor();
    assert.ok(problems.every((p) => !/Content Security Policy|Refused to/i.test(p)), problems.join('\n'));
    problems.length = 0;

    await context.addCookies([{ name: SESSION_COOKIE, value: cookie, url: base }]);
    await page.goto(`${base}/api/docs`);
    await page.locator('.opblock').first().waitFor();
    const contract = (await app.request({ method: 'GET', url: '/api/v1/openapi.json', token: app.adminToken })).body;
    const operations = Object.values<Record<string, unknown>>(contract.paths).reduce((n, item) => n + Object.keys(item).length, 0);
    assert.equal(await page.locator('.opblock').count(), operations, 'every operation is listed');
    await page.getByText('Create an agent', { exact: true }).first().waitFor();
    // An operation opened shows its example body (src/console/examples.ts), not one made up from the schema.
    await page.locator('#operations-agents-createAgent .opblock-summary').click();
    await page.locator('#operations-agents-createAgent .body-param__example, #operations-agents-createAgent .microlight').first().waitFor();
    assert.match(await page.locator('#operations-agents-createAgent').innerText(), /"system_prompt": "You are a careful software engineer/);
    if (SCREENSHOTS) {
      fs.mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SCREENSHOTS, 'api-docs.png') });
    }
    assert.deepEqual(problems, [], 'no refused load, CSP violation or script error');
    t.diagnostic(`${operations} operations shown`);
  } finally {
    await context.close();
    await app.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
