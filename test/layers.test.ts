// The lint rule crewhouse/layers: a top-level part of src/ imports only parts of lower layers
// (docs/development.md, "Layers"). Run on fixture files, and on this repository's own tree: no
// import against the layers, no cycle between parts, every exception still needed, and every
// part in a layer and in the docs.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Linter } from 'eslint';
import tseslint from 'typescript-eslint';
// @ts-expect-error: a plain ES module of the lint configuration, without types
import { cyclesOf, EXCEPTIONS, exceptionFor, LAYERS, layers, partGraph, partOf } from '../eslint-rules/layers.js';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const src = path.join(root, 'src');

/** The rule's messages for some code in a file at `file` (relative to src/); the file need not exist. */
const lint = (file: string, code: string) => {
  const linter = new Linter({ configType: 'flat', cwd: root });
  const messages = linter.verify(
    code,
    [
      {
        files: ['**/*.ts'],
        languageOptions: { parser: tseslint.parser as Linter.Parser },
        plugins: { crewhouse: { rules: { layers: layers(src) } } },
        rules: { 'crewhouse/layers': 'error' },
      },
    ],
    { filename: path.join(src, file) },
  );
  for (const m of messages) assert.equal(m.ruleId, 'crewhouse/layers', `not a parse error: ${m.message}`);
  return messages.map((m) => m.message);
};

type Graph = Map<string, Map<string, string[]>>;

