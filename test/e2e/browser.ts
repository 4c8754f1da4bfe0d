/**
 * What the browser tests share: Debian's Chromium driven through playwright-core, the built web
 * console (dist/web when it is fresh, else a build into a temp dir), and screenshots kept under
 * SERVICE_TEST_SCREENSHOT_DIR.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_FLAGS = [
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
export const SCREENSHOTS = process.env.SERVICE_TEST_SCREENSHOT_DIR || null;

/** Why a browser test cannot run here, or false. */
export const browserSkip: string | false = fs.existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed (apt-get install chromium); the browser test cannot run`;

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
export async function webDir(tmp: string): Promise<{ dir: string; built: boolean }> {
  const index = path.join(WEB_DIST, 'index.html');
  if (fs.existsSync(index) && fs.statSync(index).mtimeMs >= newestMtime(WEB_SRC)) return { dir: WEB_DIST, built: false };
  const { build } = await import('vite');
  const outDir = path.join(tmp, 'web');
  await build({ root: WEB_SRC, configFile: path.join(WEB_SRC, 'vite.config.ts'), logLevel: 'warn', build: { outDir, emptyOutDir: true } });
  return { dir: outDir, built: true };
}

/** Collects what must not happen on a page under the console's CSP: a script error or a refused load. */
export function watchProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && /Content Security Policy|Refused to/i.test(msg.text())) problems.push(msg.text());
  });
  return problems;
}

/** Keeps a full-page screenshot when SERVICE_TEST_SCREENSHOT_DIR is set. */
export async function screenshot(page: Page, name: string) {
  if (!SCREENSHOTS) return;
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}
