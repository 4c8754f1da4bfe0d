import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import type http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import type { KeyPair } from '../../src/gateway/certificates.ts';

/**
 * Answers one git smart-HTTP request by running Git's own `git http-backend` as a CGI program over
 * the bare repositories under `root` (shared by this server and the fake code host).
 */
export function gitHttpBackend(root: string, req: http.IncomingMessage, res: http.ServerResponse, remoteUser: string, body?: Buffer): void {
  const url = new URL(req.url ?? '/', 'https://x');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: '1',
    REMOTE_USER: remoteUser,
    REMOTE_ADDR: '127.0.0.1',
    REQUEST_METHOD: req.method,
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.slice(1),
    CONTENT_TYPE: req.headers['content-type'] ?? '',
    GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
    HTTP_CONTENT_ENCODING: String(req.headers['content-encoding'] ?? ''),
  };
  if (req.headers['content-length']) env.CONTENT_LENGTH = String(req.headers['content-length']);
  const cgi = spawn('git', ['http-backend'], { env });
  if (body) cgi.stdin.end(body);
  else req.pipe(cgi.stdin);
  cgi.stdin.on('error', () => {});
  let head = Buffer.alloc(0);
  let started = false;
  cgi.stdout.on('data', (chunk: Buffer) => {
    if (started) return void res.write(chunk);
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n') >= 0 ? head.indexOf('\r\n\r\n') + 4 : head.indexOf('\n\n') >= 0 ? head.indexOf('\n\n') + 2 : -1;
    if (end < 0) return;
    started = true;
    let status = 200;
    const headers: Record<string, string> = {};
    for (const line of head.subarray(0, end).toString('latin1').split(/\r?\n/).filter(Boolean)) {
      const i = line.indexOf(':');
      const name = line.slice(0, i).trim().toLowerCase();
      const value = line.slice(i + 1).trim();
      if (name === 'status') status = parseInt(value, 10);
      else headers[name] = value;
    }
    res.writeHead(status, headers);
    res.write(head.subarray(end));
  });
  cgi.on('close', () => {
    if (!started) res.writeHead(500).end('git http-backend failed\n');
    else res.end();
  });
}

/** A bare repository under `root` that accepts pushes over HTTP. */
export function makeBareRepo(root: string, name: string, branch = 'main'): string {
  const dir = path.join(root, name);
  execFileSync('git', ['init', '--bare', '-q', '-b', branch, dir]);
  execFileSync('git', ['-C', dir, 'config', 'http.receivepack', 'true']);
  return dir;
}

/** Every ref of a bare repository under `root`, by full name. */
export function refsOf(root: string, name: string): Record<string, string> {
  const out = execFileSync('git', ['-C', path.join(root, name), 'for-each-ref', '--format=%(refname) %(objectname)'], { encoding: 'utf8' });
  return Object.fromEntries(out.trim().split('\n').filter(Boolean).map((l) => l.split(' ') as [string, string]));
}

/**
 * A git server over HTTPS on 127.0.0.1: Git's own `git http-backend` run as a CGI program for
 * every request, serving bare repositories under a temporary folder, pushes enabled.
 */
export async function startGitServer(tlsPair: KeyPair): Promise<{
  port: number;
  root: string;
  /** Each request's method, path and Authorization header (what a credential-injecting proxy put there). */
  requests: Array<{ method: string; path: string; authorization: string | null }>;
  makeRepo(name: string): string;
  refs(name: string): Record<string, string>;
  /**
   * Holds the next fetch of objects (the upload-pack request that names the commits wanted,
   * after the refs were listed): the client has chosen its commit and waits. `arrived` settles
   * when it is held; `release` lets it through.
   */
  holdNextFetch(): { arrived: Promise<void>; release(): void };
  close(): Promise<void>;
}> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-git-'));
  const requests: Array<{ method: string; path: string; authorization: string | null }> = [];
  let hold: { arrived(): void; released: Promise<void> } | null = null;
  const server = https.createServer({ cert: tlsPair.certPem, key: tlsPair.keyPem }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://x');
    requests.push({ method: req.method ?? '', path: url.pathname + url.search, authorization: req.headers.authorization ?? null });
    if (!hold || req.method !== 'POST' || !url.pathname.endsWith('/git-upload-pack')) return gitHttpBackend(root, req, res, 'agent');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const text = (req.headers['content-encoding'] === 'gzip' ? zlib.gunzipSync(body) : body).toString('latin1');
      // Protocol v2 lists the refs in a request of its own (command=ls-refs); the one after it (or v0's only POST) wants objects.
      const current = hold;
      if (!current || text.includes('command=ls-refs')) return gitHttpBackend(root, req, res, 'agent', body);
      hold = null;
      current.arrived();
      void current.released.then(() => gitHttpBackend(root, req, res, 'agent', body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as AddressInfo).port,
    root,
    requests,
    makeRepo: (name) => makeBareRepo(root, name),
    refs: (name) => refsOf(root, name),
    holdNextFetch: () => {
      let arrived!: () => void;
      let release!: () => void;
      const held = new Promise<void>((resolve) => (arrived = resolve));
      hold = { arrived, released: new Promise<void>((resolve) => (release = resolve)) };
      return { arrived: held, release };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          fs.rmSync(root, { recursive: true, force: true });
          resolve();
        });
      }),
  };
}