describe('crewhouse/layers', () => {
  test('an import of a higher layer is refused, naming both parts and what to do', () => {
    const messages = lint('queue/queue.ts', "import { problems } from '../http/problem-handler.ts';\nimport type { Db } from '../db/database.ts';\nexport const f = () => import('../console/teams/teams.service.ts');\nexport { x } from '../runtime/jobs.ts';");
    assert.equal(messages.length, 3);
    assert.match(messages[0], /^src\/queue may not import src\/http: http is in a higher layer/);
    assert.match(messages[0], /Move what both need down to the lower part, or pass it in from the composition root/);
    assert.match(messages[1], /^src\/queue may not import src\/console/);
    assert.match(messages[2], /^src\/queue may not import src\/runtime/);
  });

  test('parts of one layer may not import each other; a part imports itself and lower layers', () => {
    assert.deepEqual(lint('chat/app.ts', "import { f } from '../console/teams/teams.service.ts';"), [
      'src/chat may not import src/console: they are in the same layer (docs/development.md, "Layers"). Move what both need into a lower part, or pass it in from the composition root',
    ]);
    assert.deepEqual(lint('runtime/engine/engine.ts', "import { a } from '../../console/runs/runs.service.ts';\nimport { b } from '../sandboxes/placement.ts';\nimport { c } from '../../agent/protocol.ts';\nimport { d } from '../../config.ts';"), []);
  });

  test('a file directly in src/ is its own part; the files that wire a component stand with the composition root', () => {
    assert.equal(partOf(src, path.join(src, 'hooks.ts')), 'hooks.ts');
    assert.equal(partOf(src, path.join(src, 'console/teams/teams.service.ts')), 'console');
    assert.equal(partOf(src, path.join(src, 'runtime/worker.component.ts')), 'component');
    assert.equal(partOf(src, path.join(src, 'chat/component.ts')), 'component');
    assert.equal(partOf(src, path.join(src, 'console/app.ts')), 'component');
    assert.equal(partOf(src, path.join(root, 'test/harness.ts')), null);
    assert.deepEqual(lint('runtime/worker.component.ts', "import { a } from '../gateway/server.ts';\nimport type { Component } from '../components.ts';"), []);
    assert.equal(lint('hooks.ts', "import type { Services } from './services.ts';").length, 1);
    assert.equal(lint('gateway/server.ts', "import type { Component } from '../components.ts';").length, 1);
  });

  test('a part in no layer is named, to be placed', () => {
    assert.deepEqual(lint('newthing/a.ts', "import { b } from '../db/database.ts';"), ['src/newthing is in no layer: add it to LAYERS in eslint-rules/layers.js and to the list in docs/development.md']);
  });

  test('an exception allows exactly its file or folder and part', () => {
    assert.deepEqual(lint('db/schema.ts', "import type { TeamsTables } from '../console/teams/teams.tables.ts';"), []);
    assert.deepEqual(lint('gateway/sources.ts', "import type { Services } from '../services.ts';"), []);
    assert.equal(lint('gateway/server.ts', "import type { Services } from '../services.ts';").length, 1);
    assert.equal(lint('db/database.ts', "import type { TeamsTables } from '../console/teams/teams.tables.ts';").length, 1);
  });

  test('tests and test kits may reach anywhere', () => {
    assert.deepEqual(lint('queue/queue.test.ts', "import { testApp } from '../console/app.ts';"), []);
    assert.deepEqual(lint('chat/chat.testkit.ts', "import { x } from '../runtime/jobs.ts';"), []);
  });

  test('cycles are found, each once', () => {
    const graph: Graph = new Map([
      ['a', new Map([['b', ['a/x.ts: b/y.ts']]])],
      ['b', new Map([['c', []], ['a', []]])],
      ['c', new Map([['a', []]])],
      ['d', new Map([['a', []]])],
    ]);
    assert.deepEqual(cyclesOf(graph), [['a', 'b', 'c'], ['a', 'b']]);
    assert.deepEqual(cyclesOf(new Map([['a', new Map([['b', []]])]])), []);
  });

  describe("this repository's tree", () => {
    const graph: Graph = partGraph(src);
    const allowed = (from: string, to: string, edge: string) => exceptionFor(edge.split(': ')[0].split(path.sep).join('/'), to) !== null;

    test('holds no cycle between its parts, leaving out the listed exceptions', () => {
      const strict: Graph = new Map();
      for (const [from, edges] of graph) {
        for (const [to, list] of edges) {
          const kept = list.filter((edge) => !allowed(from, to, edge));
          if (kept.length) strict.set(from, (strict.get(from) ?? new Map()).set(to, kept));
        }
      }
      const cycles = cyclesOf(strict);
      const shown = cycles.map((c: string[]) => [...c, c[0]].map((p, i, all) => (i === 0 ? p : `${p} (${strict.get(all[i - 1])!.get(p)![0]})`)).join(' -> '));
      assert.deepEqual(shown, []);
    });

    test('every exception is still needed', () => {
      const used = new Set<object>();
      for (const [, edges] of graph) for (const [to, list] of edges) for (const edge of list) {
        const e = exceptionFor(edge.split(': ')[0].split(path.sep).join('/'), to);
        if (e) used.add(e);
      }
      assert.deepEqual(EXCEPTIONS.filter((e: object) => !used.has(e)), [], 'remove the exceptions no import needs any more (eslint-rules/layers.js and docs/development.md)');
    });

    test('every part of src/ is in a layer, and docs/development.md names each', () => {
      const parts = fs.readdirSync(src, { withFileTypes: true }).filter((e) => e.isDirectory() || (e.name.endsWith('.ts') && !/\.test\.ts$/.test(e.name))).map((e) => e.name);
      const placed = new Set(LAYERS.flat());
      assert.deepEqual(parts.filter((p) => !placed.has(p)), []);
      const docs = fs.readFileSync(path.join(root, 'docs/development.md'), 'utf8');
      const section = docs.slice(docs.indexOf('## Layers'));
      assert.deepEqual(LAYERS.flat().filter((p: string) => !section.includes(`\`${p}\``)), []);
    });

    test('the repository configuration runs the rule over src/, not over tests', async () => {
      const { ESLint } = await import('eslint');
      const eslint = new ESLint({ cwd: root });
      const code = "import { problems } from '../http/problem-handler.ts';\nexport const p = problems;\n";
      const ruleMessages = async (file: string) => (await eslint.lintText(code, { filePath: path.join(root, file) }))[0].messages.filter((m) => m.ruleId === 'crewhouse/layers').length;
      assert.equal(await ruleMessages('src/queue/example.ts'), 1);
      assert.equal(await ruleMessages('src/queue/example.test.ts'), 0);
    });
  });
});
