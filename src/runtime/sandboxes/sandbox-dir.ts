/**
 * Where the local provider keeps its sandboxes. bubblewrap runs as an unprivileged user, which
 * must be able to pass through every directory above the sandbox directory; a root user's home
 * (`/root`, mode 0700 on Debian) is closed to it, and that is where a root user naturally clones.
 * When the sandbox directory is the default one (under the data directory) and a directory above
 * it is closed, the sandboxes live under /var/lib/crewhouse instead (one folder per data
 * directory, so two deployments on a machine never share one), and the start says so. A
 * SERVICE_SANDBOX_DIR the operator chose is kept: the local provider then refuses, saying what to do.
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

/** Where the sandboxes go when the default place is closed to the sandbox user. */
export const OPEN_SANDBOX_BASE = '/var/lib/crewhouse';

/** The first existing directory above `dir` that others may not pass through, with its mode; null when all are open. */
export async function closedAbove(dir: string): Promise<{ dir: string; mode: number } | null> {
  for (let d = path.dirname(path.resolve(dir)); ; d = path.dirname(d)) {
    const st = await fs.stat(d).catch(() => null);
    if (st && (st.mode & 0o001) === 0) return { dir: d, mode: st.mode & 0o777 };
    if (d === path.dirname(d)) return null;
  }
}

/** The sandbox directory to use, and a line saying why it moved (null when it did not). */
export async function reachableSandboxDir(config: { dataDir: string; sandboxDir: string | null }, base = OPEN_SANDBOX_BASE): Promise<{ dir: string | null; moved: string | null }> {
  const dir = config.sandboxDir;
  if (!dir || process.getuid?.() !== 0) return { dir, moved: null };
  const isDefault = path.resolve(dir) === path.join(config.dataDir, 'sandboxes');
  const closed = await closedAbove(dir);
  if (!closed || !isDefault) return { dir, moved: null };
  const folder = path.join(base, `sandboxes-${crypto.createHash('sha256').update(path.resolve(dir)).digest('hex').slice(0, 12)}`);
  if (await closedAbove(folder)) return { dir, moved: null };
  await fs.mkdir(base, { recursive: true, mode: 0o711 });
  await fs.chmod(base, 0o711);
  await fs.mkdir(folder, { recursive: true, mode: 0o711 });
  return {
    dir: folder,
    moved: `sandboxes live in ${folder}: ${closed.dir} (above the data directory) is closed to the unprivileged sandbox user (mode ${closed.mode.toString(8).padStart(4, '0')}); set SERVICE_SANDBOX_DIR to choose another place`,
  };
}
