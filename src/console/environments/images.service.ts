import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { pageOfList } from '../../db/pagination.ts';
import type { Image } from './environments.schemas.ts';
import { manifestProblem, type Manifest } from './manifest.ts';

export function createImagesService(deps: { dir: string; logger: Logger }) {
  async function read(): Promise<Image[]> {
    let files: string[];
    try {
      files = (await fs.readdir(deps.dir)).filter((f) => f.endsWith('.json')).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const out: Image[] = [];
    for (const file of files) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(await fs.readFile(path.join(deps.dir, file), 'utf8'));
      } catch {
        deps.logger.warn({ manifest: file }, 'image manifest skipped: not JSON');
        continue;
      }
      const problem = manifestProblem(parsed);
      if (problem) {
        deps.logger.warn({ manifest: file, problem }, 'image manifest skipped');
        continue;
      }
      const m = parsed as Manifest;
      out.push({
        name: m.name,
        version: m.version,
        kernel: { file: m.kernel.file, sha256: m.kernel.sha256 },
        rootfs: { file: m.rootfs.file, sha256: m.rootfs.sha256 },
        built_at: new Date(m.built_at).toISOString(),
        current: false,
        manifest: file,
      });
    }
    out.sort((a, b) => (a.built_at !== b.built_at ? (a.built_at < b.built_at ? 1 : -1) : a.manifest < b.manifest ? -1 : 1));
    if (out[0]) out[0].current = true;
    return out;
  }

  return {
    /** Every valid build, newest first. */
    all: read,
    /** The current image (the newest build), or null when there is none. */
    async current(): Promise<Image | null> {
      return (await read())[0] ?? null;
    },
    async list(query: { limit: number; cursor?: string }) {
      // A cursor naming no build is a 400 (it started the list again from the newest build).
      return pageOfList(await read(), (i) => [i.manifest], (i) => i, query);
    },
  };
}

export type ImagesService = ReturnType<typeof createImagesService>;
