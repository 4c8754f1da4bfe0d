// The README and its docs stay true: the README begins with the two commands and links every
// document of docs/, the configuration table is the parsed configuration's reference, and the
// CLI table names every command the program has.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { configReference } from '../src/config.ts';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
const doc = (name: string) => fs.readFileSync(path.join(root, 'docs', name), 'utf8');

describe('README', () => {
  test('begins with the two commands for a fresh machine', () => {
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    assert.ok(readme.indexOf('```sh') < readme.indexOf('\n## '), 'the commands come before any section');
    const lines = firstBlock.trim().split('\n').map((l) => l.split('#')[0].trim());
    assert.deepEqual(lines, ['npm ci && npm start', 'npm ci && npm test']);
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    for (const script of ['start', 'test', 'typecheck', 'lint', 'bench']) assert.ok(pkg.scripts[script], `npm run ${script}`);
  });

  test('links every document of docs/, and every link leads to one', () => {
    const docs = fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md'));
    for (const f of docs) assert.ok(readme.includes(`(docs/${f})`), `the README does not link docs/${f}`);
    for (const m of readme.matchAll(/\]\((docs\/[^)#]+)\)/g)) assert.ok(fs.existsSync(path.join(root, m[1])), `the README links ${m[1]}, which does not exist`);
  });

  test('the configuration table lists every SERVICE_* variable with its default, and no other', () => {
    const rows = new Map<string, string>();
    for (const m of doc('configuration.md').matchAll(/^\| `(SERVICE_[A-Z0-9_]+)` \| ([^|]+) \|/gm)) rows.set(m[1], m[2].trim());
    const norm = (s: string) => s.replace(/[`()]/g, '').trim();
    for (const v of configReference) {
      assert.ok(rows.has(v.name), `${v.name} is missing from docs/configuration.md`);
      assert.equal(norm(rows.get(v.name)!), norm(v.default), `${v.name}: default`);
    }
    assert.deepEqual([...rows.keys()].sort(), configReference.map((v) => v.name).sort());
  });

  test('the CLI table names every command of `crewhouse help`', () => {
    const help = execFileSync(path.join(root, 'node_modules', '.bin', 'node'), [path.join(root, 'src', 'main.ts'), 'help'], { encoding: 'utf8', env: { PATH: process.env.PATH } });
    const commands = [...help.matchAll(/^ {2}([a-z]+(?: [a-z-]+)?)(?= |$)/gm)].map((m) => m[1].replace(/ --.*$/, ''));
    assert.ok(commands.includes('serve') && commands.includes('migrate') && commands.includes('admin token') && commands.includes('audit'), commands.join(', '));
    const cli = doc('cli.md');
    for (const c of commands) assert.ok(cli.includes(`\`${c}`), `the CLI table of docs/cli.md lacks "${c}"`);
  });
});
