import type { Image } from './environments.schemas.ts';

/**
 * Agent image build manifests: one JSON file per build in SERVICE_IMAGES_DIR, written by the
 * image build next to the files it names:
 *
 *   { "name": "crewhouse-agent", "version": "2025.06.1",
 *     "kernel": { "file": "vmlinux-2025.06.1", "sha256": "<64 hex>" },
 *     "rootfs": { "file": "rootfs-2025.06.1.ext4", "sha256": "<64 hex>" },
 *     "built_at": "2025-06-01T12:00:00Z" }
 *
 * `file` is relative to the directory. The newest `built_at` is the current image: what a
 * microVM boots. A manifest that does not parse is skipped and logged, never served.
 */
export type Manifest = Omit<Image, 'current' | 'manifest'>;

const SHA256 = /^[0-9a-f]{64}$/;
const SAFE_FILE = /^(?!\.\.?$)[A-Za-z0-9._+-]{1,200}$/;
const TEXT = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$/;

/** Checks one parsed manifest; answers the problem or null. */
export function manifestProblem(m: unknown): string | null {
  const o = m as Record<string, unknown>;
  if (!o || typeof o !== 'object' || Array.isArray(o)) return 'is not an object';
  for (const k of ['name', 'version'] as const) if (typeof o[k] !== 'string' || !TEXT.test(o[k] as string)) return `${k} must be a short name`;
  for (const k of ['kernel', 'rootfs'] as const) {
    const f = o[k] as Record<string, unknown> | undefined;
    if (!f || typeof f !== 'object') return `${k} is missing`;
    if (typeof f.file !== 'string' || !SAFE_FILE.test(f.file)) return `${k}.file must be a file name in the images directory`;
    if (typeof f.sha256 !== 'string' || !SHA256.test(f.sha256)) return `${k}.sha256 must be 64 lowercase hex digits`;
  }
  if (typeof o.built_at !== 'string' || Number.isNaN(Date.parse(o.built_at))) return 'built_at must be a timestamp';
  return null;
}
