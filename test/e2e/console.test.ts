/**
 * The web console end to end, in headless Chromium (Debian's /usr/bin/chromium through playwright-core):
 * an admin creates a user through the API, the person opens the setup link, chooses a password,
 * lands in the signed-in shell, logs out and logs in again. Skips when Chromium is not installed.
 *
 * The console runs in-process on 127.0.0.1 (ephemeral port) on a fresh test database, serving
 * dist/web when it is at least as new as web/, otherwise a build made here into a temp dir.
 * Set SERVICE_TEST_SCREENSHOT_DIR to keep screenshots of the pages it visits.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { chromium, type Page } from 'playwright-core';
import { systemActor } from '../../src/audit/audit.ts';
import { newSecret } from '../../src/auth/credentials.ts';
import { buildConsoleApp, createConsoleServices } from '../../src/console/app.ts';
import { Registry } from '../../src/metrics.ts';
import { captureLogger, testConfig, testDb, uniq } from '../harness.ts';

const CHROMIUM = '/usr/bin/chromium';
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const ROOT = path.resolve(import.meta.dirname, '../..');
const WEB_SRC = path.join(ROOT, 'web');
const WEB_DIST = path.join(ROOT, 'dist', 'web');
const SCREENSHOTS = process.env.SERVICE_TEST_SCREENSHOT_DIR || null;

const skip = fs.existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed (apt-get install chromium); the browser test cannot run`;

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist') continue;
    const p = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(p) : fs.statSync(p).mtimeMs);
  }
  return newest;
}

/** The built console: dist/web when it is fresh, else a vite build of web/ into `tmp`. */
async function webDir(tmp: string): Promise<{ dir: string; built: boolean }> {
  const index = path.join(WEB_DIST, 'index.html');
  if (fs.existsSync(index) && fs.statSync(index).mtimeMs >= newestMtime(WEB_SRC)) return { dir: WEB_DIST, built: false };
  const { build } = await import('vite');
  const outDir = path.join(tmp, 'web');
  await build({ root: WEB_SRC, configFile: path.join(WEB_SRC, 'vite.config.ts'), logLevel: 'warn', build: { outDir, emptyOutDir: true } });
  return { dir: outDir, built: true };
}

