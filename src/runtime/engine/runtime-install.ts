import fs from 'node:fs/promises';
import path from 'node:path';

/** Where the service's own files are: the agent runtime runs from them, read-only, inside a sandbox. */
const ROOT = path.resolve(import.meta.dirname, '../../..');

/**
 * What a `local` sandbox mounts read-only to run the agent runtime: the service's `src` and
 * `node_modules` and its package.json (never the data directory, where keys live), at neutral
 * paths (no host path shows inside).
 */
export const RUNTIME_MOUNTS: ReadonlyArray<{ source: string; target: string }> = [
  { source: path.join(ROOT, 'src'), target: '/opt/crewhouse/src' },
  { source: path.join(ROOT, 'node_modules'), target: '/opt/crewhouse/node_modules' },
  { source: path.join(ROOT, 'package.json'), target: '/opt/crewhouse/package.json' },
];

/** The Node that runs the service, which a `local` sandbox binds execute-only for the runtime (it is then out of its tools' reach). */
export const RUNTIME_NODE = { source: process.execPath, target: '/opt/crewhouse/bin/node' } as const;

/** The agent runtime's command line inside a sandbox. */
export const RUNTIME_ARGV: readonly string[] = [RUNTIME_NODE.target, '/opt/crewhouse/src/agent/main.ts'];

/**
 * What a microVM image carries of the agent runtime (its guest cannot mount the host's files):
 * the runtime's sources (src/agent imports nothing else of ours, the tool catalogue included), the
 * one package it needs, and the package.json that makes them ES modules; absolute sources, targets relative to the image root.
 */
export async function runtimeImageFiles(): Promise<Array<{ source: string; target: string }>> {
  const out: Array<{ source: string; target: string }> = [];
  const walk = async (dir: string, skip: (name: string) => boolean) => {
    for (const e of await fs.readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) await walk(full, skip);
      else if (e.isFile() && !skip(e.name)) out.push({ source: full, target: path.join('opt/crewhouse', path.relative(ROOT, full)) });
    }
  };
  await walk(path.join(ROOT, 'src/agent'), (name) => name.endsWith('.test.ts'));
  await walk(path.join(ROOT, 'node_modules/typebox'), () => false);
  out.push({ source: path.join(ROOT, 'package.json'), target: 'opt/crewhouse/package.json' });
  return out;
}

/** The agent runtime's command line inside a microVM: the image's own Node and the runtime it carries. */
export const MICROVM_RUNTIME_ARGV: readonly string[] = ['/opt/crewhouse/node', '/opt/crewhouse/src/agent/main.ts'];
