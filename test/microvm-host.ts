// A sandbox host in a process of its own, for the host-death tests: creates one microVM sandbox
// from the spec in argv[2] (JSON) with a process left running in it, says "ready" once it
// answers, then waits to be killed -9. With `stopAt`, it then puts the sandbox to sleep (or
// wakes it, with `verb: 'wake'`) and stops at that step (saying "at <step>"), as a host killed
// there would.
import { createLogger } from '../src/logger.ts';
import { createMicrovmProvider, type LifecycleStep } from '../src/runtime/sandboxes/providers/microvm/index.ts';

const { dir, imagesDir, spec, create = true, stopAt, verb = 'sleep' } = JSON.parse(process.argv[2]) as { dir: string; imagesDir: string; spec: never; create?: boolean; stopAt?: LifecycleStep; verb?: 'sleep' | 'wake' };
setInterval(() => {}, 1 << 30);
const provider = createMicrovmProvider({
  dir,
  imagesDir,
  logger: createLogger({ level: 'warn' }),
  snapshotBudgetBytes: 8 * 1024 ** 3,
  accel: 'tcg',
  onStep: async (_id, step) => {
    if (step !== stopAt) return;
    process.stdout.write(`at ${step}\n`);
    await new Promise(() => {});
  },
});
const id = (spec as { id: string }).id;
if (create) {
  await provider.create(spec);
  const h = await provider.exec(id, { argv: ['sh', '-c', 'sleep 100000 >/dev/null 2>&1 & echo $! > /workspace/bg.pid; sync'] });
  h.stdin.end();
  h.stdout.resume();
  h.stderr.resume();
  await h.exit;
}
process.stdout.write('ready\n');
if (stopAt) await (verb === 'wake' ? provider.wake(id) : provider.sleep(id, 'sleep'));
