import path from 'node:path';

/** Where the service's own files are: the agent runtime runs from them, read-only, inside a sandbox. */
const ROOT = path.resolve(import.meta.dirname, '../../..');
const NODE_DIR = path.dirname(process.execPath);

/**
 * What a `local` sandbox mounts read-only to run the agent runtime: the service's `src` and
 * `node_modules` and its package.json (never the data directory, where keys live), and the
 * directory of the Node that runs the service.
 */
export const RUNTIME_MOUNTS: ReadonlyArray<{ source: string; target: string }> = [
  { source: path.join(ROOT, 'src'), target: '/opt/crewhouse/src' },
  { source: path.join(ROOT, 'node_modules'), target: '/opt/crewhouse/node_modules' },
  { source: path.join(ROOT, 'package.json'), target: '/opt/crewhouse/package.json' },
  { source: NODE_DIR, target: '/opt/crewhouse-node' },
];

/** The agent runtime's command line inside a sandbox. */
export const RUNTIME_ARGV: readonly string[] = [`/opt/crewhouse-node/${path.basename(process.execPath)}`, '/opt/crewhouse/src/agent/main.ts'];
