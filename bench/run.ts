// npm run bench [name...]: runs every bench/*.bench.ts (or the named ones) one after another and
// prints each measurement beside its baseline, measured in the same run on the same machine.
// Goals are ratios; nothing here is a pass/fail timing assertion.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { BenchReport } from './lib.ts';

const dir = path.dirname(fileURLToPath(import.meta.url));
const wanted = process.argv.slice(2);
const files = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith('.bench.ts'))
  .filter((f) => wanted.length === 0 || wanted.some((w) => f.startsWith(w)))
  .sort();

const reports: BenchReport[] = [];
for (const file of files) {
  const mod = (await import(pathToFileURL(path.join(dir, file)).href)) as { default: () => Promise<BenchReport[]> };
  process.stdout.write(`\n== ${file}\n`);
  for (const r of await mod.default()) {
    reports.push(r);
    process.stdout.write(`${r.name}\n`);
    for (const line of r.lines) process.stdout.write(`  ${line}\n`);
    process.stdout.write(`  goal: ${r.goal} -> ${r.met ? 'met' : 'NOT met'}\n`);
  }
}
const missed = reports.filter((r) => !r.met);
process.stdout.write(`\n${reports.length - missed.length} of ${reports.length} goals met\n`);
process.exit(0);
