// npm run bench [name...]: runs every bench/*.bench.ts (or the named ones) one after another and
// prints each measurement beside its baseline, measured in the same run on the same machine.
// Goals are ratios; nothing here is a pass/fail timing assertion.
//
// Each bench file runs in a process of its own: one that leaves a large heap behind (the chat
// bench's 10,000 users) would otherwise slow the collector, and so the measurements, of the next.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { BenchReport } from './lib.ts';

const self = fileURLToPath(import.meta.url);
const dir = path.dirname(self);

if (process.argv[2] === '--one') {
  const mod = (await import(pathToFileURL(path.join(dir, process.argv[3])).href)) as { default: () => Promise<BenchReport[]> };
  const reports = await mod.default();
  process.send!(reports, () => process.exit(0));
} else {
  const wanted = process.argv.slice(2);
  const files = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.bench.ts'))
    .filter((f) => wanted.length === 0 || wanted.some((w) => f.startsWith(w)))
    .sort();

  const reports: BenchReport[] = [];
  let failed = 0;
  for (const file of files) {
    process.stdout.write(`\n== ${file}\n`);
    const child = spawn(process.execPath, [self, '--one', file], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let got: BenchReport[] | null = null;
    child.on('message', (m) => (got = m as BenchReport[]));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    if (!got || code !== 0) {
      failed++;
      process.stdout.write(`  the bench exited with ${code} before reporting\n`);
      continue;
    }
    for (const r of got as BenchReport[]) {
      reports.push(r);
      process.stdout.write(`${r.name}\n`);
      for (const line of r.lines) process.stdout.write(`  ${line}\n`);
      process.stdout.write(`  goal: ${r.goal} -> ${r.met ? 'met' : 'NOT met'}\n`);
    }
  }
  const missed = reports.filter((r) => !r.met);
  process.stdout.write(`\n${reports.length - missed.length} of ${reports.length} goals met${failed ? `; ${failed} bench file(s) failed to run` : ''}\n`);
  process.exit(0);
}
