import fs from 'node:fs/promises';
import path from 'node:path';
import type { App } from './kernel.ts';
import { noRouteProblem } from './problem-handler.ts';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.map': 'application/json',
};

/**
 * The console's Content-Security-Policy: only this origin's scripts, styles, images and
 * requests (inline styles and data: images are what the bundled UIs need), never framed.
 */
export const CONSOLE_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'";

const NOT_BUILT = `<!doctype html><meta charset="utf-8"><title>Crewhouse</title>
<p>The web console is not built. Run <code>npm run build:web</code> (or <code>npm start</code>, which builds it), then reload.</p>`;

/** Serves the built web console at `/`: files by path, anything else gets index.html (the app routes by hash). */
export function webRoutes(app: App, deps: { webDir: string }) {
  const root = path.resolve(deps.webDir);
  const serve = async (rel: string) => {
    const file = path.resolve(root, '.' + path.posix.normalize('/' + rel));
    if (!file.startsWith(root + path.sep) && file !== root) return null;
    try {
      const stat = await fs.stat(file);
      if (!stat.isFile()) return null;
      return { body: await fs.readFile(file), type: TYPES[path.extname(file)] ?? 'application/octet-stream', immutable: rel.startsWith('assets/') };
    } catch {
      return null;
    }
  };
  const handler = async (req: { params: unknown; method: string; url: string }, reply: any) => {
    // The router has already decoded the path once; decoding again would turn "%25" into a bad escape.
    const rel = (req.params as { '*': string })['*'] ?? '';
    // The API and webhooks answer problems for unknown routes, never the web console's page.
    if (/^(api|webhooks)(\/|$)/.test(rel)) throw noRouteProblem(app, req);
    const found = (rel && (await serve(rel))) || (await serve('index.html'));
    reply.header('x-content-type-options', 'nosniff');
    reply.header('content-security-policy', CONSOLE_CSP);
    if (!found) return reply.type('text/html; charset=utf-8').send(NOT_BUILT);
    reply.header('cache-control', found.immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    return reply.type(found.type).send(found.body);
  };
  app.get('/', { config: { auth: { public: true } }, schema: { hide: true } as any }, handler);
  app.get('/*', { config: { auth: { public: true } }, schema: { hide: true } as any }, handler);
}
