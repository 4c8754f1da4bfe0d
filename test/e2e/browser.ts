/**
 * What the browser tests share: Debian's Chromium through playwright-core, the built web console
 * (dist/web when fresh, else a vite build into a temp dir), a signed-in page per role through the
 * setup link, and screenshots kept by SERVICE_TEST_SCREENSHOT_DIR.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { newSecret } from '../../src/auth/credentials.ts';
import { uniq } from '../harness.ts';

export const CHROMIUM = '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const ROOT = path.resolve(import.meta.dirname, '../..');
const WEB_SRC = path.join(ROOT, 'web');
const WEB_DIST = path.join(ROOT, 'dist', 'web');
export const SCREENSHOTS = process.env.SERVICE_TEST_SCREENSHOT_DIR || null;

export const skipWithoutChromium = fs.existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed (apt-get install chromium); the browser test cannot run`;

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
export async function webDir(tmp: string): Promise<string> {
  const index = path.join(WEB_DIST, 'index.html');
  if (fs.existsSync(index) && fs.statSync(index).mtimeMs >= newestMtime(WEB_SRC)) return WEB_DIST;
  const { build } = await import('vite');
  const outDir = path.join(tmp, 'web');
  await build({ root: WEB_SRC, configFile: path.join(WEB_SRC, 'vite.config.ts'), logLevel: 'warn', build: { outDir, emptyOutDir: true } });
  return outDir;
}

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Script errors and refused loads (the CSP) seen so far. */
  problems: string[];
  shot: (name: string) => Promise<void>;
}

export async function openBrowser(profileDir: string, width = 1280): Promise<Browser> {
  const context = await chromium.launchPersistentContext(profileDir, { executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width, height: 800 } });
  const page = context.pages()[0] ?? (await context.newPage());
  // Generous: CI runs two test files at once on two cores, and a page waits on the API under that load.
  page.setDefaultTimeout(60_000);
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && /Content Security Policy|Refused to/i.test(msg.text())) problems.push(msg.text());
  });
  const shot = async (name: string) => {
    if (!SCREENSHOTS) return;
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  };
  return { context, page, problems, shot };
}

/** Makes a user of `role` through the API and signs them in through their setup link. */
export async function signIn(page: Page, base: string, adminToken: string, publicBaseUrl: string, role: 'viewer' | 'operator' | 'admin'): Promise<string> {
  const name = uniq(`e2e-${role}`);
  const res = await fetch(`${base}/api/v1/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name, email: null, role }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  const { setup_url } = (await res.json()) as { setup_url: string };
  assert.ok(setup_url.startsWith(publicBaseUrl));
  await page.goto(`${base}/${new URL(setup_url).hash}`);
  const password = `pw-${newSecret('', 12)}`;
  await page.getByLabel('New password').fill(password);
  await page.getByLabel('Repeat password').fill(password);
  await page.getByRole('button', { name: 'Set password and log in' }).click();
  await page.getByLabel('signed in as').getByText(name, { exact: true }).waitFor();
  return name;
}

/** Opens a console page by its hash and waits until nothing on it says "Loading…". */
export async function open(page: Page, hash: string) {
  // The page's own script sets the hash: a navigation to the same document, no reload.
  await page.evaluate(`window.location.hash = ${JSON.stringify(hash)}`);
  await page.locator('#section-title').first().waitFor();
  await page.getByText('Loading…').first().waitFor({ state: 'detached' });
}
