// The program as people run it: `node src/main.ts <command>` in child processes, against a
// temporary SERVICE_DATA_DIR (or a fresh schema on the test PostgreSQL).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { servicePlace, TEST_DATABASE_URL, type ServicePlace } from './harness.ts';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const NODE = path.join(root, 'node_modules', '.bin', 'node');
const MAIN = path.join(root, 'src', 'main.ts');
const BASE = 'http://crewhouse.test';

/** The child's environment: only what we give it, nothing of ours (no SERVICE_* leaks in). */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
  return { ...env, ...extra };
}

/** Runs a CLI command to its end. */
function run(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(NODE, [MAIN, ...args], { env: childEnv(env), cwd: root });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

interface Server {
  child: ChildProcess;
  url: string;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `crewhouse serve` and waits until the console listens. */
function serve(env: Record<string, string>): Promise<Server> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE, [MAIN, 'serve', '--only', 'console'], { env: childEnv(env), cwd: root });
    let out = '';
    let err = '';
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`serve did not start:\n${out}\n${err}`));
    }, 60_000);
    child.stderr.on('data', (d) => (err += d));
    child.stdout.on('data', (d) => {
      out += d;
      const m = /"component":"console","address":"(http:\/\/[^"]+)","msg":"component started"/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({
          child,
          url: m[1],
          output: () => out,
          stop: async (signal = 'SIGTERM') => {
            child.kill(signal);
            return exited;
          },
        });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code} before starting:\n${out}\n${err}`));
    });
  });
}

async function get(url: string, token?: string) {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: res.status, body: (await res.json()) as any };
}

describe('the crewhouse CLI', { concurrency: false }, () => {
  let a: ServicePlace;
  let b: ServicePlace;
  before(async () => {
    a = await servicePlace('cli', BASE);
    b = await servicePlace('cli', BASE);
  });
  after(async () => {
    await a.drop();
    await b.drop();
  });

  test('help, and an unknown command exits 2 with the usage', async () => {
    const help = await run(['help'], {});
    assert.equal(help.code, 0);
    assert.match(help.stdout, /serve \[--only/);
    const serveHelp = await run(['serve', '--help'], {});
    assert.equal(serveHelp.code, 0, serveHelp.stderr);
    for (const component of ['console', 'modelproxy', 'chat', 'worker']) assert.match(serveHelp.stdout, new RegExp(`^  ${component} `, 'm'));
    const bad = await run(['frobnicate'], a.env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /unknown command "frobnicate"/);
  });

  test('the help names exactly the components `serve --only` knows', async () => {
    const help = await run(['help'], {});
    const listed = /serve \[--only ([a-z,]+)\]/.exec(help.stdout)?.[1].split(',');
    assert.ok(listed, help.stdout);
    const bogus = await run(['serve', '--only', 'no-such-component'], a.env);
    assert.equal(bogus.code, 2);
    const known = /known: ([a-z, ]+)/.exec(bogus.stderr)?.[1].split(', ');
    assert.deepEqual(listed, known);
  });

  test('`crewhouse chat init` twice without --subdomain says the default one is taken, and how to make another', async () => {
    const fresh = await servicePlace('cli', BASE);
    try {
      const first = await run(['chat', 'init', '--email', 'owner@example.com', '--name', 'Owner'], fresh.env);
      assert.equal(first.code, 0, first.stderr);
      const again = await run(['chat', 'init', '--email', 'owner2@example.com', '--name', 'Owner'], fresh.env);
      assert.equal(again.code, 2);
      assert.match(again.stderr, /already exists on the default subdomain 'chat'.*--subdomain/);
      const named = await run(['chat', 'init', '--email', 'owner2@example.com', '--name', 'Owner', '--subdomain', 'chat'], fresh.env);
      assert.equal(named.code, 2);
      assert.match(named.stderr, /Subdomain 'chat' is already in use/);
    } finally {
      await fresh.drop();
    }
  });

  test('`crewhouse migrate` brings an empty database up to date and creates no account', async () => {
    const res = await run(['migrate'], a.env);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /database is up to date/);
    const again = await run(['migrate'], a.env);
    assert.equal(again.code, 0, again.stderr);
    const token = await run(['admin', 'token', '--user', 'admin'], a.env);
    assert.equal(token.code, 2);
    assert.match(token.stderr, /no user named "admin"/);
  });

  test('`crewhouse jobs` lists jobs (none yet); a bad argument or an unknown job exits 2 saying why', async () => {
    const empty = await run(['jobs', '--state', 'failed'], a.env);
    assert.equal(empty.code, 0, empty.stderr);
    assert.equal(empty.stdout, '');
    const bad = await run(['jobs', '--state', 'stuck'], a.env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--state must be one of queued, running, done, failed/);
    const missing = await run(['jobs', 'retry', '12345'], a.env);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /no job 12345/);
  });

  test('this machine\'s commands: --help prints the usage; an unknown option exits 2 naming it, with the usage', async () => {
    const help = await run(['images', 'build', '--help'], a.env);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^crewhouse images build \[--name N\]/);
    for (const [args, usage] of [
      [['images', 'build', '--bogus'], /crewhouse images build \[--name N\]/],
      [['admin', 'token', '--bogus'], /crewhouse admin token --user NAME/],
      [['sandboxes', '--bogus'], /crewhouse sandboxes destroy --all/],
    ] as const) {
      const r = await run([...args], a.env);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /^crewhouse: Unknown option '--bogus'\n\n/);
      assert.match(r.stderr, usage);
      assert.doesNotMatch(r.stderr, /TypeError|ERR_PARSE_ARGS|\n\s+at /, 'no stack trace');
    }
  });

  test('`crewhouse sandboxes` lists none on a new deployment; destroy needs an id it knows, or --all', async () => {
    const none = await run(['sandboxes'], a.env);
    assert.equal(none.code, 0, none.stderr);
    assert.equal(none.stdout, 'No sandboxes.\n');
    const both = await run(['sandboxes', 'destroy'], a.env);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /crewhouse sandboxes destroy ID/);
    const unknown = await run(['sandboxes', 'destroy', 'sb_nope'], a.env);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no sandbox sb_nope \(crewhouse sandboxes lists them\)/);
  });

  test('first start without SERVICE_ADMIN_TOKEN: an admin account and a setup link printed once', async () => {
    const server = await serve(a.env);
    let code: number | null;
    try {
      const m = /Set the admin password at:\n\s+(\S+)/.exec(server.output());
      assert.ok(m, server.output());
      const link = new URL(m[1]);
      assert.equal(`${link.origin}${link.pathname}`, `${BASE}/`);
      const token = /^#setup\?token=(chu_[A-Za-z0-9_-]+)$/.exec(link.hash)?.[1];
      assert.ok(token, link.hash);
      assert.equal((await get(`${server.url}/api/v1/me`)).status, 401);
      assert.equal((await get(`${server.url}/healthz`)).status, 200);
      assert.equal((await get(`${server.url}/readyz`)).status, 200);

      if (!TEST_DATABASE_URL) {
        // A second process on the same embedded database stops at once, saying why.
        const second = await run(['migrate'], a.env, 20_000);
        assert.equal(second.code, 2);
        assert.match(second.stderr, /in use by process \d+/);
        assert.match(second.stderr, /SERVICE_DATABASE_URL/);
        assert.ok(second.ms < 15_000, `took ${second.ms} ms`);
      }

      // The link works: it sets the admin's password and signs in.
      const setup = await fetch(`${server.url}/api/v1/session/setup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token, password: 'first admin password' }),
      });
      assert.equal(setup.status, 201);
      assert.equal(((await setup.json()) as any).user.name, 'admin');
      // No token of any kind reached the log lines.
      for (const line of server.output().split('\n').filter((l) => l.startsWith('{'))) assert.doesNotMatch(line, /ch[ksu]_[A-Za-z0-9_-]{8}/);
    } finally {
      code = await server.stop('SIGTERM');
    }
    // A graceful stop: exit code 0, the embedded database's lock released.
    assert.equal(code, 0, server.output());
    assert.match(server.output(), /"msg":"shutting down"/);
    assert.equal(fs.existsSync(path.join(a.dataDir, 'crewhouse.lock')), false);
  });

  test('`crewhouse admin token` mints a working token; `crewhouse audit` shows the writes; a restart prints no link', async () => {
    const minted = await run(['admin', 'token', '--user', 'ADMIN', '--name', 'ci'], a.env);
    assert.equal(minted.code, 0, minted.stderr);
    const token = minted.stdout.trim();
    assert.match(token, /^chk_[A-Za-z0-9_-]{20,}$/);
    const nobody = await run(['admin', 'token', '--user', 'nobody'], a.env);
    assert.equal(nobody.code, 2);
    assert.match(nobody.stderr, /no user named "nobody"/);
    const usage = await run(['admin', 'token'], a.env);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /usage: crewhouse admin token --user NAME/);

    const audit = await run(['audit', '--limit', '10'], a.env);
    assert.equal(audit.code, 0, audit.stderr);
    const entries = audit.stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(entries[0].action, 'token.create');
    assert.equal(entries[0].actor, 'cli');
    assert.ok(entries.some((e) => e.action === 'user.create' && e.details.first_start === true));
    assert.ok(entries.some((e) => e.action === 'user.password_set'));
    assert.ok(!audit.stdout.includes(token));
    const filtered = await run(['audit', '--action', 'user.create'], a.env);
    assert.ok(filtered.stdout.trim().split('\n').every((l) => JSON.parse(l).action === 'user.create'));

    const server = await serve(a.env);
    try {
      assert.doesNotMatch(server.output(), /setup\?token=/);
      const me = await get(`${server.url}/api/v1/me`, token);
      assert.equal(me.status, 200);
      assert.equal(me.body.name, 'admin');
      assert.equal(me.body.via, 'token');
    } finally {
      assert.equal(await server.stop(), 0);
    }
  });

  test('first start with SERVICE_ADMIN_TOKEN: it becomes the admin token, and no link is printed', async () => {
    const adminToken = `chk_${crypto.randomBytes(24).toString('base64url')}`;
    const server = await serve({ ...b.env, SERVICE_ADMIN_TOKEN: adminToken });
    try {
      assert.doesNotMatch(server.output(), /setup\?token=/);
      assert.ok(!server.output().includes(adminToken));
      const me = await get(`${server.url}/api/v1/me`, adminToken);
      assert.equal(me.status, 200);
      assert.deepEqual([me.body.name, me.body.role], ['admin', 'admin']);
    } finally {
      assert.equal(await server.stop(), 0);
    }
  });

  test('a SERVICE_ADMIN_TOKEN that could never be sent as a bearer token is refused at start', async () => {
    const res = await run(['migrate'], { ...b.env, SERVICE_ADMIN_TOKEN: 'short' });
    assert.equal(res.code, 2);
    assert.match(res.stderr, /SERVICE_ADMIN_TOKEN must be 16 to 512 characters/);
    assert.ok(!res.stderr.includes('at '), 'a message, not a stack trace');
  });
});
