/**
 * The user-facing CLI (src/cli/) as a person or a script runs it, through its one entry (runCli)
 * in this process against a console listening on 127.0.0.1: every command group, `--json`
 * parsed. What needs a real terminal (script(1)'s pseudo-terminal) runs `node src/main.ts`. Runs need no sandbox: a live host row lets a task start, and the runs service
 * writes the posts a team would.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ApiClient } from '../src/cli/client.ts';
import { renderPost } from '../src/cli/commands/runs.ts';
import { makeTeam, makeTemplate } from './factories.ts';
import { testApp, uniq, waitFor, type TestApp } from './harness.ts';
import { runCliIn, startCli, type CliResult } from './run-cli.ts';
import { makeHostRow } from './sandboxes.ts';

const MAIN = path.resolve(import.meta.dirname, '../src/main.ts');

describe('crewhouse CLI through the API', () => {
  let t: TestApp;
  let base: string;
  let home: string;

  /** The environment of a CLI run: no stored login unless a test makes one, the admin's token by default. */
  const envOf = (extra: Record<string, string | undefined> = {}) => {
    const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: home, XDG_CONFIG_HOME: path.join(home, 'config') };
    const all = { CREWHOUSE_URL: base, CREWHOUSE_TOKEN: t.adminToken, ...extra };
    for (const [k, v] of Object.entries(all)) if (v !== undefined) env[k] = v;
    return env;
  };

  /** Runs the CLI in this process. */
  const cli = (args: string[], opts: { env?: Record<string, string | undefined>; input?: string } = {}): Promise<CliResult> => runCliIn(args, { env: envOf(opts.env), input: opts.input });

  /** Runs the CLI with --json, expects success, and parses what it printed. */
  const json = async (args: string[], opts: { env?: Record<string, string | undefined>; input?: string } = {}) => {
    const r = await cli([...args, '--json'], opts);
    assert.equal(r.code, 0, `crewhouse ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout);
  };

  /** Expects a refusal: a non-zero exit with the problem's detail on stderr. */
  const fails = async (args: string[], code: number, pattern: RegExp, opts: { env?: Record<string, string | undefined>; input?: string } = {}) => {
    const r = await cli(args, opts);
    assert.equal(r.code, code, `crewhouse ${args.join(' ')}: expected exit ${code}, got ${r.code}; stdout ${r.stdout}; stderr ${r.stderr}`);
    assert.match(r.stderr, pattern);
    return r;
  };

  before(async () => {
    t = await testApp({ modelProxy: true });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const address = t.app.server.address();
    assert.ok(address && typeof address === 'object');
    base = `http://127.0.0.1:${address.port}`;
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-cli-'));
  });
  after(async () => {
    await t.close();
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('help lists every command group, and each group and command has its own', async () => {
    const top = await cli(['help']);
    assert.equal(top.code, 0);
    for (const g of ['login', 'logout', 'task', 'runs', 'teams', 'templates', 'agents', 'environments', 'destinations', 'secrets', 'skills', 'integrations', 'users', 'spend', 'serve', 'migrate']) {
      assert.match(top.stdout, new RegExp(`^  ${g}\\b`, 'm'), `help lists ${g}`);
    }
    const teams = await cli(['teams', '--help']);
    assert.equal(teams.code, 0);
    for (const c of ['list', 'show', 'create', 'update', 'role', 'archive', 'links', 'link', 'unlink', 'egress-set']) assert.match(teams.stdout, new RegExp(`crewhouse teams ${c}\\b`));
    const create = await cli(['agents', 'create', '--help']);
    assert.equal(create.code, 0);
    assert.match(create.stdout, /--system-prompt/);
    assert.match(create.stdout, /--json/);
    await fails(['teams', 'frobnicate'], 2, /unknown command "crewhouse teams frobnicate"/);
    await fails(['agents', 'show'], 2, /missing NAME/);
    await fails(['agents', 'list', '--bogus'], 2, /Unknown option '--bogus'/);
  });

  it('login checks the token and stores it 0600; env wins; logout forgets; the token is never printed', async () => {
    const noEnv = { CREWHOUSE_URL: undefined, CREWHOUSE_TOKEN: undefined };
    await fails(['agents', 'list'], 2, /not logged in/, { env: noEnv });
    const bad = await fails(['login', '--url', base, '--token', 'chk_not_a_real_token_at_all'], 1, /the token is unknown, revoked or expired \(401\)/, { env: noEnv });
    assert.ok(!fs.existsSync(path.join(home, 'config', 'crewhouse', 'config.json')));
    assert.ok(!bad.stderr.includes('chk_not_a_real_token_at_all'));

    const viewer = await t.user('viewer');
    const ok = await cli(['login', '--url', `${base}/api/v1/`, '--token', viewer.token], { env: noEnv });
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, new RegExp(`as ${viewer.name} \\(viewer\\)`));
    assert.ok(!ok.stdout.includes(viewer.token) && !ok.stderr.includes(viewer.token));
    const file = path.join(home, 'config', 'crewhouse', 'config.json');
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.deepEqual(JSON.parse(fs.readFileSync(file, 'utf8')), { url: base, token: viewer.token });

    // The stored login serves later commands; CREWHOUSE_TOKEN overrides it.
    assert.equal((await json(['whoami'], { env: noEnv })).name, viewer.name);
    assert.equal((await json(['whoami'], { env: { CREWHOUSE_URL: undefined } })).role, 'admin');
    const who = await cli(['whoami'], { env: noEnv });
    assert.ok(!who.stdout.includes(viewer.token));
    // A viewer's write is refused with the API's detail.
    await fails(['environments', 'create', uniq('env'), '--provider', 'local'], 1, /needs the admin role; you are viewer \(403\)/, { env: noEnv });

    assert.equal((await cli(['logout'], { env: noEnv })).code, 0);
    assert.ok(!fs.existsSync(file));
    await fails(['whoami'], 2, /not logged in/, { env: noEnv });
    // Unreachable: a clear line, not a stack.
    const closed = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const port = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(port));
      });
    });
    await fails(['whoami'], 1, new RegExp(`cannot reach http://127\\.0\\.0\\.1:${closed}: ECONNREFUSED`), { env: { CREWHOUSE_URL: `http://127.0.0.1:${closed}` } });
  });

  it('environments: create, list, show, update with If-Match, field errors, delete', async () => {
    const name = uniq('env');
    const created = await json(['environments', 'create', name, '--provider', 'local', '--vcpus', '2', '--memory-mib', '1024', '--disk-gib', '5']);
    assert.equal(created.name, name);
    assert.equal(created.vcpus, 2);
    assert.ok((await json(['environments', 'list'])).some((e: any) => e.name === name));
    const human = await cli(['environments', 'list']);
    assert.match(human.stdout, /^NAME\s+PROVIDER\s+PROFILE/m);
    assert.match(human.stdout, new RegExp(`^${name}\\s+local\\s`, 'm'));
    const updated = await json(['environments', 'update', name, '--vcpus', '4']);
    assert.equal(updated.vcpus, 4);
    assert.equal(updated.memory_mib, 1024, 'fields not given are kept');
    assert.equal((await json(['environments', 'show', name])).vcpus, 4);
    // A schema refusal names the field.
    const bad = await fails(['environments', 'create', uniq('env'), '--provider', 'local', '--vcpus', '999'], 1, /\(400\)/);
    assert.match(bad.stderr, /^ {2}\/?vcpus: /m);
    await fails(['environments', 'create', uniq('env'), '--provider', 'local', '--vcpus', 'many'], 2, /--vcpus must be an integer, not "many"/);
    assert.deepEqual(await json(['environments', 'delete', name]), { deleted: name });
    await fails(['environments', 'show', name], 1, /\(404\)/);
    assert.ok(Array.isArray(await json(['environments', 'images'])));
    assert.ok(Array.isArray(await json(['environments', 'checkpoints'])));
  });

  it('agents: create from flags and from a YAML file, versions, make-current, update, delete', async () => {
    const name = uniq('agent');
    const created = await json(['agents', 'create', name, '--system-prompt', 'You write code.', '--description', 'writes code', '--note', 'first']);
    assert.equal(created.name, name);
    assert.equal(created.current_version, 1);
    const second = await json(['agents', 'add-version', name, '--system-prompt', 'You write tests.', '--note', 'tests']);
    assert.equal(second.version, 2);
    assert.equal(second.system_prompt, 'You write tests.');
    const versions = await json(['agents', 'versions', name]);
    assert.deepEqual(versions.map((v: any) => v.version), [2, 1]);
    assert.equal((await json(['agents', 'version', name, '1'])).system_prompt, 'You write code.');
    const back = await json(['agents', 'make-current', name, '1']);
    assert.equal(back.version, 3);
    assert.equal(back.system_prompt, 'You write code.');
    assert.equal((await json(['agents', 'show', name])).current_version, 3);
    const patched = await json(['agents', 'update', name, '--display-name', 'Coder']);
    assert.equal(patched.display_name, 'Coder');
    const shown = await cli(['agents', 'show', name]);
    assert.match(shown.stdout, /^display_name: +Coder$/m);

    const file = path.join(home, 'agent.yaml');
    const fromFile = uniq('agent');
    fs.writeFileSync(file, `name: ignored\ndescription: from a file\nversion:\n  system_prompt: |\n    You review.\n  note: yaml\n`);
    const yamlAgent = await json(['agents', 'create', fromFile, '--file', file]);
    assert.equal(yamlAgent.name, fromFile);
    assert.equal(yamlAgent.description, 'from a file');
    assert.equal(yamlAgent.current.system_prompt, 'You review.\n');
    fs.writeFileSync(file, '{not: [valid');
    await fails(['agents', 'create', uniq('agent'), '--file', file], 2, /is neither JSON nor YAML/);
    await fails(['agents', 'create', uniq('agent'), '--file', path.join(home, 'missing.yaml')], 2, /cannot read .*missing\.yaml: ENOENT/);

    assert.ok((await json(['agents', 'list'])).some((a: any) => a.name === name));
    await json(['agents', 'delete', fromFile]);
    await fails(['agents', 'show', fromFile], 1, /\(404\)/);
  });

  it('destinations, secrets (value from stdin, never printed) and skills', async () => {
    const dest = uniq('dest');
    const created = await json(['destinations', 'create', dest, '--host', 'api.example.com', '--methods', 'GET,POST', '--paths', '/v1/*', '--what', 'the example API']);
    assert.deepEqual(created.methods, ['GET', 'POST']);
    const changed = await json(['destinations', 'update', dest, '--what', 'still the example API']);
    assert.equal(changed.what, 'still the example API');
    assert.deepEqual(changed.paths, ['/v1/*'], 'fields not given are kept');
    assert.match((await cli(['destinations', 'list'])).stdout, new RegExp(`^${dest}\\s+api\\.example\\.com\\s+GET, POST`, 'm'));
    await json(['destinations', 'delete', dest]);

    const secret = `platform/${uniq('key')}`;
    const value = `sk-${uniq('value')}`;
    const set = await cli(['secrets', 'set', secret], { input: `${value}\n` });
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, new RegExp(`^set secret ${secret}`));
    assert.ok(!set.stdout.includes(value) && !set.stderr.includes(value));
    const listed = (await json(['secrets', 'list', '--prefix', 'platform/'])).find((x: any) => x.name === secret);
    assert.equal(listed.set, true);
    const valueFile = path.join(home, 'value.txt');
    fs.writeFileSync(valueFile, `${value}-2`);
    const replaced = await cli(['secrets', 'set', secret, '--from-file', valueFile]);
    assert.equal(replaced.code, 0, replaced.stderr);
    assert.match(replaced.stdout, /^replaced secret/);
    const shown = await cli(['secrets', 'show', secret, '--json']);
    assert.ok(!shown.stdout.includes(value));
    assert.equal(JSON.parse(shown.stdout).name, secret);
    await fails(['secrets', 'set', uniq('empty')], 2, /the value is empty/);
    await json(['secrets', 'delete', secret]);
    await fails(['secrets', 'show', secret], 1, /\(404\)/);

    const skill = uniq('skill');
    const md = path.join(home, 'SKILL.md');
    fs.writeFileSync(md, `---\nname: ${skill}\ndescription: Says hello.\n---\n\nSay hello.\n`);
    const helper = path.join(home, 'hello.sh');
    fs.writeFileSync(helper, 'echo hello\n');
    const made = await json(['skills', 'set', skill, '--body', md, '--resource', `scripts/hello.sh=${helper}`]);
    assert.equal(made.name, skill);
    assert.deepEqual(made.resources, { 'scripts/hello.sh': 'echo hello\n' });
    fs.writeFileSync(md, `---\nname: ${skill}\ndescription: Says hello twice.\n---\n\nSay hello twice.\n`);
    const again = await cli(['skills', 'set', skill, '--body', md]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /^replaced skill/);
    assert.equal((await json(['skills', 'show', skill])).description, 'Says hello twice.');
    assert.ok((await json(['skills', 'list'])).some((x: any) => x.name === skill));
    await json(['skills', 'delete', skill]);
  });

  it('users: create with the setup link, update, disable, a fresh setup token; lists are followed past a page', async () => {
    const name = uniq('person');
    const created = await json(['users', 'create', name, '--role', 'operator', '--email', `${name}@example.test`]);
    assert.match(created.setup_url, /#setup\?token=/);
    const human = await cli(['users', 'setup-token', String(created.id)]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^new setup link for .*\n.*\n {2}http:\/\/crewhouse\.test\/#setup\?token=/m);
    assert.equal((await json(['users', 'update', String(created.id), '--role', 'viewer'])).role, 'viewer');
    assert.equal((await json(['users', 'update', String(created.id), '--disable'])).disabled, true);
    assert.equal((await json(['users', 'show', String(created.id)])).disabled, true);
    await fails(['users', 'update', String(created.id)], 2, /nothing to change/);
    // More users than one page of 200: the CLI follows next_cursor.
    const names = new Set<string>();
    for (let i = 0; i < 200; i++) names.add((await t.user('viewer')).name);
    const all = await json(['users', 'list']);
    assert.ok(all.length > 200, `${all.length} users listed`);
    for (const n of names) assert.ok(all.some((u: any) => u.name === n), `${n} listed`);
    assert.equal(new Set(all.map((u: any) => u.id)).size, all.length, 'no user twice');
    assert.equal((await json(['users', 'list', '--limit', '3'])).length, 3);
  });

  it('integrations: list, show, set (a missing piece named), test and deliveries', async () => {
    const direct = await t.request({ method: 'GET', url: '/api/v1/integrations', token: t.adminToken });
    assert.equal(direct.status, 200, direct.text);
    assert.deepEqual(await json(['integrations', 'list']), direct.body);
    const shown = await json(['integrations', 'show', 'code_host']);
    assert.equal(shown.kind, 'code_host');
    assert.ok(shown.secrets.every((x: { status: string }) => x.status !== 'set'), 'no secret value is shown, and none is set');
    // Enabling without the app's key is refused, naming what is missing; settings alone are kept.
    await fails(['integrations', 'set', 'code_host', '--enable', '--setting', 'app_id=123456', '--setting', 'installation_id=7890'], 1, /secrets\.app_key/);
    const set = await json(['integrations', 'set', 'code_host', '--setting', 'app_id=123456', '--setting', 'installation_id=7890']);
    assert.deepEqual([set.enabled, set.settings.app_id, set.settings.installation_id], [false, '123456', '7890']);
    // chat_b without its tokens: the test answers error, which is not ok.
    const tested = await cli(['integrations', 'test', 'chat_b']);
    assert.equal(tested.code, 1);
    assert.match(tested.stdout, /^chat_b: error - chat_b is not configured: the secret integrations\/chat_b\/bot_token has no value/);
    assert.deepEqual(await json(['integrations', 'deliveries', 'code_host']), { items: [], next_cursor: null });
  });

  /** A template written as YAML with the CLI, over an agent and a `local` environment made with it. */
  async function cliTemplate(): Promise<{ name: string; body: (budget: number) => string }> {
    const env = uniq('env');
    await json(['environments', 'create', env, '--provider', 'local']);
    const lead = uniq('lead');
    const dev = uniq('dev');
    await json(['agents', 'create', lead, '--system-prompt', 'You lead.']);
    await json(['agents', 'create', dev, '--system-prompt', 'You code.']);
    const name = uniq('tpl');
    const body = (budget: number) =>
      ['lead: lead', 'roles:', `  lead: {agent: ${lead}, model: fast, vm: ${env}}`, `  dev: {agent: ${dev}, model: fast, vm: ${env}}`, 'pipeline: {lead: dev}', 'sleep: {}', 'idle_after_seconds: 600', 'deep_sleep_after_seconds: 3600', `budget_usd_per_day: ${budget}`, ''].join('\n');
    const file = path.join(home, `${name}.yaml`);
    fs.writeFileSync(file, `name: ${name}\ndescription: two roles\n${body(10)}`);
    const created = await json(['templates', 'create', '--file', file]);
    assert.equal(created.name, name);
    return { name, body };
  }

  it('templates: create from YAML, show the pipeline, versions, update, delete', async () => {
    const { name, body } = await cliTemplate();
    const shown = await cli(['templates', 'show', name]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /^pipeline: +lead -> dev$/m);
    assert.match(shown.stdout, /^ROLE\s+AGENT\s+MODEL/m);
    const file = path.join(home, `${name}-v2.yaml`);
    fs.writeFileSync(file, body(20));
    const v2 = await json(['templates', 'add-version', name, '--file', file, '--note', 'more budget']);
    assert.equal(v2.version, 2);
    assert.deepEqual((await json(['templates', 'versions', name])).map((v: any) => v.version), [2, 1]);
    assert.equal((await json(['templates', 'version', name, '1'])).budget_usd_per_day, 10);
    assert.equal((await json(['templates', 'update', name, '--description', 'two roles, more budget'])).description, 'two roles, more budget');
    assert.ok((await json(['templates', 'list'])).some((x: any) => x.name === name));
    await fails(['templates', 'create'], 2, /a template is created from --file/);
    await json(['templates', 'delete', name]);
    await fails(['templates', 'show', name], 1, /\(404\)/);
  });

  it('teams: create with progress, role settings, links, egress override, budget and spend, archive', async () => {
    const template = (await cliTemplate()).name;
    const name = uniq('team');
    const created = await cli(['teams', 'create', name, '--template', template]);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stderr, new RegExp(`creating team ${name} from template ${template}`));
    assert.match(created.stderr, new RegExp(`team ${name} is active`));
    assert.match(created.stdout, /^status: +active$/m);
    const quiet = await cli(['teams', 'show', name, '--json']);
    assert.equal(JSON.parse(quiet.stdout).status, 'active');
    assert.equal(quiet.stderr, '');
    await fails(['teams', 'create', name, '--template', template], 1, /already exists \(409\)/);

    assert.equal((await json(['teams', 'update', name, '--budget-usd-per-day', '7.5'])).budget_usd_per_day, 7.5);
    const role = await json(['teams', 'role', name, 'dev', '--max-iterations', '12', '--concurrent-runs', '2']);
    const dev = role.role_settings.find((r: any) => r.role === 'dev');
    assert.equal(dev.max_iterations, 12);
    assert.equal(dev.concurrent_runs, 2);
    await fails(['teams', 'role', name, 'nobody', '--max-iterations', '3'], 1, /role_settings\.nobody: team ".*" has no role "nobody"/);

    const link = await json(['teams', 'link', name, 'tracker_a', 'ACME/web', '--label', 'web board']);
    assert.equal(link.external_id, 'ACME/web');
    assert.deepEqual((await json(['teams', 'links', name])).map((l: any) => l.external_id), ['ACME/web']);
    await json(['teams', 'unlink', name, 'tracker_a', 'ACME/web']);
    assert.deepEqual(await json(['teams', 'links', name]), []);

    const egress = await json(['teams', 'egress-set', name, 'dev', '--mode', 'allowlist', '--destinations', '']);
    assert.equal(egress.override.mode, 'allowlist');
    assert.equal((await json(['teams', 'egress', name, 'dev'])).override.mode, 'allowlist');
    await json(['teams', 'egress-reset', name, 'dev']);
    assert.equal((await json(['teams', 'egress', name, 'dev'])).override, null);

    const budget = await json(['teams', 'budget', name, '--days', '3']);
    assert.equal(budget.team, name);
    assert.equal(budget.series.length, 3);
    const spend = await json(['spend', '--days', '2']);
    assert.ok(spend.teams.some((x: any) => x.team === name));
    assert.equal((await json(['spend', name])).team, name);
    assert.match((await cli(['spend'])).stdout, /^TEAM\s+SPEND USD\s+TOKENS/m);
    assert.deepEqual(await json(['teams', 'skills', name]), []);
    assert.deepEqual(await json(['teams', 'runs', name]), []);
    assert.ok((await json(['teams', 'list', '--q', name])).some((x: any) => x.name === name));

    await json(['teams', 'archive', name]);
    assert.equal((await json(['teams', 'show', name])).status, 'archived');
  });

  /**
   * A TCP relay in front of the console that can drop every connection at once (a network
   * blip), and keeps what clients sent so a test can see their request headers.
   */
  async function relay() {
    const port = (t.app.server.address() as net.AddressInfo).port;
    const sockets = new Set<net.Socket>();
    const sent: string[] = [];
    const server = net.createServer((client) => {
      const upstream = net.connect(port, '127.0.0.1');
      sockets.add(client).add(upstream);
      client.on('data', (d) => sent.push(d.toString('latin1')));
      client.pipe(upstream).pipe(client);
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return {
      url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
      sent,
      dropAll: () => {
        for (const s of sockets) s.destroy();
        sockets.clear();
      },
      // Connections kept alive for the next request (the console's keep-alive is 72 s) end now.
      close: () => {
        for (const s of sockets) s.destroy();
        return new Promise<void>((r) => server.close(() => r()));
      },
    };
  }

  /** A CLI command whose output is read as it comes. */
  function start(args: string[], env: Record<string, string | undefined> = {}) {
    const run = startCli(args, { env: envOf(env) });
    return { p: run.out, exited: run.exited, kill: run.stop };
  }

  /** A team ready for tasks: a live (row-only) sandbox host runs its `local` environment. */
  async function teamForTasks(): Promise<string> {
    await makeHostRow(t.db);
    const template = (await cliTemplate()).name;
    const name = uniq('team');
    await json(['teams', 'create', name, '--template', template]);
    return name;
  }

  /** Ends the run's current turn of its lead as the engine would, with this outcome. */
  async function leadTurn(runId: string, outcome: Parameters<TestApp['services']['runJournal']['applyOutcome']>[1]) {
    const work = await t.services.runJournal.nextWork(runId);
    assert.ok(work, `run ${runId} has work`);
    await t.services.runJournal.beginTurn(work.task.id, 0, null);
    await t.services.runJournal.applyOutcome(work.task.id, outcome);
  }

  it('task gives a run; a question is listed, answered with runs reply, and the run cancelled', async () => {
    const team = await teamForTasks();
    await fails(['task', team, ''], 2, /the text is empty/);
    const given = await cli(['task', team, 'Write a README']);
    assert.equal(given.code, 0, given.stderr);
    const runId = given.stdout.trim();
    assert.match(runId, /^[A-Za-z0-9_-]+$/);
    assert.equal((await json(['runs', 'show', runId])).text, 'Write a README');
    await fails(['runs', 'reply', runId, 'blue'], 2, /has no open question/);

    await leadTurn(runId, { kind: 'question', question: 'Which licence?', options: [] });
    const waiting = await json(['runs', 'list', '--state', 'waiting', '--team', team]);
    assert.deepEqual(waiting.map((r: any) => r.id), [runId]);
    const shown = await cli(['runs', 'show', runId]);
    assert.match(shown.stdout, /open question \(#\d+, lead\): Which licence\?/);
    const reply = await json(['runs', 'reply', runId, 'MIT']);
    assert.equal(reply.state, 'running');
    const posts = await json(['runs', 'posts', runId]);
    assert.deepEqual(posts.map((p: any) => p.kind), ['task', 'question', 'answer']);
    assert.equal(posts[2].text, 'MIT');
    assert.equal((await json(['runs', 'posts', runId, '--after', String(posts[1].seq)])).length, 1);
    assert.equal((await json(['teams', 'runs', team]))[0].id, runId);
    assert.equal((await json(['runs', 'cancel', runId])).state, 'cancelled');
    await fails(['runs', 'reply', runId, 'more', '--follow-up'], 1, /\(409\)/);
    await fails(['runs', 'show', 'run_nope'], 1, /\(404\)/);
    assert.deepEqual((await json(['runs', 'trace', runId])).spans, []);
  });

  it('runs watch follows posts live, resumes after a dropped connection without repeats, and exits 0 when the run succeeds', async () => {
    const team = await teamForTasks();
    const runId = (await json(['task', team, 'Write a changelog'])).run_id;
    const r = await relay();
    const watch = start(['runs', 'watch', runId, '--json'], { CREWHOUSE_URL: r.url });
    try {
      const seqs = () => watch.p.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l).seq as number);
      await waitFor('the task post', () => seqs().length === 1, 60_000);
      await t.services.runJournal.notice(runId, 'booting the sandbox', 'test:1');
      await waitFor('the first notice', () => seqs().length === 2, 60_000);

      // The connection drops; posts written meanwhile come after the resume, once each.
      const before = r.sent.length;
      r.dropAll();
      await t.services.runJournal.notice(runId, 'still booting', 'test:2');
      await t.services.runJournal.notice(runId, 'ready', 'test:3');
      await waitFor('the posts written while disconnected', () => seqs().length === 4, 60_000);
      const resumed = r.sent.slice(before).join('');
      assert.match(resumed, new RegExp(`GET /api/v1/runs/${runId}/posts`));
      assert.match(resumed, /last-event-id: 2\r\n/i);

      await leadTurn(runId, { kind: 'finished', outcome: 'succeeded', summary: 'Wrote it.', branch: null, pull_request_url: null });
      assert.equal(await watch.exited, 0, watch.p.stderr);
      const all = (await json(['runs', 'posts', runId])).map((p: any) => p.seq);
      assert.deepEqual(seqs(), all, 'every post printed once, in order');
      assert.equal((await json(['runs', 'show', runId])).state, 'succeeded');
    } finally {
      watch.kill();
      await r.close();
    }
  });

  it('task --watch prints the run id, the posts, and exits non-zero when the run fails', async () => {
    const team = await teamForTasks();
    const watch = start(['task', team, 'Break something', '--watch']);
    try {
      await waitFor('the run id and the task post', () => /\[task\] Break something/.test(watch.p.stdout), 60_000);
      const runId = watch.p.stdout.split('\n')[0].trim();
      await t.services.runJournal.failRun(runId, 'the sandbox would not start');
      assert.equal(await watch.exited, 1);
      assert.match(watch.p.stdout, /\[failed\] the sandbox would not start/);
      assert.match(watch.p.stderr, new RegExp(`run ${runId} failed: the sandbox would not start`));
    } finally {
      watch.kill();
    }
  });

  it('runs watch without a terminal says how to answer a question, once, and goes on watching', async () => {
    const team = await teamForTasks();
    const runId = (await json(['task', team, 'Write a notice file'])).run_id;
    const watch = start(['runs', 'watch', runId]);
    try {
      await waitFor('the task post', () => watch.p.stdout.includes('[task] Write a notice file'), 60_000);
      await leadTurn(runId, { kind: 'question', question: 'Which year?', options: [] });
      await waitFor('the question', () => watch.p.stdout.includes('[question] Which year?'), 60_000);
      const question = (await t.services.runs.posts(runId, 0, 50)).items.find((p: any) => p.kind === 'question')!;
      const hint = `no terminal to answer on; answer with: crewhouse runs reply ${runId} "..." --to ${question.seq}\n`;
      await waitFor('the hint', () => watch.p.stderr.includes(hint), 60_000);
      // The hint's command answers it, and the watch prints the answer.
      const replied = await cli(['runs', 'reply', runId, '2026', '--to', String(question.seq)]);
      assert.equal(replied.code, 0, replied.stderr);
      await waitFor('the answer printed', () => watch.p.stdout.includes('[answer] 2026'), 60_000);
      await leadTurn(runId, { kind: 'finished', outcome: 'succeeded', summary: 'Wrote NOTICE.', branch: null, pull_request_url: null });
      assert.equal(await watch.exited, 0, watch.p.stderr);
      assert.equal(watch.p.stderr.split(hint).length, 2, 'the hint once');
    } finally {
      watch.kill();
    }
  });

  it('runs watch on a terminal asks for the answer when a question opens, and sends it as the reply', { skip: fs.existsSync('/usr/bin/script') ? false : 'script(1) from util-linux gives the CLI a terminal; it is not installed' }, async () => {
    const team = await teamForTasks();
    const runId = (await json(['task', team, 'Write a licence file'])).run_id;
    // script(1) runs the CLI on a pseudo-terminal and passes what the test writes as typing.
    const child = spawn('/usr/bin/script', ['-qefc', `${process.execPath} ${MAIN} runs watch ${runId}`, '/dev/null'], { env: envOf(), stdio: ['pipe', 'pipe', 'pipe'] });
    let screen = '';
    child.stdout.on('data', (d) => (screen += d));
    child.stderr.on('data', (d) => (screen += d));
    const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? -1)));
    try {
      await waitFor('the task post', () => screen.includes('[task] Write a licence file'), 60_000);
      await leadTurn(runId, { kind: 'question', question: 'Which licence?', options: ['MIT', 'Apache-2.0'] });
      await waitFor('the prompt', () => /answer #\d+ \(empty: skip\)> /.test(screen), 60_000);
      child.stdin.write('Apache-2.0\r');
      await waitFor('the answer recorded', async () => (await t.services.runs.posts(runId, 0, 50)).items.some((p: any) => p.kind === 'answer' && p.text === 'Apache-2.0'), 60_000);
      const question = (await t.services.runs.posts(runId, 0, 50)).items.find((p: any) => p.kind === 'question')!;
      const answer = (await t.services.runs.posts(runId, 0, 50)).items.find((p: any) => p.kind === 'answer')!;
      assert.equal((answer.data as { in_reply_to?: number }).in_reply_to, question.seq, 'the answer replies to the question');
      await waitFor('the answer printed', () => screen.includes('[answer] Apache-2.0'), 60_000);
      await leadTurn(runId, { kind: 'finished', outcome: 'succeeded', summary: 'Added LICENSE.', branch: null, pull_request_url: null });
      assert.equal(await exited, 0, screen);
    } finally {
      child.kill();
    }
  });

  it('context documents of an agent: set from a file, print, replace with If-Match, list, delete', async () => {
    const agent = uniq('agent');
    await json(['agents', 'create', agent, '--system-prompt', 'You write docs.']);
    const file = path.join(home, 'style.md');
    fs.writeFileSync(file, '# Style\n\nShort sentences.\n');
    const made = await json(['agents', 'doc-set', agent, 'style.md', '--from-file', file, '--description', 'house style']);
    assert.equal(made.media_type, 'text/markdown');
    assert.equal((await cli(['agents', 'doc', agent, 'style.md'])).stdout, '# Style\n\nShort sentences.\n');
    const again = await cli(['agents', 'doc-set', agent, 'style.md', '--from-file', '-'], { input: '# Style\n\nShorter.\n' });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /^replaced document style\.md/);
    assert.equal((await json(['agents', 'doc', agent, 'style.md'])).content, '# Style\n\nShorter.\n');
    assert.deepEqual((await json(['agents', 'docs', agent])).map((d: any) => d.name), ['style.md']);
    await json(['agents', 'doc-delete', agent, 'style.md']);
    assert.deepEqual(await json(['agents', 'docs', agent]), []);
  });

  it('mcp-servers: a team server created, shown, listed and deleted', async () => {
    const team = uniq('team');
    await json(['teams', 'create', team, '--template', (await cliTemplate()).name]);
    const dest = uniq('dest');
    await json(['destinations', 'create', dest, '--host', 'mcp.example.com']);
    const made = await json(['mcp-servers', 'create', 'issues', '--team', team, '--url', 'https://mcp.example.com/issues', '--destination', dest, '--roles', 'dev']);
    assert.equal(made.id, `${team}/issues`);
    assert.deepEqual(made.roles, ['dev']);
    assert.equal((await json(['mcp-servers', 'show', `${team}/issues`])).url, 'https://mcp.example.com/issues');
    assert.ok((await json(['mcp-servers', 'list'])).some((m: any) => m.id === `${team}/issues`));
    await fails(['mcp-servers', 'create', 'bad', '--team', team, '--url', 'ftp://x', '--destination', dest], 1, /\(400\)\n {2}\/?url: /);
    await json(['mcp-servers', 'delete', `${team}/issues`]);
    await fails(['mcp-servers', 'show', `${team}/issues`], 1, /\(404\)/);
  });

  it('secrets set on a terminal reads the value unseen', { skip: fs.existsSync('/usr/bin/script') ? false : 'script(1) from util-linux is not installed' }, async () => {
    const name = `platform/${uniq('typed')}`;
    const value = `typed-${uniq('value')}`;
    const child = spawn('/usr/bin/script', ['-qefc', `${process.execPath} ${MAIN} secrets set ${name}`, '/dev/null'], { env: envOf(), stdio: ['pipe', 'pipe', 'pipe'] });
    let screen = '';
    child.stdout.on('data', (d) => (screen += d));
    child.stderr.on('data', (d) => (screen += d));
    const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? -1)));
    try {
      await waitFor('the prompt', () => screen.includes(`value of ${name} (not shown): `), 60_000);
      child.stdin.write(`${value}\r`);
      assert.equal(await exited, 0, screen);
      assert.match(screen, new RegExp(`set secret ${name}`));
      assert.ok(!screen.includes(value), 'the value is not echoed');
      assert.equal(await t.services.secrets.reveal(name), value);
    } finally {
      child.kill();
    }
  });

  it('hosts: each host\'s room and use, and the runs waiting for room', async () => {
    const id = await makeHostRow(t.db, { vcpus: 3, memoryMib: 3072, diskGib: 30 });
    const out = await cli(['hosts']);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /^HOST\s+STATUS\s+PROVIDERS\s+VCPUS USED\/SHARED\s+MEMORY MIB USED\/TOTAL\s+DISK GIB USED\/TOTAL\s+AWAKE\s+ASLEEP\s+ID$/m);
    assert.match(out.stdout, new RegExp(`^${id}\\.test\\s+live\\s+local\\s+0/12\\s+0/3072\\s+0/30\\s+0\\s+0\\s+${id}$`, 'm'));
    assert.match(out.stdout, /No run waits for room\./);
    const hosts = await json(['hosts']);
    assert.equal(hosts.hosts.find((h: any) => h.id === id).capacity.vcpus_shared, 12);
    const viewer = await t.user('viewer');
    await fails(['hosts'], 1, /403/, { env: { CREWHOUSE_TOKEN: viewer.token } });
  });

  it('login through a setup link: the password is chosen, a token minted and stored; with no token and no terminal it says what to do', async () => {
    const noEnv = { CREWHOUSE_URL: undefined, CREWHOUSE_TOKEN: undefined };
    await fails(['login', '--url', base, '--token', ''], 2, /needs a token, and none was given \(is \$SERVICE_ADMIN_TOKEN empty\?.*paste the setup link the first start printed/, { env: noEnv });
    const created = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: uniq('cli-setup'), email: null, role: 'operator' } });
    assert.equal(created.status, 201, created.text);
    const password = 'a long enough password';
    const ok = await cli(['login', '--url', base, '--token', created.body.setup_url, '--password-stdin'], { env: noEnv, input: `${password}\n` });
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, new RegExp(`as ${created.body.name} \\(operator\\)`));
    const stored = JSON.parse(fs.readFileSync(path.join(home, 'config', 'crewhouse', 'config.json'), 'utf8'));
    assert.match(stored.token, /^chk_/);
    assert.equal((await json(['whoami'], { env: noEnv })).name, created.body.name);
    // The password chosen signs in to the web console; the link is spent.
    const session = await t.request({ method: 'POST', url: '/api/v1/session', body: { name: created.body.name, password } });
    assert.equal(session.status, 201, session.text);
    await fails(['login', '--url', base, '--token', created.body.setup_url, '--password-stdin'], 2, /that setup link is used, expired or unknown: an admin issues a fresh one/, { env: noEnv, input: `${password}\n` });
    await cli(['logout'], { env: noEnv });
  });

  it('help says "MCP servers"; agents list counts what uses an agent; a post of the service is not "you"', async () => {
    const top = await cli(['help']);
    assert.match(top.stdout, /^ {2}mcp-servers\s+MCP servers/m);
    assert.doesNotMatch(top.stdout, /mCP/);
    const tpl = await makeTemplate(t);
    const agent = tpl.current.roles.lead.agent as string;
    const used = (await json(['agents', 'show', agent])).used_by;
    assert.ok(used >= 1);
    const list = await cli(['agents', 'list']);
    assert.match(list.stdout, new RegExp(`^${agent}\\s+1\\s+\\S+\\s+\\S+\\s+${used}\\s+test agent$`, 'm'));
    assert.equal(renderPost({ seq: 7, role: null, kind: 'failed', text: 'the lead role could not go on' }), '#7 crewhouse [failed] the lead role could not go on\n');
    assert.equal(renderPost({ seq: 1, role: null, kind: 'task', text: 'do it' }), '#1 you [task] do it\n');
    assert.equal(renderPost({ seq: 2, role: 'lead', kind: 'working', text: 'on it' }), '#2 lead [working] on it\n');
  });

  it('teams archive asks first on a terminal: no leaves the team; yes (or --yes) archives it', async () => {
    const team = await makeTeam(t);
    const archive = (args: string[], answer: string) => runCliIn(['teams', 'archive', ...args], { env: envOf(), input: answer, terminal: true });
    assert.equal((await archive([team.name], 'n\n')).code, 1);
    const api = new ApiClient({ url: base, token: t.adminToken });
    assert.equal((await api.get(`/teams/${team.name}`)).status, 'active');
    assert.equal((await archive([team.name], 'y\n')).code, 0);
    assert.equal((await api.get(`/teams/${team.name}`)).status, 'archived');
    const other = await makeTeam(t);
    assert.equal((await archive([other.name, '--yes'], '')).code, 0);
    assert.equal((await api.get(`/teams/${other.name}`)).status, 'archived');
  });

  it('models lists the aliases; the local one needs no key', async () => {
    const out = await cli(['models']);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /^ALIAS\s+MODEL\s+API\s+UPSTREAM\s+ON THIS MACHINE/m);
    for (const m of (await json(['models'])) as Array<{ alias: string; local: boolean }>) {
      assert.match(out.stdout, new RegExp(`^${m.alias}\\s.*\\s${m.local ? 'yes \\(no key\\)' : 'no'}\\s`, 'm'));
    }
  });
});
