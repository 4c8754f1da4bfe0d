// The local provider: the time to make a sandbox (network namespace, veth, firewall, cgroup,
// bubblewrap) against a bare bubblewrap sandbox started in the same run, and the memory a
// running, a sleeping and a deeply sleeping sandbox holds on its host (its cgroup's charge).
// Needs root, like the provider.
import crypto from 'node:crypto';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { hostInterfaceName } from '../src/runtime/sandboxes/network.ts';
import { createLocalProvider } from '../src/runtime/sandboxes/providers/local.ts';
import { findProgram } from '../src/runtime/sandboxes/system.ts';
import type { BenchReport } from './lib.ts';

const ROUNDS = 8;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** A bare bubblewrap sandbox running /bin/true: the floor any namespace sandbox pays. */
async function bareBwrap(bwrap: string): Promise<number> {
  const started = performance.now();
  await new Promise<void>((resolve, reject) => {
    const c = spawn(bwrap, ['--unshare-all', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev', '--', '/bin/true'], { stdio: 'ignore' });
    c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`bwrap exited ${code}`))));
  });
  return performance.now() - started;
}

export default async function sandboxesBench(): Promise<BenchReport[]> {
  const bwrap = findProgram('bwrap');
  if (process.getuid?.() !== 0 || !bwrap) {
    return [{ name: 'local sandboxes', lines: ['skipped: needs root and bubblewrap'], goal: 'runs as root', met: false }];
  }
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'chbench-'));
  // The network pool at SERVICE_SANDBOX_POOL's default; each create below finds it refilled
  // (creates spaced apart, as a host sees them); a create from an empty pool is the on-demand path.
  let phase = 'create';
  const steps = new Map<string, number[]>();
  const onStep = (step: string, ms: number) => {
    const key = `${phase}: ${step}`;
    steps.set(key, [...(steps.get(key) ?? []), ms]);
  };
  const provider = createLocalProvider({ root, gatewayPort: 1, poolSize: 2, onStep });
  await provider.check();
  const third = crypto.randomBytes(1)[0];
  const ids: string[] = [];
  try {
    const bare: number[] = [];
    const create: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      // The last create's refills (a link, a volume) done first: neither measurement competes with them.
      await provider.pooled();
      bare.push(await bareBwrap(bwrap));
      const id = `bench-${crypto.randomBytes(5).toString('hex')}`;
      const started = performance.now();
      await provider.create({ id, vcpus: 1, memoryMib: 512, diskGib: 1, image: null, env: {}, network: { hostAddress: `10.212.${third}.${i * 4 + 1}`, sandboxAddress: `10.212.${third}.${i * 4 + 2}`, hostInterface: hostInterfaceName(id) } });
      create.push(performance.now() - started);
      onStep('total', create.at(-1)!);
      ids.push(id);
    }
    const createRatio = median(create) / median(bare);

    // A shell waiting on its stdin in each: what an idle agent process costs, give or take.
    for (const id of ids) await provider.exec(id, { argv: ['/bin/sh', '-c', 'sleep 3600 & wait'] });
    const perSandbox = async () => (await Promise.all(ids.map((id) => provider.memoryBytes(id)))).reduce((a, b) => a + b, 0) / ids.length / 1024;
    const running = await perSandbox();
    for (const id of ids) await provider.sleep(id, 'sleep');
    const sleeping = await perSandbox();
    for (const id of ids) await provider.sleep(id, 'deep');
    const deep = await perSandbox();
    const wake: number[] = [];
    phase = 'wake';
    for (const id of ids) {
      const started = performance.now();
      await provider.wake(id);
      wake.push(performance.now() - started);
      onStep('total', wake.at(-1)!);
    }

    return [
      {
        name: 'local sandbox create vs a bare bubblewrap sandbox',
        lines: [`create (a pooled link named and addressed, the spare volume and /tmp, cgroup, init): median ${median(create).toFixed(1)} ms`, `bare bubblewrap /bin/true: median ${median(bare).toFixed(1)} ms`, `ratio ${createRatio.toFixed(1)}`, `wake from deep sleep (cold start): median ${median(wake).toFixed(1)} ms`,
          // Where the time went: the host side's steps run at once, then the init.
          `steps (medians, ms): ${[...steps].map(([k, v]) => `${k} ${median(v).toFixed(1)}`).join(', ')}`,
        ],
        goal: 'create at most 5x a bare bubblewrap sandbox; wake from deep sleep under 100 ms',
        met: createRatio <= 5 && median(wake) < 100,
      },
      {
        name: 'local sandbox memory on its host (cgroup charge)',
        lines: [`running: ${running.toFixed(0)} KiB per sandbox`, `sleeping (frozen): ${sleeping.toFixed(0)} KiB per sandbox`, `deep sleep: ${deep.toFixed(0)} KiB per sandbox`, `sleeping / running: ${(sleeping / running).toFixed(2)}`],
        // Sleep freezes: memory stays by design (wake is instant); deep sleep is what frees it.
        goal: 'deep sleep holds at most a fifth of a running sandbox',
        met: deep <= running * 0.2,
      },
    ];
  } finally {
    for (const id of ids) await provider.destroy(id).catch(() => {});
    await provider.close();
    fs.rmSync(root, { recursive: true, force: true });
  }
}
