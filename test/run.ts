// `npm test`: every test file of src/ and test/ through Node's test runner, two at a time.
//
// With SERVICE_TEST_DATABASE_URL set (the PostgreSQL pass), only the files that can reach a
// database run: those whose imports, followed through relative paths, reach the test harness
// (test/harness.ts, where every test gets its database) or that read the variable themselves.
// The others (the gateway's parsing, the sandboxes, the agent runtime, pure rules) do the same
// thing on either database, and already ran in the embedded-database pass; running them again
// only made the whole run longer. After `npm test --`, test files named run alone, and options go to `node --test`.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const harness = path.join(root, 'test', 'harness.ts');

const files = [...fs.globSync('src/**/*.test.ts', { cwd: root }), ...fs.globSync('test/**/*.test.ts', { cwd: root })].sort();

/** Relative imports of a file, values only (an `import type` brings nothing at run time). */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8');
  const found: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s+(?!type\s)[^;'"]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)|(?:^|\n)\s*import\s+['"](\.[^'"]+)['"]/g)) {
    const spec = m[1] ?? m[2] ?? m[3];
    const target = path.resolve(path.dirname(file), spec);
    if (fs.existsSync(target) && fs.statSync(target).isFile()) found.push(target);
  }
  return found;
}

const reaches = new Map<string, boolean>();
/** Whether a file, through what it imports, can open a test database. */
function usesDatabase(file: string, visiting = new Set<string>()): boolean {
  const known = reaches.get(file);
  if (known !== undefined) return known;
  if (file === harness || fs.readFileSync(file, 'utf8').includes('SERVICE_TEST_DATABASE_URL')) {
    reaches.set(file, true);
    return true;
  }
  if (visiting.has(file)) return false;
  visiting.add(file);
  const answer = importsOf(file).some((f) => usesDatabase(f, visiting));
  visiting.delete(file);
  // An answer found while a cycle was open may be partial when false; only true is certain.
  if (answer || visiting.size === 0) reaches.set(file, answer);
  return answer;
}

// Test files named on the command line run as named; options go to the runner.
const args = process.argv.slice(2);
const named = args.filter((a) => a.endsWith('.ts'));
const options = args.filter((a) => !a.endsWith('.ts'));
const postgres = Boolean(process.env.SERVICE_TEST_DATABASE_URL);
// The longest files start first (measured; about a minute and more each), so that none of them
// starts last and leaves the run waiting on it alone at the end.
const LONGEST = [
  'test/cli.test.ts',
  'src/runtime/sandboxes/providers/microvm/microvm.test.ts',
  'src/db/pglite-dialect.test.ts',
  'src/runtime/sandboxes/host.test.ts',
  'test/e2e/capacity.test.ts',
  'test/e2e/delivery.test.ts',
  'test/e2e/microvm-run.test.ts',
  'src/console/session/session.test.ts',
  'test/supervisor.test.ts',
  'test/e2e/trackers.test.ts',
  'test/e2e/web-runs.test.ts',
  'test/e2e/hostile-channel.test.ts',
  'src/modelproxy/admission/ledger.test.ts',
  'test/e2e/traces.test.ts',
];
for (const f of LONGEST) if (!files.includes(f)) throw new Error(`test/run.ts names ${f} among the longest test files, and there is no such file: update the list`);
const rank = (f: string) => (LONGEST.includes(f) ? LONGEST.indexOf(f) : LONGEST.length);
const all = named.length > 0 ? named : postgres ? files.filter((f) => usesDatabase(path.join(root, f))) : files;
const chosen = named.length > 0 ? all : [...all].sort((a, b) => rank(a) - rank(b));
if (postgres && named.length === 0) process.stdout.write(`# PostgreSQL pass: ${chosen.length} of ${files.length} test files reach a database; the others ran in the embedded-database pass\n`);

// Node's compile cache, for every process of the run (each test file's, and the services and
// workers those start): a process that imports the service's modules spends about a second of
// CPU stripping their types and compiling them, and about half of it with the cache. The cache
// checks each entry against its source, so an edited file is compiled anew.
const env = { ...process.env, NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? path.join(os.tmpdir(), 'crewhouse-test-compile-cache') };
const child = spawn(process.execPath, ['--test', '--test-concurrency=2', '--test-timeout=300000', ...options, ...chosen], { cwd: root, stdio: 'inherit', env });
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
