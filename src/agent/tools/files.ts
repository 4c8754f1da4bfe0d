import fs from 'node:fs/promises';
import path from 'node:path';
import { assertWritable, clip, resolvePath, ToolFailure, type ToolContext } from './context.ts';

const MAX_READ_BYTES = 8 * 1024 * 1024;

async function statOrFail(p: string) {
  try {
    return await fs.stat(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new ToolFailure(`${p} does not exist`);
    throw err;
  }
}

export async function readFile(ctx: ToolContext, a: { path: string; offset?: number; limit?: number }): Promise<string> {
  const p = resolvePath(ctx, a.path);
  const st = await statOrFail(p);
  if (st.isDirectory()) throw new ToolFailure(`${p} is a directory; use list_files`);
  if (st.size > MAX_READ_BYTES) throw new ToolFailure(`${p} is ${st.size} bytes; read it in parts with shell (head, sed -n) instead`);
  const text = await fs.readFile(p, 'utf8');
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const first = (a.offset ?? 1) - 1;
  const slice = lines.slice(first, a.limit ? first + a.limit : undefined);
  const width = String(first + slice.length).length;
  const body = slice.map((l, i) => `${String(first + i + 1).padStart(width, ' ')}\t${l}`).join('\n');
  const more = first + slice.length < lines.length ? `\n[${lines.length - first - slice.length} more lines]` : '';
  return clip(body + more) || '(empty file)';
}

export async function writeFile(ctx: ToolContext, a: { path: string; content: string }): Promise<string> {
  const p = resolvePath(ctx, a.path);
  assertWritable(ctx, p);
  await fs.mkdir(path.dirname(p), { recursive: true });
  await fs.writeFile(p, a.content);
  return `wrote ${Buffer.byteLength(a.content)} bytes to ${p}`;
}

export async function editFile(ctx: ToolContext, a: { path: string; old_text: string; new_text: string; replace_all?: boolean }): Promise<string> {
  const p = resolvePath(ctx, a.path);
  assertWritable(ctx, p);
  await statOrFail(p);
  const text = await fs.readFile(p, 'utf8');
  const count = text.split(a.old_text).length - 1;
  if (count === 0) throw new ToolFailure(`old_text does not occur in ${p}; nothing changed`);
  if (count > 1 && !a.replace_all) throw new ToolFailure(`old_text occurs ${count} times in ${p}; give more context or set replace_all; nothing changed`);
  const next = a.replace_all ? text.split(a.old_text).join(a.new_text) : text.replace(a.old_text, () => a.new_text);
  await fs.writeFile(p, next);
  return `replaced ${a.replace_all ? count : 1} occurrence(s) in ${p}`;
}

export async function deleteFile(ctx: ToolContext, a: { path: string }): Promise<string> {
  const p = resolvePath(ctx, a.path);
  assertWritable(ctx, p);
  const st = await statOrFail(p);
  if (st.isDirectory()) await fs.rmdir(p).catch((err: NodeJS.ErrnoException) => {
    throw err.code === 'ENOTEMPTY' ? new ToolFailure(`${p} is a directory that is not empty`) : err;
  });
  else await fs.unlink(p);
  return `deleted ${p}`;
}

export async function moveFile(ctx: ToolContext, a: { from: string; to: string }): Promise<string> {
  const from = resolvePath(ctx, a.from);
  const to = resolvePath(ctx, a.to);
  assertWritable(ctx, from);
  assertWritable(ctx, to);
  await statOrFail(from);
  await fs.mkdir(path.dirname(to), { recursive: true });
  await fs.rename(from, to);
  return `moved ${from} to ${to}`;
}

/** Walks a tree (skipping .git), yielding paths relative to `root`, directories with a trailing slash. */
async function* walk(root: string, recursive: boolean, rel = ''): AsyncGenerator<string> {
  const entries = await fs.readdir(path.join(root, rel), { withFileTypes: true });
  entries.sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  for (const e of entries) {
    if (e.name === '.git') continue;
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) {
      yield `${r}/`;
      if (recursive) yield* walk(root, recursive, r);
    } else yield r;
  }
}

export async function listFiles(ctx: ToolContext, a: { path?: string; recursive?: boolean; glob?: string; max_entries?: number }): Promise<string> {
  const root = resolvePath(ctx, a.path);
  const st = await statOrFail(root);
  if (!st.isDirectory()) throw new ToolFailure(`${root} is not a directory`);
  const max = a.max_entries ?? 500;
  const out: string[] = [];
  let more = false;
  for await (const r of walk(root, a.recursive ?? Boolean(a.glob))) {
    if (a.glob && (r.endsWith('/') || !path.matchesGlob(r, a.glob))) continue;
    if (out.length >= max) {
      more = true;
      break;
    }
    out.push(r);
  }
  if (!out.length) return `${root}: nothing${a.glob ? ` matches ${a.glob}` : ''}`;
  return `${root}:\n${out.join('\n')}${more ? `\n[stopped at ${max} entries]` : ''}`;
}

export async function search(
  ctx: ToolContext,
  a: { pattern: string; path?: string; glob?: string; fixed?: boolean; case_sensitive?: boolean; max_results?: number },
): Promise<string> {
  const root = resolvePath(ctx, a.path);
  const st = await statOrFail(root);
  let re: RegExp;
  try {
    const source = a.fixed ? a.pattern.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') : a.pattern;
    re = new RegExp(source, a.case_sensitive === false ? 'i' : '');
  } catch (err) {
    throw new ToolFailure(`the pattern is not a valid regular expression: ${(err as Error).message}`);
  }
  const max = a.max_results ?? 200;
  const hits: string[] = [];
  const files: string[] = [];
  if (st.isDirectory()) {
    for await (const r of walk(root, true)) if (!r.endsWith('/') && (!a.glob || path.matchesGlob(r, a.glob))) files.push(r);
  } else files.push('');
  outer: for (const r of files) {
    const full = r ? path.join(root, r) : root;
    const fst = await fs.stat(full).catch(() => null);
    if (!fst || fst.size > MAX_READ_BYTES) continue;
    const buf = await fs.readFile(full);
    if (buf.subarray(0, 8000).includes(0)) continue;
    const lines = buf.toString('utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      if (!re.test(lines[i])) continue;
      if (hits.length >= max) {
        hits.push(`[stopped at ${max} results]`);
        break outer;
      }
      hits.push(`${r || path.basename(root)}:${i + 1}: ${lines[i].slice(0, 500)}`);
    }
  }
  return hits.length ? clip(hits.join('\n')) : 'no match';
}
