import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ImportRepository } from '../../config.ts';
import { problems } from '../../errors/problems.ts';
import type { CodeHostApp } from '../../integrations/code_host/app.ts';

/** Git is looked up on the system's own path, not on whatever PATH the service was started with. */
const SYSTEM_PATH = '/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The folders of the layout (docs/import.md); nothing else of the repository is read. */
export const LAYOUT_DIRS = ['agents', 'templates', 'policies', 'skills'] as const;
/** Larger files are refused, whatever their kind: no definition comes near it. */
export const FILE_MAX_BYTES = 512 * 1024;
const TOTAL_MAX_BYTES = 16 * 1024 * 1024;
const GIT_TIMEOUT_MS = 120_000;

/** What was read: the commit (null for a directory that is not a git checkout) and the layout's files by path. */
export interface Snapshot {
  commit: string | null;
  files: Map<string, string>;
  /** Files that could not be taken (a symbolic link, too large, not text), with why. */
  refused: Array<{ file: string; message: string }>;
}

export interface RepositoryDeps {
  /** The code host app when the integration is on, to fetch with an installation token. */
  codeHostApp(): Promise<CodeHostApp | null>;
  /** The plaintext of a stored secret (the deploy key), or null. */
  revealSecret(name: string): Promise<string | null>;
}

/** The repository cannot be read as configured: 422 naming it. */
const notReadable = (detail: string) => problems.validation([{ field: 'repository', message: detail }], detail);

const inLayout = (p: string) => LAYOUT_DIRS.some((d) => p.startsWith(`${d}/`));

function addFile(snap: Snapshot, file: string, bytes: Buffer, total: { n: number }) {
  if (bytes.length > FILE_MAX_BYTES) return void snap.refused.push({ file, message: `is ${bytes.length} bytes; a file of the repository may hold at most ${FILE_MAX_BYTES}` });
  total.n += bytes.length;
  if (total.n > TOTAL_MAX_BYTES) throw notReadable(`the configuration repository's agents/, templates/, policies/ and skills/ hold more than ${TOTAL_MAX_BYTES / 1024 / 1024} MiB; that is not a set of definitions`);
  const text = bytes.toString('utf8');
  if (text.includes('\u0000') || !Buffer.from(text, 'utf8').equals(bytes)) return void snap.refused.push({ file, message: 'is not UTF-8 text' });
  snap.files.set(file, text);
}

/** A local directory: every regular file under the layout's folders; symbolic links are refused, not followed. */
async function readDirectory(root: string): Promise<Snapshot> {
  const snap: Snapshot = { commit: null, files: new Map(), refused: [] };
  if (!fs.existsSync(root) || !fs.statSync(root).isDirectory()) {
    throw notReadable(`the configuration repository ${root} is not a directory on the console's machine; check SERVICE_IMPORT_REPOSITORY`);
  }
  const total = { n: 0 };
  const walk = (rel: string) => {
    for (const entry of fs.readdirSync(path.join(root, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isSymbolicLink()) snap.refused.push({ file: p, message: 'is a symbolic link; only regular files are imported' });
      else if (entry.isDirectory()) walk(p);
      else if (entry.isFile()) addFile(snap, p, fs.readFileSync(path.join(root, p)), total);
    }
  };
  for (const d of LAYOUT_DIRS) if (fs.existsSync(path.join(root, d)) && !fs.lstatSync(path.join(root, d)).isSymbolicLink()) walk(d);
  snap.commit = await new Promise<string | null>((resolve) =>
    execFile('git', ['-C', root, 'rev-parse', '--verify', '-q', 'HEAD'], { env: { PATH: SYSTEM_PATH, GIT_CONFIG_NOSYSTEM: '1', HOME: root }, timeout: 10_000 }, (err, out) => resolve(err ? null : out.trim() || null)),
  );
  return snap;
}

/** `owner/repo` of an https URL on the code host's web host, or null. */
function codeHostRepository(url: string, app: CodeHostApp): string | null {
  let u: URL;
  let api: URL;
  try {
    u = new URL(url);
    api = new URL(app.apiUrl);
  } catch {
    return null;
  }
  // github.com beside api.github.com; an enterprise server's API is on its own host (/api/v3).
  const apiHost = api.hostname.replace(/^api\./, '');
  if (u.protocol !== 'https:' || (u.hostname !== api.hostname && u.hostname !== apiHost)) return null;
  const m = /^\/([^/]+)\/([^/]+?)(?:\.git)?\/?$/.exec(u.pathname);
  return m ? `${m[1]}/${m[2]}` : null;
}

/** Runs git with `env`; a failure is a 422 in words, with git's own last line (which holds no credential: they go in headers and files, never the URL). */
function git(args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), GIT_TIMEOUT_MS);
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve(Buffer.concat(out));
      const last = err.split('\n').map((l) => l.trim()).filter(Boolean).pop() ?? (signal ? `stopped after ${GIT_TIMEOUT_MS / 1000} seconds` : `exit status ${code}`);
      reject(new GitError(last));
    });
    child.stdin.on('error', () => {});
    child.stdin.end(input ?? '');
  });
}

