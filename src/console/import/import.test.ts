/**
 * POST /import against a configuration repository served by Git's own `git http-backend` over
 * HTTPS (test/fakes/git-server.ts): the plan, apply, re-apply, edits in git, the skill rules
 * of the import, problems with file and line, concurrent imports, prune, and `crewhouse
 * export` then import round-tripping to unchanged.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { issuerOf, mintCertificateAuthority, mintLeaf } from '../../gateway/certificates.ts';
import { startGitServer } from '../../../test/fakes/git-server.ts';
import { startFakeCodeHost } from '../../../test/fakes/code-host.ts';
import { makeEnvironment, makeIntegration } from '../../../test/factories.ts';
import { testApp, type TestApp } from '../../../test/harness.ts';
import { loadConfig } from '../../config.ts';

const MAIN = path.resolve(import.meta.dirname, '../../main.ts');

const skillMd = (name: string, text: string) => `---\nname: ${name}\ndescription: ${text}\n---\n\n# ${name}\n\n${text}\n`;

describe('POST /import from a git configuration repository', () => {
  let t: TestApp;
  let git: Awaited<ReturnType<typeof startGitServer>>;
  let work: string;
  let tmp: string;
  let caFile: string;
  let url: string;
  let base: string;

  /** Runs git in the working copy, trusting the test server's certificate authority; never blocking (the server is in this process). */
  const g = (...args: string[]) =>
    new Promise<string>((resolve, reject) =>
      execFile('git', ['-C', work, '-c', `http.sslCAInfo=${caFile}`, ...args], { encoding: 'utf8', timeout: 60_000, env: { PATH: process.env.PATH, HOME: tmp, GIT_CONFIG_NOSYSTEM: '1' } }, (err, out, stderr) => (err ? reject(new Error(`git ${args.join(' ')}: ${stderr}`)) : resolve(out))),
    );
  /** Writes (or with null deletes) files of the working copy, commits and pushes them; answers the commit. */
  const push = async (files: Record<string, string | null>, message = 'change') => {
    for (const [file, text] of Object.entries(files)) {
      const p = path.join(work, file);
      if (text === null) fs.rmSync(p, { force: true });
      else {
        fs.mkdirSync(path.dirname(p), { recursive: true });
        fs.writeFileSync(p, text);
      }
    }
    await g('add', '-A');
    await g('-c', 'user.name=Test', '-c', 'user.email=test@example.com', 'commit', '-q', '--allow-empty', '-m', message);
    await g('push', '-q', url, 'HEAD:main');
    return (await g('rev-parse', 'HEAD')).trim();
  };
  const post = (body?: Record<string, unknown>) => t.request({ method: 'POST', url: '/api/v1/import', token: t.adminToken, body: body ?? {} });
  const byName = (plan: any) => Object.fromEntries(plan.entries.map((e: any) => [`${e.kind}:${e.name}`, e]));

  const agentYaml = (prompt: string) => `description: writes the code\nversion:\n  system_prompt: ${prompt}\n  skills: [changelog]\n  egress:\n    mode: allowlist\n    destinations: [pypi]\n`;
  const templateYaml = `description: a lead and a coder
lead: lead
roles:
  lead: { agent: coder, model: fast, vm: imp-small }
  dev:
    agent: coder
    model: fast
    vm: imp-small
sleep: {}
idle_after_seconds: 600
deep_sleep_after_seconds: 3600
budget_usd_per_day: 5
pipeline: { lead: dev }
`;

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-import-test-'));
    const ca = mintCertificateAuthority('import test CA');
    caFile = path.join(tmp, 'ca.pem');
    fs.writeFileSync(caFile, ca.certPem);
    git = await startGitServer(mintLeaf(issuerOf(ca), '127.0.0.1'));
    git.makeRepo('config.git');
    url = `https://127.0.0.1:${git.port}/config.git`;
    work = path.join(tmp, 'work');
    execFileSync('git', ['init', '-q', '-b', 'main', work]);
    t = await testApp({ config: { SERVICE_IMPORT_REPOSITORY: url, SERVICE_IMPORT_CA_FILE: caFile } });
    await makeEnvironment(t, { name: 'imp-small' });
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const address = t.app.server.address();
    assert.ok(address && typeof address === 'object');
    base = `http://127.0.0.1:${address.port}`;
  });
  after(async () => {
    await t?.close();
    await git?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('answers a plan without writing, applies it in one audited transaction, and a re-apply changes nothing', async () => {
    const commit = await push({
      'skills/changelog/SKILL.md': skillMd('changelog', 'Keeps CHANGELOG.md in order'),
      'skills/changelog/templates/entry.md': '## {version}\n',
      'policies/pypi.yaml': 'host: pypi.org\nmethods: [GET]\npaths: [/simple/]\nwhat: Python packages\n',
      'agents/coder.yaml': agentYaml('You write code.'),
      'templates/duo.yaml': templateYaml,
      'README.md': 'not part of the layout, ignored\n',
    });
    const dry = await post();
    assert.equal(dry.status, 200, dry.text);
    assert.equal(dry.body.commit, commit);
    assert.equal(dry.body.dry_run, true);
    assert.equal(dry.body.applied, false);
    assert.deepEqual(dry.body.problems, []);
    assert.deepEqual(dry.body.entries.map((e: any) => `${e.action} ${e.kind}:${e.name}`), ['create skill:changelog', 'create policy:pypi', 'create agent:coder', 'create template:duo']);
    assert.match(byName(dry.body)['agent:coder'].diff, /^\+ {3}system_prompt: You write code\.$/m);
    // Nothing was written.
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/agents/coder', token: t.adminToken })).status, 404);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/skills/changelog', token: t.adminToken })).status, 404);

    const applied = await post({ dry_run: false });
    assert.equal(applied.status, 200, applied.text);
    assert.equal(applied.body.applied, true);
    const agent = await t.request({ method: 'GET', url: '/api/v1/agents/coder', token: t.adminToken });
    assert.equal(agent.status, 200);
    assert.equal(agent.body.current.system_prompt, 'You write code.');
    assert.deepEqual(agent.body.current.egress.destinations, ['pypi']);
    const tpl = await t.request({ method: 'GET', url: '/api/v1/team-templates/duo', token: t.adminToken });
    assert.equal(tpl.body.current.roles.dev.agent, 'coder');
    const skill = await t.request({ method: 'GET', url: '/api/v1/skills/changelog', token: t.adminToken });
    assert.deepEqual(skill.body.resources, { 'templates/entry.md': '## {version}\n' });
    const audit = await t.request({ method: 'GET', url: '/api/v1/audit?action=import.apply', token: t.adminToken });
    assert.equal(audit.body.items.length, 1);
    assert.equal(audit.body.items[0].details.commit, commit);
    // The objects written by the import have no audit entries of their own: the import is one.
    const creates = await t.request({ method: 'GET', url: '/api/v1/audit?action=agent.create', token: t.adminToken });
    assert.equal(creates.body.items.length, 0);

    const again = await post({ dry_run: false });
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.body.entries.map((e: any) => e.action), ['unchanged', 'unchanged', 'unchanged', 'unchanged']);
    const versions = await t.request({ method: 'GET', url: '/api/v1/agents/coder/versions', token: t.adminToken });
    assert.equal(versions.body.items.length, 1);
  });

  it('an edit in git becomes a new version noting the commit, with a diff of what changes', async () => {
    const commit = await push({ 'agents/coder.yaml': agentYaml('You write careful code.') });
    const dry = await post();
    const entry = byName(dry.body)['agent:coder'];
    assert.equal(entry.action, 'update');
    assert.match(entry.diff, /^- {3}system_prompt: You write code\.$/m);
    assert.match(entry.diff, /^\+ {3}system_prompt: You write careful code\.$/m);
    assert.equal(byName(dry.body)['template:duo'].action, 'unchanged');
    const applied = await post({ dry_run: false });
    assert.equal(byName(applied.body)['agent:coder'].version, 2);
    const v2 = await t.request({ method: 'GET', url: '/api/v1/agents/coder/versions/2', token: t.adminToken });
    assert.equal(v2.body.system_prompt, 'You write careful code.');
    const list = await t.request({ method: 'GET', url: '/api/v1/agents/coder/versions', token: t.adminToken });
    assert.ok(list.body.items.some((v: any) => v.version === 2 && v.note.includes(commit)), JSON.stringify(list.body.items));
  });

  it("an agent's context documents live beside it: written, changed and left alone like the rest", async () => {
    await push({
      'agents/coder.yaml': `${agentYaml('You write careful code.')}documents:\n  style.md: { description: house style }\n  glossary: { media_type: text/plain }\n`,
      'agents/coder/style.md': '# Style\n\nShort functions.\n',
      'agents/coder/glossary': 'PR: pull request\n',
    });
    const made = await t.request({ method: 'PUT', url: '/api/v1/agents/coder/documents/notes.txt', token: t.adminToken, body: { media_type: 'text/plain', content: 'kept\n' } });
    assert.equal(made.status, 201, made.text);
    const applied = await post({ dry_run: false });
    assert.equal(applied.status, 200, applied.text);
    const entry = byName(applied.body)['agent:coder'];
    assert.equal(entry.action, 'update');
    assert.equal(entry.version, null, 'documents alone make no new version');
    assert.match(entry.diff, /^--- documents\/style\.md$/m);
    assert.match(entry.reason, /documents not in the repository, left alone: notes\.txt/);
    const style = await t.request({ method: 'GET', url: '/api/v1/agents/coder/documents/style.md', token: t.adminToken });
    assert.equal(style.body.description, 'house style');
    assert.equal(style.body.media_type, 'text/markdown');
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/agents/coder/documents/glossary', token: t.adminToken })).body.media_type, 'text/plain');
    assert.equal(byName((await post()).body)['agent:coder'].action, 'unchanged');
    await push({ 'agents/coder/style.md': '# Style\n\nShort functions, clear names.\n' });
    const changed = byName((await post({ dry_run: false })).body)['agent:coder'];
    assert.match(changed.diff, /^\+ Short functions, clear names\.$/m);
    const del = await t.request({ method: 'GET', url: '/api/v1/agents/coder/documents/notes.txt', token: t.adminToken });
    assert.equal((await t.request({ method: 'DELETE', url: '/api/v1/agents/coder/documents/notes.txt', token: t.adminToken, headers: { 'if-match': String(del.headers.etag) } })).status, 204);
    // The glossary leaves the repository: left alone until an import with prune (below) deletes it.
    await push({ 'agents/coder.yaml': agentYaml('You write careful code.'), 'agents/coder/glossary': null });
  });

  it('a skill deleted through the API returns; one edited through the API is skipped unless forced', async () => {
    const read = await t.request({ method: 'GET', url: '/api/v1/skills/changelog', token: t.adminToken });
    const del = await t.request({ method: 'DELETE', url: '/api/v1/skills/changelog', token: t.adminToken, headers: { 'if-match': String(read.headers.etag) } });
    assert.equal(del.status, 204);
    const back = await post({ dry_run: false });
    const entry = byName(back.body)['skill:changelog'];
    assert.equal(entry.action, 'create');
    assert.match(entry.reason, /deleted through the API/);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/skills/changelog', token: t.adminToken })).status, 200);

    const now = await t.request({ method: 'GET', url: '/api/v1/skills/changelog', token: t.adminToken });
    const edited = skillMd('changelog', 'Edited in the console');
    const put = await t.request({ method: 'PUT', url: '/api/v1/skills/changelog', token: t.adminToken, headers: { 'if-match': String(now.headers.etag) }, body: { body: edited } });
    assert.equal(put.status, 200, put.text);
    const skipped = await post({ dry_run: false });
    assert.equal(skipped.status, 200, skipped.text);
    const s = byName(skipped.body)['skill:changelog'];
    assert.equal(s.action, 'skip');
    assert.match(s.reason, /edited through the API/);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/skills/changelog', token: t.adminToken })).body.body, edited);

    const forced = await post({ dry_run: false, force: true });
    assert.equal(byName(forced.body)['skill:changelog'].action, 'update');
    const after = await t.request({ method: 'GET', url: '/api/v1/skills/changelog', token: t.adminToken });
    assert.equal(after.body.body, skillMd('changelog', 'Keeps CHANGELOG.md in order'));
    // Imported again, it is no longer marked edited: the next import leaves it unchanged.
    assert.equal(byName((await post()).body)['skill:changelog'].action, 'unchanged');
  });

  it('a broken file names its file and line, and an apply with problems writes nothing', async () => {
    await push({
      'agents/coder.yaml': agentYaml('A prompt that must not land.'),
      'agents/broken.yaml': 'description: fine\nversion:\n  system_prompt: hello\n  colour: blue\n',
      'templates/bad.yaml': templateYaml.replace('  dev:\n    agent: coder', '  dev:\n    agent: nobody'),
      'policies/syntax.yaml': 'host: [unclosed\n',
    });
    try {
      await brokenFiles();
    } finally {
      await push({ 'agents/coder.yaml': agentYaml('You write careful code.'), 'agents/broken.yaml': null, 'templates/bad.yaml': null, 'policies/syntax.yaml': null });
    }
  });

  async function brokenFiles() {
    const dry = await post();
    assert.equal(dry.status, 200, dry.text);
    const problems = dry.body.problems.map((p: any) => `${p.file}:${p.line} ${p.field} ${p.message}`);
    assert.ok(problems.includes('agents/broken.yaml:4 version.colour is not a known field'), problems.join('\n'));
    assert.ok(problems.includes('templates/bad.yaml:6 roles.dev.agent no agent named "nobody"'), problems.join('\n'));
    assert.ok(problems.some((p: string) => /^policies\/syntax\.yaml:\d+ null is not valid YAML: /.test(p)), problems.join('\n'));

    const refused = await post({ dry_run: false });
    assert.equal(refused.status, 422, refused.text);
    assert.match(refused.body.detail, /nothing was imported/);
    assert.ok(refused.body.errors.some((e: any) => e.field === 'agents/broken.yaml, line 4: version.colour'), refused.text);
    const agent = await t.request({ method: 'GET', url: '/api/v1/agents/coder', token: t.adminToken });
    assert.equal(agent.body.current.system_prompt, 'You write careful code.');
  }

  it('two imports at once do not interleave: the change is made once', async () => {
    await push({ 'agents/coder.yaml': agentYaml('You write code, concurrently.') });
    const before = (await t.request({ method: 'GET', url: '/api/v1/agents/coder', token: t.adminToken })).body.current_version;
    const [a, b] = await Promise.all([post({ dry_run: false }), post({ dry_run: false })]);
    assert.equal(a.status, 200, a.text);
    assert.equal(b.status, 200, b.text);
    const actions = [byName(a.body)['agent:coder'].action, byName(b.body)['agent:coder'].action].sort();
    assert.deepEqual(actions, ['unchanged', 'update']);
    const agent = await t.request({ method: 'GET', url: '/api/v1/agents/coder', token: t.adminToken });
    assert.equal(agent.body.current_version, before + 1);
  });

  for (const dryRun of [false, true]) {
    it(`an import${dryRun ? ' (a dry run)' : ''} that read a commit before another import applied a newer one is refused with 409, never applied over it`, async () => {
      await push({ 'agents/coder.yaml': agentYaml(`Older, dry run ${dryRun}.`) });
      // The first import has chosen the older commit and waits for its objects while the second reads and applies the newer one.
      const held = git.holdNextFetch();
      const first = post({ dry_run: dryRun });
      await held.arrived;
      const newer = await push({ 'agents/coder.yaml': agentYaml(`Newer, dry run ${dryRun}.`) });
      const second = await post({ dry_run: false });
      assert.equal(second.status, 200, second.text);
      assert.equal(second.body.commit, newer);
      held.release();
      const late = await first;
      assert.equal(late.status, 409, late.text);
      assert.match(late.body.detail, new RegExp(`another import applied commit ${newer} while this one was reading commit [0-9a-f]{40}.*nothing was imported\\. Import again`));
      const agent = await t.request({ method: 'GET', url: '/api/v1/agents/coder', token: t.adminToken });
      assert.equal(agent.body.current.system_prompt, `Newer, dry run ${dryRun}.`);
      // Imported again, it reads the newer commit: nothing left to change.
      const again = await post({ dry_run: dryRun });
      assert.equal(again.status, 200, again.text);
      assert.equal(again.body.commit, newer);
      assert.equal(byName(again.body)['agent:coder'].action, 'unchanged');
    });
  }

  it('leaves alone what the repository does not name, and deletes it only with prune', async () => {
    const made = await t.request({ method: 'POST', url: '/api/v1/destinations', token: t.adminToken, body: { name: 'console-only', host: 'example.org', what: 'made in the console' } });
    assert.equal(made.status, 201, made.text);
    const plan = await post();
    assert.ok(plan.body.left_alone.some((l: any) => l.kind === 'policy' && l.name === 'console-only'), plan.text);
    assert.ok(!plan.body.entries.some((e: any) => e.name === 'console-only'));
    const pruned = await post({ dry_run: false, prune: true });
    assert.equal(pruned.status, 200, pruned.text);
    assert.equal(byName(pruned.body)['policy:console-only'].action, 'delete');
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/destinations/console-only', token: t.adminToken })).status, 404);
  });

  it('crewhouse export writes the definitions in the layout, and importing them is all unchanged', async () => {
    const out = path.join(tmp, 'exported');
    const cli = (...args: string[]) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((resolve, reject) => {
        execFile(process.execPath, [MAIN, ...args], { env: { PATH: process.env.PATH ?? '', HOME: tmp, XDG_CONFIG_HOME: path.join(tmp, 'cfg'), CREWHOUSE_URL: base, CREWHOUSE_TOKEN: t.adminToken }, timeout: 120_000 }, (err, stdout, stderr) => {
          if (err && typeof err.code !== 'number') return reject(err);
          resolve({ code: err ? Number(err.code) : 0, stdout, stderr });
        });
      });
    const r = await cli('export', out);
    assert.equal(r.code, 0, r.stderr);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/agents/coder/documents/glossary', token: t.adminToken })).status, 404, 'pruned');
    for (const f of ['agents/coder.yaml', 'agents/coder/style.md', 'templates/duo.yaml', 'policies/pypi.yaml', 'skills/changelog/SKILL.md', 'skills/changelog/templates/entry.md']) assert.ok(fs.existsSync(path.join(out, f)), `${f} exported`);
    // The repository becomes exactly what was exported.
    for (const d of ['agents', 'templates', 'policies', 'skills']) fs.rmSync(path.join(work, d), { recursive: true, force: true });
    fs.cpSync(out, work, { recursive: true });
    await push({}, 'exported from the console');
    const plan = await post();
    assert.equal(plan.status, 200, plan.text);
    assert.deepEqual(plan.body.problems, []);
    assert.deepEqual([...new Set(plan.body.entries.map((e: any) => e.action))], ['unchanged'], plan.text);
    assert.deepEqual(plan.body.left_alone, []);
    // The CLI prints the same plan for people.
    const printed = await cli('import');
    assert.equal(printed.code, 0, printed.stderr);
    assert.match(printed.stdout, /^Plan for commit [0-9a-f]{40} \(dry run: nothing written; --apply to write it\)\.$/m);
    assert.match(printed.stdout, /^ {2}unchanged agent coder$/m);
  });
});

