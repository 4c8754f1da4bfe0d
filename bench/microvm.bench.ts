// The microvm provider: wake from a memory snapshot against a cold boot of the same image and
// disk, in the same run (goal: the ratio at most 0.2), each measured until the guest agent runs
// a command; and host memory per running and per sleeping VM (QEMU's resident set; a sleeping
// VM has no process, only its snapshot on disk). Uses the test image (test/microvm-image.ts)
// and whatever accelerator the host offers (TCG where KVM cannot run a guest).
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createLogger } from '../src/logger.ts';
import { createMicrovmProvider } from '../src/runtime/sandboxes/providers/microvm/index.ts';
import { microvmSkipReason, randomLink, testImagesDir } from '../test/microvm-image.ts';
import type { BenchReport } from './lib.ts';

const ROUNDS = 3;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function rssKib(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

export default async function microvmBench(): Promise<BenchReport[]> {
  const skip = microvmSkipReason();
  if (skip) {
    process.stdout.write(`  microvm bench not run: ${skip}\n`);
    return [];
  }
  const imagesDir = await testImagesDir();
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'mvm-bench-'));
  const p = createMicrovmProvider({ dir, imagesDir, logger: createLogger({ level: 'warn' }), snapshotBudgetBytes: 64 * 1024 ** 3 });
  const id = `bench-${process.pid}`;
  const ready = async () => {
    const h = await p.exec(id, { argv: ['true'] });
    h.stdin.end();
    await h.exit;
  };
  try {
    let t = performance.now();
    await p.create({ id, vcpus: 1, memoryMib: 256, diskGib: 1, image: 'crewhouse-test', env: {}, network: randomLink() });
    await ready();
    const create = (performance.now() - t) / 1000;
    const pid = Number(await fsp.readFile(path.join(dir, id, 'qemu.pid'), 'utf8'));
    const runningKib = rssKib(pid);
    const wakes: number[] = [];
    const colds: number[] = [];
    let snapshotBytes = 0;
    let sleepingProcess = false;
    for (let i = 0; i < ROUNDS; i++) {
      const before = Number(await fsp.readFile(path.join(dir, id, 'qemu.pid'), 'utf8'));
      await p.sleep(id, 'sleep');
      sleepingProcess ||= fs.existsSync(`/proc/${before}`);
      snapshotBytes = (await fsp.stat(path.join(dir, id, 'snapshot.bin'))).size;
      t = performance.now();
      await p.wake(id);
      await ready();
      wakes.push((performance.now() - t) / 1000);
      await p.sleep(id, 'deep');
      t = performance.now();
      await p.wake(id);
      await ready();
      colds.push((performance.now() - t) / 1000);
    }
    const ratio = median(wakes) / median(colds);
    return [
      {
        name: 'microvm: wake from snapshot vs cold boot (same image and disk)',
        lines: [
          `create (cold boot to first command): ${create.toFixed(2)} s`,
          `wake from snapshot: median ${median(wakes).toFixed(2)} s of ${wakes.map((w) => w.toFixed(2)).join(', ')}`,
          `cold boot: median ${median(colds).toFixed(2)} s of ${colds.map((w) => w.toFixed(2)).join(', ')}`,
          `ratio ${ratio.toFixed(3)}`,
        ],
        goal: 'wake / cold boot <= 0.2',
        met: ratio <= 0.2,
      },
      {
        name: 'microvm: host memory per sandbox (256 MiB guest)',
        lines: [`running: QEMU resident ${(runningKib / 1024).toFixed(0)} MiB`, `sleeping: no process (0 MiB resident); snapshot on disk ${(snapshotBytes / 1024 ** 2).toFixed(0)} MiB`],
        goal: 'a sleeping sandbox holds no host memory (its QEMU has exited)',
        met: !sleepingProcess,
      },
    ];
  } finally {
    await p.destroy(id).catch(() => {});
    await fsp.rm(dir, { recursive: true, force: true });
  }
}