class GitError extends Error {}

/** A git repository: the ref fetched (shallow) into a temporary folder, the layout's blobs read from its tree. */
async function readGit(source: Extract<ImportRepository, { kind: 'git' }>, deps: RepositoryDeps): Promise<Snapshot> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-import-'));
  try {
    const config: Array<[string, string]> = [['protocol.allow', 'never'], ['protocol.https.allow', 'always'], ['protocol.http.allow', 'always'], ['protocol.ssh.allow', 'always']];
    if (source.caFile) config.push(['http.sslCAInfo', source.caFile]);
    const app = await deps.codeHostApp().catch(() => null);
    const onCodeHost = app ? codeHostRepository(source.url, app) : null;
    if (app && onCodeHost) {
      const { token } = await app.installationToken({ repositories: [onCodeHost] }).catch((err: Error) => {
        throw notReadable(`the code host gave no token to read ${onCodeHost}: ${err.message}. Check that the app's installation covers the configuration repository`);
      });
      config.push(['http.extraHeader', `Authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`]);
    }
    const env: NodeJS.ProcessEnv = {
      PATH: SYSTEM_PATH,
      HOME: tmp,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_TERMINAL_PROMPT: '0',
      GIT_ASKPASS: 'true',
      SSH_ASKPASS: 'true',
      GIT_CONFIG_COUNT: String(config.length),
      ...Object.fromEntries(config.flatMap(([k, v], i) => [[`GIT_CONFIG_KEY_${i}`, k], [`GIT_CONFIG_VALUE_${i}`, v]])),
    };
    if (source.deployKeySecret) {
      const key = await deps.revealSecret(source.deployKeySecret);
      if (key === null) throw notReadable(`the deploy key secret "${source.deployKeySecret}" (SERVICE_IMPORT_DEPLOY_KEY) has no value; write it with PUT /secrets/${source.deployKeySecret}`);
      const keyFile = path.join(tmp, 'deploy-key');
      fs.writeFileSync(keyFile, key.endsWith('\n') ? key : `${key}\n`, { mode: 0o600 });
      env.GIT_SSH_COMMAND = `ssh -i ${keyFile} -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=${path.join(tmp, 'known_hosts')}`;
    }
    const repo = path.join(tmp, 'repo');
    try {
      await git(['init', '-q', '--bare', repo], env);
      await git(['-C', repo, 'fetch', '-q', '--depth', '1', '--no-tags', '--', source.url, source.ref], env);
    } catch (err) {
      if (!(err instanceof GitError)) throw err;
      throw problems.badGateway(`the configuration repository could not be fetched (ref ${source.ref}): ${err.message}. Check SERVICE_IMPORT_REPOSITORY and SERVICE_IMPORT_REF, and that the console may read the repository`);
    }
    const commit = (await git(['-C', repo, 'rev-parse', 'FETCH_HEAD^{commit}'], env)).toString('utf8').trim();
    const listing = (await git(['-C', repo, 'ls-tree', '-r', '-z', '-l', commit, '--', ...LAYOUT_DIRS], env)).toString('utf8');
    const snap: Snapshot = { commit, files: new Map(), refused: [] };
    const blobs: Array<{ file: string; sha: string }> = [];
    for (const entry of listing.split('\0').filter(Boolean)) {
      const tab = entry.indexOf('\t');
      const [mode, type, sha, size] = entry.slice(0, tab).split(/\s+/);
      const file = entry.slice(tab + 1);
      if (!inLayout(file)) continue;
      if (mode === '120000') snap.refused.push({ file, message: 'is a symbolic link; only regular files are imported' });
      else if (type !== 'blob') snap.refused.push({ file, message: 'is a submodule; only regular files are imported' });
      else if (Number(size) > FILE_MAX_BYTES) snap.refused.push({ file, message: `is ${size} bytes; a file of the repository may hold at most ${FILE_MAX_BYTES}` });
      else blobs.push({ file, sha });
    }
    const total = { n: 0 };
    if (blobs.length) {
      // One `cat-file --batch`: each answer is "<sha> blob <size>\n<bytes>\n".
      const out = await git(['-C', repo, 'cat-file', '--batch'], env, blobs.map((b) => b.sha).join('\n') + '\n');
      let at = 0;
      for (const b of blobs) {
        const nl = out.indexOf(10, at);
        const size = Number(out.subarray(at, nl).toString('latin1').split(' ')[2]);
        addFile(snap, b.file, out.subarray(nl + 1, nl + 1 + size), total);
        at = nl + 1 + size + 1;
      }
    }
    return snap;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** Reads the configured repository; 422 in words when none is set or it cannot be read. */
export async function readRepository(source: ImportRepository | null, deps: RepositoryDeps): Promise<Snapshot> {
  if (!source) throw notReadable('no configuration repository is set: set SERVICE_IMPORT_REPOSITORY (a git URL or a directory) on the console and restart it');
  return source.kind === 'directory' ? readDirectory(source.path) : readGit(source, deps);
}