describe('the configuration repository setting and a local directory', () => {
  it('SERVICE_IMPORT_* refuse what cannot be a repository, in words', () => {
    const load = (env: Record<string, string>) => () => loadConfig({ SERVICE_DATA_DIR: ':memory:', ...env });
    assert.throws(load({ SERVICE_IMPORT_REPOSITORY: 'config-repo' }), /must be a git URL .* or an absolute directory/);
    assert.throws(load({ SERVICE_IMPORT_REPOSITORY: 'https://me:hunter2@git.example.com/config.git' }), /must not carry a user or password/);
    assert.throws(load({ SERVICE_IMPORT_REPOSITORY: 'https://git.example.com/config.git', SERVICE_IMPORT_REF: '--upload-pack=evil' }), /SERVICE_IMPORT_REF must be a branch, tag or commit name/);
    assert.throws(load({ SERVICE_IMPORT_DEPLOY_KEY: 'deploy' }), /need SERVICE_IMPORT_REPOSITORY/);
    assert.deepEqual(load({ SERVICE_IMPORT_REPOSITORY: 'git@git.example.com:team/config.git' })().importRepository, { kind: 'git', url: 'git@git.example.com:team/config.git', ref: 'main', caFile: null, deployKeySecret: null });
    assert.equal(load({})().importRepository, null);
  });

  it('reads a directory without following symbolic links; without a repository the answer says what to set', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-import-dir-'));
    const t = await testApp({ config: { SERVICE_IMPORT_REPOSITORY: dir } });
    const none = await testApp();
    try {
      fs.mkdirSync(path.join(dir, 'policies'));
      fs.writeFileSync(path.join(dir, 'policies', 'docs.yaml'), 'host: docs.example.org\nwhat: documentation\n');
      fs.symlinkSync('/etc/passwd', path.join(dir, 'policies', 'leak.yaml'));
      // No body at all is a dry run too.
      const plan = await t.request({ method: 'POST', url: '/api/v1/import', token: t.adminToken });
      assert.equal(plan.status, 200, plan.text);
      assert.equal(plan.body.commit, null);
      assert.deepEqual(plan.body.entries.map((e: any) => `${e.action} ${e.kind}:${e.name}`), ['create policy:docs']);
      assert.deepEqual(plan.body.problems, [{ file: 'policies/leak.yaml', line: null, field: null, message: 'is a symbolic link; only regular files are imported' }]);
      assert.ok(!plan.text.includes('root:'), 'nothing of the link target is read');

      const unset = await none.request({ method: 'POST', url: '/api/v1/import', token: none.adminToken, body: {} });
      assert.equal(unset.status, 422, unset.text);
      assert.match(unset.body.detail, /no configuration repository is set: set SERVICE_IMPORT_REPOSITORY/);
      const viewer = await none.user('viewer');
      assert.equal((await none.request({ method: 'POST', url: '/api/v1/import', token: viewer.token, body: {} })).status, 403);
      const bad = await t.request({ method: 'POST', url: '/api/v1/import', token: t.adminToken, body: { dry_run: 'no' } });
      assert.equal(bad.status, 400, bad.text);
    } finally {
      await t.close();
      await none.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
  it('a file whose aliases expand past the guard is a problem of that file with its reason, not a 500', async (ctx) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-import-aliases-'));
    ctx.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const t = await testApp({ config: { SERVICE_IMPORT_REPOSITORY: dir } });
    ctx.after(() => t.close());
    fs.mkdirSync(path.join(dir, 'agents'));
    // Each level holds nine of the one before: a small file that expands to 9^6 strings.
    const levels = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
    for (const [prev, name] of [['a', 'b'], ['b', 'c'], ['c', 'd'], ['d', 'e'], ['e', 'f']]) levels.push(`${name}: &${name} [${Array(9).fill(`*${prev}`).join(',')}]`);
    fs.writeFileSync(path.join(dir, 'agents', 'bomb.yaml'), `${levels.join('\n')}\n`);
    fs.writeFileSync(path.join(dir, 'agents', 'fine.yaml'), 'description: x\nversion:\n  system_prompt: hi\n');
    const plan = await t.request({ method: 'POST', url: '/api/v1/import', token: t.adminToken, body: {} });
    assert.equal(plan.status, 200, plan.text);
    assert.deepEqual(plan.body.entries.map((e: any) => `${e.action} ${e.kind}:${e.name}`), ['create agent:fine']);
    assert.equal(plan.body.problems.length, 1, plan.text);
    assert.equal(plan.body.problems[0].file, 'agents/bomb.yaml');
    assert.match(plan.body.problems[0].message, /^is not valid YAML: .*aliases/);
    const apply = await t.request({ method: 'POST', url: '/api/v1/import', token: t.adminToken, body: { dry_run: false } });
    assert.equal(apply.status, 422, apply.text);
    assert.match(apply.body.detail, /1 problem/);
  });
});

describe('values a YAML file can say that would not be stored as read', () => {
  it('an escaped NUL, .nan or .inf, half a surrogate pair, nesting too deep: a problem of the file naming field and line, the rest of the plan made', async (ctx) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-import-values-'));
    ctx.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const t = await testApp({ config: { SERVICE_IMPORT_REPOSITORY: dir } });
    ctx.after(() => t.close());
    const files: Record<string, string> = {
      'agents/nul.yaml': 'description: x\nversion:\n  system_prompt: "hi\\0there"\n',
      'agents/nan.yaml': 'description: x\nversion:\n  system_prompt: hi\n  context:\n    - { ratio: .nan }\n',
      'agents/huge.yaml': 'description: x\nversion:\n  system_prompt: hi\n  context:\n    - { n: 1e400 }\n',
      'agents/half.yaml': 'description: "caf\\ud800"\nversion:\n  system_prompt: hi\n',
      'agents/deep.yaml': `description: x\nversion:\n  system_prompt: hi\n  context: [ ${'{a: '.repeat(120)}1${'}'.repeat(120)} ]\n`,
      'policies/nul.yaml': 'host: docs.example.org\nwhat: "a\\0b"\n',
      'skills/nul/SKILL.md': '---\nname: nul\ndescription: "a\\0b"\n---\n',
      'agents/fine.yaml': 'description: x\nversion:\n  system_prompt: hi\n',
    };
    for (const [file, text] of Object.entries(files)) {
      fs.mkdirSync(path.join(dir, path.dirname(file)), { recursive: true });
      fs.writeFileSync(path.join(dir, file), text);
    }
    const plan = await t.request({ method: 'POST', url: '/api/v1/import', token: t.adminToken, body: {} });
    assert.equal(plan.status, 200, plan.text);
    assert.deepEqual(plan.body.entries.map((e: any) => `${e.action} ${e.kind}:${e.name}`), ['create agent:fine']);
    const problems = Object.fromEntries(plan.body.problems.map((p: any) => [p.file, `${p.line} ${p.field} ${p.message}`]));
    assert.deepEqual(problems, {
      'agents/nul.yaml': '3 version.system_prompt must not contain a NUL character',
      'agents/nan.yaml': '5 version.context.0.ratio must be a finite number: .nan, .inf and numbers too large for JSON cannot be stored',
      'agents/huge.yaml': '5 version.context.0.n must be a finite number: .nan, .inf and numbers too large for JSON cannot be stored',
      'agents/half.yaml': '1 description must be Unicode text: it holds half of a surrogate pair (an escape such as "\\ud800" alone)',
      'agents/deep.yaml': `4 version.context.0${'.a'.repeat(97)} nests deeper than 100 levels`,
      'policies/nul.yaml': '2 what must not contain a NUL character',
      'skills/nul/SKILL.md': 'null body front matter description must not contain a NUL character',
    });
    const apply = await t.request({ method: 'POST', url: '/api/v1/import', token: t.adminToken, body: { dry_run: false } });
    assert.equal(apply.status, 422, apply.text);
    assert.equal(apply.body.errors.length, 7, apply.text);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/agents/fine', token: t.adminToken })).status, 404, 'nothing written');
  });
});

