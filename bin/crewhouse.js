#!/usr/bin/env node
// Runs src/main.ts on a Node that strips TypeScript types (23.6+): this one, or the node@24
// the package installs as a dev dependency, with the V8 flags of node-flags.json: WebAssembly
// compiled once by the baseline compiler (the optimising tier held about 80 MB for good and
// half a gigabyte while it worked on the embedded database's engine) and a small young
// generation. package.json's start and crewhouse scripts pass the same flags.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const [major, minor] = process.versions.node.split('.').map(Number);
const local = path.join(root, 'node_modules', 'node', 'bin', 'node');
const node = major > 23 || (major === 23 && minor >= 6) || !existsSync(local) ? process.execPath : local;
const flags = JSON.parse(readFileSync(path.join(root, 'bin', 'node-flags.json'), 'utf8'));
const result = spawnSync(node, [...flags, path.join(root, 'src', 'main.ts'), ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(result.status ?? 1);
