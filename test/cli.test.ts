// The commands of this machine, against a temporary SERVICE_DATA_DIR (or a fresh schema on the
// test PostgreSQL): in this process through the CLI's entry (runCli), and as people run the
// program (`node src/main.ts`) in two smoke tests: `crewhouse help`, and `crewhouse serve`.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { servicePlace, TEST_DATABASE_URL, type ServicePlace } from './harness.ts';
import { runCliIn } from './run-cli.ts';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const NODE = path.join(root, 'node_modules', '.bin', 'node');
const MAIN = path.join(root, 'src', 'main.ts');
const BASE = 'http://crewhouse.test';

/** The child's environment: only what we give it, nothing of ours (no SERVICE_* leaks in). */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
  return { ...env, ...extra };
}

/** Runs a CLI command in this process. */
const cli = (args: string[], env: Record<string, string>) => runCliIn(args, { env });

/** Runs a CLI command to its end in a child process. */
function run(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
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
      resolve({ code, stdout, stderr });
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

  test('`crewhouse help` as people run it: the usage of both halves, exit 0', async () => {
    const help = await run(['help'], {});
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^Through the API/m);
    assert.match(help.stdout, /^ {2}teams\s+teams: made from a template/m);
    assert.match(help.stdout, /^On this machine/m);
    assert.match(help.stdout, /serve \[--only/);
  });

  test('an unknown command exits 2 with the usage; `serve --help` names the components', async () => {
    const serveHelp = await cli(['serve', '--help'], {});
    assert.equal(serveHelp.code, 0, serveHelp.stderr);
    for (const component of ['console', 'modelproxy', 'chat', 'worker']) assert.match(serveHelp.stdout, new RegExp(`^  ${component} `, 'm'));
    const bad = await cli(['frobnicate'], a.env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /unknown command "frobnicate"/);
  });

  test('the help names exactly the components `serve --only` knows', async () => {
    const help = await cli(['help'], {});
    const listed = /serve \[--only ([a-z,]+)\]/.exec(help.stdout)?.[1].split(',');
    assert.ok(listed, help.stdout);
    const bogus = await cli(['serve', '--only', 'no-such-component', '--no-supervise'], a.env);
    assert.equal(bogus.code, 2);
    const known = /known: ([a-z, ]+)/.exec(bogus.stderr)?.[1].split(', ');
    assert.deepEqual(listed, known);
  });

  test('`crewhouse chat init` twice without --subdomain says the default one is taken, and how to make another', async () => {
    const fresh = await servicePlace('cli', BASE);
    try {
      const first = await cli(['chat', 'init', '--email', 'owner@example.com', '--name', 'Owner'], fresh.env);
      assert.equal(first.code, 0, first.stderr);
      const again = await cli(['chat', 'init', '--email', 'owner2@example.com', '--name', 'Owner'], fresh.env);
      assert.equal(again.code, 2);
      assert.match(again.stderr, /already exists on the default subdomain 'chat'.*--subdomain/);
      const named = await cli(['chat', 'init', '--email', 'owner2@example.com', '--name', 'Owner', '--subdomain', 'chat'], fresh.env);
      assert.equal(named.code, 2);
      assert.match(named.stderr, /Subdomain 'chat' is already in use/);
    } finally {
      await fresh.drop();
    }
  });

  test('`crewhouse migrate` brings an empty database up to date and creates no account', async () => {
    const res = await cli(['migrate'], a.env);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /database is up to date/);
    const again = await cli(['migrate'], a.env);
    assert.equal(again.code, 0, again.stderr);
    const token = await cli(['admin', 'token', '--user', 'admin'], a.env);
    assert.equal(token.code, 2);
    assert.match(token.stderr, /no user named "admin"/);
  });

  test('`crewhouse jobs` lists jobs (none yet); a bad argument or an unknown job exits 2 saying why', async () => {
    const empty = await cli(['jobs', '--state', 'failed'], a.env);
    assert.equal(empty.code, 0, empty.stderr);
    assert.equal(empty.stdout, '');
    const bad = await cli(['jobs', '--state', 'stuck'], a.env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--state must be one of queued, running, done, failed/);
    const missing = await cli(['jobs', 'retry', '12345'], a.env);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /no job 12345/);
    const noId = await cli(['jobs', 'retry'], a.env);
    assert.equal(noId.code, 2);
    assert.match(noId.stderr, /^crewhouse: missing ID\n\nusage: crewhouse jobs retry ID/);
    const list = await cli(['jobs', 'list'], a.env);
    assert.equal(list.code, 2);
    assert.match(list.stderr, /unknown command "crewhouse jobs list"/);
  });

  test('every command of this machine: --help prints its usage; an unknown option exits 2 naming it, with the usage', async () => {
    for (const [args, usage] of [
      [['serve'], /^crewhouse serve \[--only /],
      [['migrate'], /^crewhouse migrate\n/],
      [['admin', 'token'], /^crewhouse admin token --user NAME/],
      [['audit'], /^crewhouse audit \[--limit N\]/],
      [['secrets', 'rotate-key'], /^crewhouse secrets rotate-key\n/],
      // A group whose verb may be left out (jobs lists) prints the group's usage for --help: both forms.
      [['jobs'], /crewhouse jobs \[--state S\]/],
      [['jobs', 'retry'], /^crewhouse jobs retry ID/],
      [['images', 'build'], /^crewhouse images build \[--name N\]/],
      [['sandboxes', 'list'], /^crewhouse sandboxes list\n/],
      [['sandboxes', 'destroy'], /^crewhouse sandboxes destroy \[ID\] \| --all/],
      [['chat', 'init'], /^crewhouse chat init --email E --name N/],
      [['chat', 'demo'], /^crewhouse chat demo/],
    ] as const) {
      const help = await cli([...args, '--help'], a.env);
      assert.equal(help.code, 0, `${args.join(' ')} --help: ${help.stderr}`);
      assert.match(help.stdout, usage, `${args.join(' ')} --help`);
      assert.doesNotMatch(help.stdout, /--json/, 'a command of this machine prints no API JSON');
      const bogus = await cli([...args, '--bogus'], a.env);
      assert.equal(bogus.code, 2, `${args.join(' ')} --bogus: ${bogus.stderr}`);
      assert.match(bogus.stderr, /^crewhouse: Unknown option '--bogus'\n\nusage: /);
      assert.match(bogus.stderr.replace(/^[^]*?usage: /, ''), usage);
      assert.doesNotMatch(bogus.stderr, /TypeError|ERR_PARSE_ARGS|\n\s+at /, 'no stack trace');
    }
    // A group without its verb lists its commands; one asked with --help too.
    const group = await cli(['chat'], a.env);
    assert.equal(group.code, 0);
    assert.match(group.stdout, /crewhouse chat init .*\n\s+crewhouse chat demo/);
    // The API's commands are refused the same way: the problem, then "usage:" and the command's usage.
    const api = await cli(['agents', 'list', '--bogus'], a.env);
    assert.equal(api.code, 2);
    assert.match(api.stderr, /^crewhouse: Unknown option '--bogus'\n\nusage: crewhouse agents list/);
  });

  test('`crewhouse sandboxes` lists none on a new deployment; destroy needs an id it knows, or --all', async () => {
    const none = await cli(['sandboxes'], a.env);
    assert.equal(none.code, 0, none.stderr);
    assert.equal(none.stdout, 'No sandboxes.\n');
    const both = await cli(['sandboxes', 'destroy'], a.env);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /an ID or --all is needed\n\nusage: crewhouse sandboxes destroy/);
    const unknown = await cli(['sandboxes', 'destroy', 'sb_nope'], a.env);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no sandbox sb_nope \(crewhouse sandboxes lists them\)/);
  });

  test('`crewhouse serve` as people run it: a first start prints a setup link once; admin token and audit; a restart prints none; SERVICE_ADMIN_TOKEN becomes the admin token', async () => {
    const server = await serve(a.env);
    let code: number | null;
    let token: string | undefined;
    try {
      const m = /Set the admin password at:\n\s+(\S+)/.exec(server.output());
      assert.ok(m, server.output());
      const link = new URL(m[1]);
      assert.equal(`${link.origin}${link.pathname}`, `${BASE}/`);
      token = /^#setup\?token=(chu_[A-Za-z0-9_-]+)$/.exec(link.hash)?.[1];
      assert.ok(token, link.hash);
      assert.equal((await get(`${server.url}/api/v1/me`)).status, 401);
      assert.equal((await get(`${server.url}/healthz`)).status, 200);
      assert.equal((await get(`${server.url}/readyz`)).status, 200);

      if (!TEST_DATABASE_URL) {
        // A second process on the same embedded database stops at once, saying why.
        const second = await cli(['migrate'], a.env);
        assert.equal(second.code, 2);
        assert.match(second.stderr, /in use by process \d+/);
        assert.match(second.stderr, /SERVICE_DATABASE_URL/);
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

    // `crewhouse admin token` mints a working token; `crewhouse audit` shows the writes.
    const minted = await cli(['admin', 'token', '--user', 'ADMIN', '--name', 'ci'], a.env);
    assert.equal(minted.code, 0, minted.stderr);
    const apiToken = minted.stdout.trim();
    assert.match(apiToken, /^chk_[A-Za-z0-9_-]{20,}$/);
    const nobody = await cli(['admin', 'token', '--user', 'nobody'], a.env);
    assert.equal(nobody.code, 2);
    assert.match(nobody.stderr, /no user named "nobody"/);
    const usage = await cli(['admin', 'token'], a.env);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /usage: crewhouse admin token --user NAME/);

    const audit = await cli(['audit', '--limit', '10'], a.env);
    assert.equal(audit.code, 0, audit.stderr);
    const entries = audit.stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(entries[0].action, 'token.create');
    assert.equal(entries[0].actor, 'cli');
    assert.ok(entries.some((e) => e.action === 'user.create' && e.details.first_start === true));
    assert.ok(entries.some((e) => e.action === 'user.password_set'));
    assert.ok(!audit.stdout.includes(apiToken));
    const filtered = await cli(['audit', '--action', 'user.create'], a.env);
    assert.ok(filtered.stdout.trim().split('\n').every((l) => JSON.parse(l).action === 'user.create'));

    // A restart prints no link, and the minted token works.
    const again = await serve(a.env);
    try {
      assert.doesNotMatch(again.output(), /setup\?token=/);
      const me = await get(`${again.url}/api/v1/me`, apiToken);
      assert.equal(me.status, 200);
      assert.equal(me.body.name, 'admin');
      assert.equal(me.body.via, 'token');
    } finally {
      assert.equal(await again.stop(), 0);
    }

    // A first start with SERVICE_ADMIN_TOKEN: it becomes the admin token, and no link is printed.
    const adminToken = `chk_${crypto.randomBytes(24).toString('base64url')}`;
    const other = await serve({ ...b.env, SERVICE_ADMIN_TOKEN: adminToken });
    try {
      assert.doesNotMatch(other.output(), /setup\?token=/);
      assert.ok(!other.output().includes(adminToken));
      const me = await get(`${other.url}/api/v1/me`, adminToken);
      assert.equal(me.status, 200);
      assert.deepEqual([me.body.name, me.body.role], ['admin', 'admin']);
    } finally {
      assert.equal(await other.stop(), 0);
    }
  });

  test('a SERVICE_ADMIN_TOKEN that could never be sent as a bearer token is refused at start', async () => {
    const res = await cli(['migrate'], { ...b.env, SERVICE_ADMIN_TOKEN: 'short' });
    assert.equal(res.code, 2);
    assert.match(res.stderr, /SERVICE_ADMIN_TOKEN must be 16 to 512 characters/);
    assert.ok(!res.stderr.includes('at '), 'a message, not a stack trace');
  });
});
