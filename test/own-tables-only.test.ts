// The lint rule crewhouse/own-tables-only: a table belongs to the module whose *.tables.ts
// declares it, and naming it in a query (a Kysely builder call or a sql template) or importing
// its store from another module is an error; migrations are exempt. Run on a fixture tree, and
// on this repository's own tree (which must hold no violation).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Linter } from 'eslint';
import tseslint from 'typescript-eslint';
// @ts-expect-error: a plain ES module of the lint configuration, without types
import { ownTablesOnly, tableOwners, tablesDeclaredIn } from '../eslint-rules/own-tables-only.js';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

const TEAMS_TABLES = `import type { Generated } from '../../db/columns.ts';
/** Teams. */
export interface TeamsTables {
  teams: {
    id: Generated<number>;
    /** A nested comment: not a table. */
    memory: ColumnType<{ a: string }, string | undefined, string>;
  };
  // A role of a team.
  team_roles: { team_id: number; role: string };
}
`;
const SANDBOXES_TABLES = `export interface SandboxesTables {
  sandboxes: { id: string; team_id: number };
  sandbox_claims: { id: string };
}
`;

describe('crewhouse/own-tables-only', () => {
  let src: string;

  before(() => {
    src = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'own-tables-')), 'src');
    fs.mkdirSync(path.join(src, 'console/teams'), { recursive: true });
    fs.mkdirSync(path.join(src, 'runtime/sandboxes'), { recursive: true });
    fs.writeFileSync(path.join(src, 'console/teams/teams.tables.ts'), TEAMS_TABLES);
    fs.writeFileSync(path.join(src, 'runtime/sandboxes/sandboxes.tables.ts'), SANDBOXES_TABLES);
  });
  after(() => fs.rmSync(path.dirname(src), { recursive: true, force: true }));

  /** The rule's messages for some code in a file at `file` (relative to the fixture's src). */
  const lint = (file: string, code: string) => {
    const linter = new Linter({ configType: 'flat', cwd: path.dirname(src) });
    const messages = linter.verify(
      code,
      [
        {
          files: ['**/*.ts'],
          languageOptions: { parser: tseslint.parser as Linter.Parser },
          plugins: { crewhouse: { rules: { 'own-tables-only': ownTablesOnly(src) } } },
          rules: { 'crewhouse/own-tables-only': 'error' },
        },
      ],
      { filename: path.join(src, file) },
    );
    for (const m of messages) assert.equal(m.ruleId, 'crewhouse/own-tables-only', `not a parse error: ${m.message}`);
    return messages.map((m) => m.message);
  };

  test('the map of tables comes from the *.tables.ts files: top-level members only', () => {
    assert.deepEqual(tablesDeclaredIn(TEAMS_TABLES), ['teams', 'team_roles']);
    assert.deepEqual(
      [...tableOwners(src)].sort(),
      [
        ['sandbox_claims', 'runtime/sandboxes'],
        ['sandboxes', 'runtime/sandboxes'],
        ['team_roles', 'console/teams'],
        ['teams', 'console/teams'],
      ],
    );
  });

  test("a Kysely call naming another module's table is an error, with or without an alias, in every builder and join, and as a conditional write's table", () => {
    const messages = lint(
      'runtime/sandboxes/placement.ts',
      `export async function f(db: any) {
        await db.selectFrom('team_roles as r').innerJoin('teams as t', 't.id', 'r.team_id').selectAll().execute();
        await db.updateTable('teams').set({ a: 1 }).execute();
        await db.insertInto("team_roles").values({}).execute();
        await db.deleteFrom(\`teams\`).execute();
        await db.selectFrom(['sandboxes', 'teams']).selectAll().execute();
        await db.selectFrom('sandboxes as s').leftJoin('team_roles as r', 'r.team_id', 's.team_id').execute();
        await updateIfVersion(db, { table: 'teams', where: { id: 1 }, expected: 1, set: {} });
        await updateIfVersion(db, { table: 'sandboxes', where: { id: 1 }, expected: 1, set: {} });
      }`,
    );
    assert.deepEqual(messages, [
      'table "team_roles" belongs to module "console/teams": call its service instead of querying it here',
      'table "teams" belongs to module "console/teams": call its service instead of querying it here',
      'table "teams" belongs to module "console/teams": call its service instead of querying it here',
      'table "team_roles" belongs to module "console/teams": call its service instead of querying it here',
      'table "teams" belongs to module "console/teams": call its service instead of querying it here',
      'table "teams" belongs to module "console/teams": call its service instead of querying it here',
      'table "team_roles" belongs to module "console/teams": call its service instead of querying it here',
      'table "teams" belongs to module "console/teams": call its service instead of querying it here',
    ]);
  });

  test("a sql template naming another module's table is an error; its own tables and other strings are not", () => {
    const messages = lint(
      'runtime/sandboxes/host.ts',
      `import { sql } from 'kysely';
      export async function f(db: any, id: number) {
        await sql\`select s.id from sandboxes s join teams t on t.id = s.team_id where s.id = \${id}\`.execute(db);
        await sql<boolean>\`exists (select 1 from sandbox_claims c where c.sandbox_id = \${id})\`.execute(db);
        await sql\`update public.team_roles set role = 'x'\`.execute(db);
        const label = 'teams';
        await db.selectFrom('sandboxes').where('role', '=', 'teams').where('team_id', '=', label).execute();
      }`,
    );
    assert.deepEqual(messages, [
      'table "teams" belongs to module "console/teams": call its service instead of querying it here',
      'table "team_roles" belongs to module "console/teams": call its service instead of querying it here',
    ]);
  });

  test('the owning module queries its tables; migrations may name any table', () => {
    assert.deepEqual(lint('console/teams/teams.store.ts', `export const f = (db: any) => db.selectFrom('teams as t').innerJoin('team_roles as r', 'r.team_id', 't.id').execute();`), []);
    assert.deepEqual(lint('db/migrations/0001-kernel.ts', "import { sql } from 'kysely';\nexport const up = (db: any) => sql`create table sandboxes (team_id int references teams(id))`.execute(db).then(() => db.selectFrom('teams').execute());"), []);
  });

  test("importing another module's store or tables is an error", () => {
    assert.deepEqual(lint('runtime/sandboxes/placement.ts', "import type { TeamsTables } from '../../console/teams/teams.tables.ts';\nexport type T = TeamsTables;"), [
      'console/teams/teams.tables.ts belongs to module "console/teams": call its service instead of reading its store or tables',
    ]);
  });

  test("this repository's configuration runs the rule over src/ with the real tables, and not over tests", async () => {
    const owners = tableOwners(path.join(root, 'src'));
    assert.equal(owners.get('teams'), 'console/teams');
    assert.equal(owners.get('sandboxes'), 'runtime/sandboxes');
    assert.equal(owners.get('users'), 'console/users');
    const { ESLint } = await import('eslint');
    const eslint = new ESLint({ cwd: root });
    const code = "export const f = (db: any) => db.selectFrom('sandboxes as s').innerJoin('teams as t', 't.id', 's.team_id').execute();\n";
    const ruleMessages = async (file: string) => (await eslint.lintText(code, { filePath: path.join(root, file) }))[0].messages.filter((m) => m.ruleId === 'crewhouse/own-tables-only').map((m) => m.message);
    assert.deepEqual(await ruleMessages('src/runtime/sandboxes/example.ts'), ['table "teams" belongs to module "console/teams": call its service instead of querying it here']);
    assert.deepEqual(await ruleMessages('src/runtime/sandboxes/example.test.ts'), []);
    assert.deepEqual(await ruleMessages('src/db/migrations/0999-example.ts'), []);
  });
});