test('web console: setup link, password, shell, log out, log in', { skip, timeout: 180_000 }, async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-e2e-'));
  const { dir, built } = await webDir(tmp);
  t.diagnostic(built ? `built the web console into ${dir}` : `serving ${dir}`);

  const database = await testDb();
  const config = testConfig({ SERVICE_WEB_DIR: dir });
  const { logger } = captureLogger();
  const services = createConsoleServices({ config, db: database.db, logger });
  const adminToken = newSecret('chk_');
  await services.users.ensureFirstAdmin(systemActor('test'), adminToken);
  const app = await buildConsoleApp({ config, db: database.db, logger, metrics: new Registry(), services });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  assert.ok(address && typeof address === 'object');
  const base = `http://127.0.0.1:${address.port}`;

  const context = await chromium.launchPersistentContext(path.join(tmp, 'profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1280, height: 800 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(15_000);
  // The page must run under the console's CSP (default-src 'self') without a script error or a refused load.
  const browserProblems: string[] = [];
  page.on('pageerror', (err) => browserProblems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && /Content Security Policy|Refused to/i.test(msg.text())) browserProblems.push(msg.text());
  });
  const shot = async (name: string) => {
    if (SCREENSHOTS) {
      fs.mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
    }
  };

  try {
    // The admin creates an account through the API; the answer carries the one-time setup link.
    const name = uniq('e2e');
    const res = await fetch(`${base}/api/v1/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, email: `${name}@example.test`, role: 'admin' }),
    });
    assert.equal(res.status, 201, await res.clone().text());
    const created = (await res.json()) as { setup_url: string };
    assert.ok(created.setup_url.startsWith(`${config.publicBaseUrl}/#setup?token=`), created.setup_url);
    // The link points at SERVICE_PUBLIC_BASE_URL; the browser opens the same hash on this server.
    const setupLink = `${base}/${new URL(created.setup_url).hash}`;

    const page0 = await page.goto(setupLink);
    assert.equal(page0?.status(), 200);
    assert.match(String(page0?.headers()['content-security-policy']), /default-src 'self'/);
    await page.getByRole('heading', { name: 'Set your password' }).waitFor();
    await shot('1-setup');
    const password = `pw-${newSecret('', 12)}`;
    await page.getByLabel('New password').fill(password);
    await page.getByLabel('Repeat password').fill(password);
    await page.getByRole('button', { name: 'Set password and log in' }).click();

    await expectShell(page, name, 'admin');
    assert.equal(new URL(page.url()).hash, '#/teams', 'the used setup token leaves the address bar');
    await page.getByRole('heading', { name: 'Teams' }).waitFor();
    await page.getByText('Loading…').waitFor({ state: 'detached' });
    await shot('2-shell-teams');

    // Users: the new account is listed as active (it has a password now).
    await page.getByRole('navigation', { name: 'sections' }).getByRole('link', { name: 'Users' }).click();
    await page.waitForURL(/#\/users$/);
    const userRow = page.getByRole('table', { name: 'users' }).getByRole('row').filter({ hasText: name });
    await userRow.waitFor();
    assert.match(await userRow.innerText(), /active/);

    // Create a user in the form: the setup link is shown once; then disable and enable it (If-Match writes).
    const other = uniq('e2e-viewer');
    const form = page.getByRole('form', { name: 'create a user' });
    await form.getByLabel('Name').fill(other);
    await form.getByRole('button', { name: 'Create user' }).click();
    const link = (await page.getByLabel(`Setup link for ${other}`).innerText()).trim();
    assert.ok(link.startsWith(`${config.publicBaseUrl}/#setup?token=`), link);
    await shot('3-users');
    await page.getByRole('button', { name: 'Done' }).click();
    const otherRow = page.getByRole('table', { name: 'users' }).getByRole('row').filter({ hasText: other });
    await otherRow.getByText('waiting for setup').waitFor();
    await otherRow.getByRole('button', { name: 'Disable' }).click();
    await otherRow.getByRole('button', { name: `Disable ${other}` }).click();
    await otherRow.getByText('disabled', { exact: true }).waitFor();
    const listed = await fetch(`${base}/api/v1/users?limit=200`, { headers: { authorization: `Bearer ${adminToken}` } });
    const found = ((await listed.json()) as { items: Array<{ name: string; disabled: boolean }> }).items.find((u) => u.name === other);
    assert.equal(found?.disabled, true);
    await otherRow.getByRole('button', { name: 'Enable' }).click();
    await otherRow.getByText('waiting for setup').waitFor();

    // Account: minting a token is an unsafe request of the session, so it proves the CSRF header is sent.
    await page.getByRole('navigation', { name: 'sections' }).getByRole('link', { name: 'Account' }).click();
    await page.getByLabel('Token name').fill('e2e script');
    await page.getByRole('button', { name: 'Create token' }).click();
    const tokenValue = (await page.getByLabel('Token e2e script').innerText()).trim();
    assert.match(tokenValue, /^chk_/);
    const me = await fetch(`${base}/api/v1/me`, { headers: { authorization: `Bearer ${tokenValue}` } });
    assert.equal(me.status, 200);
    assert.equal(((await me.json()) as { name: string }).name, name);
    await page.getByRole('table', { name: 'tokens' }).getByRole('row').filter({ hasText: 'e2e script' }).waitFor();
    await shot('4-account');

    // Log out: back to the log-in page, and the cookie no longer opens a session.
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByRole('heading', { name: 'Log in to Crewhouse' }).waitFor();
    assert.equal(await page.evaluate(() => fetch('/api/v1/session').then((r) => r.status)), 401);

    // A wrong password shows the problem's detail.
    await page.getByLabel('Name or email').fill(name);
    await page.getByLabel('Password').fill('not-the-password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('alert').filter({ hasText: 'name or password is wrong' }).waitFor();
    await shot('5-login-refused');

    // Log in again, by email this time.
    await page.getByLabel('Name or email').fill(`${name}@example.test`);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await expectShell(page, name, 'admin');
    await shot('6-shell-again');

    // The session survives a reload (HttpOnly cookie), and the setup link works only once.
    await page.reload();
    await expectShell(page, name, 'admin');
    await page.goto(setupLink);
    await page.getByLabel('New password').fill(password);
    await page.getByLabel('Repeat password').fill(password);
    await page.getByRole('button', { name: 'Set password and log in' }).click();
    await page.getByRole('alert').filter({ hasText: /unknown, used or expired/ }).waitFor();
    await shot('7-setup-used');

    assert.deepEqual(browserProblems, []);
  } catch (err) {
    const file = path.join(os.tmpdir(), `crewhouse-e2e-failure-${process.pid}.png`);
    await page.screenshot({ path: file, fullPage: true }).catch(() => {});
    t.diagnostic(`screenshot of the failure: ${file}`);
    throw err;
  } finally {
    await context.close();
    await app.close();
    await database.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

async function expectShell(page: Page, name: string, role: string) {
  const who = page.getByLabel('signed in as');
  await who.getByText(name, { exact: true }).waitFor();
  assert.equal((await who.locator('.role').innerText()).toLowerCase(), role);
  const links = await page.getByRole('navigation', { name: 'sections' }).getByRole('link').allInnerTexts();
  for (const section of ['Teams', 'Runs', 'Agents', 'Team templates', 'Egress destinations', 'Environments', 'Skills', 'Integrations', 'MCP servers', 'Secrets', 'Users', 'Spend', 'Account']) {
    assert.ok(links.includes(section), `navigation has ${section}: ${links.join(', ')}`);
  }
}
