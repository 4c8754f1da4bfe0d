#!/usr/bin/env node
// Runs src/main.ts on a Node that strips TypeScript types (23.6+): this one, or the node@24
// the package installs as a dev dependency.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const [major, minor] = process.versions.node.split('.').map(Number);
const local = path.join(root, 'node_modules', 'node', 'bin', 'node');
const node = major > 23 || (major === 23 && minor >= 6) || !existsSync(local) ? process.execPath : local;
const result = spawnSync(node, [path.join(root, 'src', 'main.ts'), ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(result.status ?? 1);