describe('what the YAML reader and the layout say, in words', () => {
  it('names the file and line of an alias without its anchor, a second document, nesting the parser cannot read, a documents map that is not one or names no document', async (ctx) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-import-words-'));
    ctx.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const t = await testApp({ config: { SERVICE_IMPORT_REPOSITORY: dir } });
    ctx.after(() => t.close());
    const files: Record<string, string> = {
      'agents/alias.yaml': 'description: x\nversion:\n  system_prompt: *prompt\n',
      'agents/two.yaml': 'description: x\nversion:\n  system_prompt: hi\n---\ndescription: y\n',
      'agents/deep.yaml': `description: x\nversion:\n  system_prompt: hi\n  context: [ ${'['.repeat(20000)}${']'.repeat(20000)} ]\n`,
      'agents/list.yaml': 'description: x\nversion:\n  system_prompt: hi\ndocuments: [style.md]\n',
      'agents/misnamed.yaml': 'description: x\nversion:\n  system_prompt: hi\ndocuments:\n  "Style Guide": { description: house style }\n',
      'agents/coder/notes/old.md': 'x\n',
      'agents/anchored.yaml': 'description: &same the same text\nversion:\n  system_prompt: *same\n',
    };
    for (const [file, text] of Object.entries(files)) {
      fs.mkdirSync(path.join(dir, path.dirname(file)), { recursive: true });
      fs.writeFileSync(path.join(dir, file), text);
    }
    const plan = await t.request({ method: 'POST', url: '/api/v1/import', token: t.adminToken, body: {} });
    assert.equal(plan.status, 200, plan.text);
    assert.deepEqual(plan.body.entries.map((e: any) => `${e.action} ${e.kind}:${e.name}`), ['create agent:anchored']);
    const problems = Object.fromEntries(plan.body.problems.map((p: any) => [p.file, `${p.line} ${p.field} ${p.message}`]));
    assert.deepEqual(problems, {
      'agents/alias.yaml': '3 null is not valid YAML: *prompt names no anchor set above it: set &prompt on a value before it, or write the value out',
      'agents/two.yaml': '4 null is not valid YAML: holds more than one YAML document (a --- line between them); a file holds one definition',
      'agents/deep.yaml': '4 null is not valid YAML: nests too deep to be read; a definition nests a few levels',
      'agents/list.yaml': '4 documents must be an object (names and values)',
      'agents/misnamed.yaml': '5 documents.Style Guide is not a document name: a name is lowercase letters, digits, ".", "_" and "-", starting with a letter or digit; at most 63 characters',
      'agents/coder/notes/old.md': 'null null is not part of the layout: agents/ holds one <name>.yaml file per agent and its documents as agents/<name>/<document>, nothing else',
    });
  });
});

