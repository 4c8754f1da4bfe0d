// A sandbox host in a process of its own, for the host-death test: creates one microVM sandbox
// from the spec in argv[2] (JSON), says "ready" once it answers, then waits to be killed -9.
import { createLogger } from '../src/logger.ts';
import { createMicrovmProvider } from '../src/runtime/sandboxes/providers/microvm/index.ts';

const { dir, imagesDir, spec } = JSON.parse(process.argv[2]);
const provider = createMicrovmProvider({ dir, imagesDir, logger: createLogger({ level: 'warn' }), snapshotBudgetBytes: 8 * 1024 ** 3, accel: 'tcg' });
await provider.create(spec);
const h = await provider.exec(spec.id, { argv: ['true'] });
await h.exit;
process.stdout.write('ready\n');
setInterval(() => {}, 1 << 30);