describe('a configuration repository on the code host', () => {
  it('is fetched with an installation token narrowed to it, which appears nowhere', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-import-codehost-'));
    const ca = mintCertificateAuthority('import code host CA');
    fs.writeFileSync(path.join(tmp, 'ca.pem'), ca.certPem);
    const fake = await startFakeCodeHost({ tls: mintLeaf(issuerOf(ca), '127.0.0.1') });
    const installation = fake.addInstallation('acme');
    fake.addRepo('acme/config', { installation, defaultBranch: 'main' });
    const commit = fake.pushBranch('acme/config', 'main', { 'policies/docs.yaml': 'host: docs.example.org\nwhat: documentation\n' });
    const t = await testApp({ codeHostClock: fake.now, config: { SERVICE_IMPORT_REPOSITORY: `https://127.0.0.1:${fake.httpsPort}/acme/config.git`, SERVICE_IMPORT_CA_FILE: path.join(tmp, 'ca.pem') } });
    try {
      const api = (method: string, url: string, body?: unknown, headers?: Record<string, string>) => t.request({ method, url: `/api/v1${url}`, token: t.adminToken, body, headers });
      await makeIntegration(t, 'code_host', {
        settings: { app_id: String(fake.app.id), installation_id: String(installation), api_url: fake.apiUrl },
        secrets: { app_key: fake.app.privateKeyPem, webhook_secret: 'whsec-import-test' },
      });

      const plan = await api('POST', '/import', { dry_run: false });
      assert.equal(plan.status, 200, plan.text);
      assert.equal(plan.body.commit, commit);
      assert.deepEqual(plan.body.entries.map((e: any) => `${e.action} ${e.kind}:${e.name}`), ['create policy:docs']);
      assert.ok(fake.requests.some((r) => r.path === '/acme/config.git/info/refs' && r.auth === 'basic'), 'git was asked with the token');
      assert.ok(fake.tokens.length > 0);
      assert.deepEqual(fake.tokens.at(-1)!.repositories, ['acme/config'], 'narrowed to the configuration repository');
      for (const { token } of fake.tokens) {
        assert.ok(!plan.text.includes(token), 'the token is not in the answer');
        assert.ok(!t.logs.join('').includes(token), 'the token is not in a log line');
      }
      const audit = await api('GET', '/audit?action=import.apply');
      assert.ok(!fake.tokens.some(({ token }) => audit.text.includes(token)));
    } finally {
      await t.close();
      await fake.close();
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
