import { parse as parseYaml } from 'yaml';
import type { FieldProblem } from '../../errors/problems.ts';
import { SKILL_FILE_MAX_BYTES, SKILL_MAX_FILES, SKILL_NAME_MAX, SKILL_NAME_PATTERN, SKILL_NAME_WORDS, SKILL_TOTAL_MAX_BYTES } from './skills.schemas.ts';

const NAME = new RegExp(SKILL_NAME_PATTERN);
const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;
const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

export const isSkillName = (name: string) => name.length <= SKILL_NAME_MAX && NAME.test(name);

/** The front matter of a SKILL.md: the YAML between a leading `---` line and the next `---` line. */
export function frontMatter(body: string): Record<string, unknown> | null {
  const m = /^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/.exec(body.replace(/^\uFEFF/, ''));
  if (!m) return null;
  try {
    const parsed = parseYaml(m[1]);
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Why a resource path is not acceptable, or null. */
export function resourcePathProblem(path: string): string | null {
  if (path.startsWith('/') || /^[A-Za-z]:/.test(path)) return 'must be a relative path';
  if (path.includes('\\')) return 'must use / between segments';
  const segments = path.split('/');
  if (segments.includes('..')) return 'must not contain ..';
  if (segments.some((s) => s === '' || s === '.')) return 'must not have empty or . segments';
  if (path === 'SKILL.md') return 'SKILL.md is the body, not a resource file';
  if (path.length > 255 || !segments.every((s) => SEGMENT.test(s))) return 'segments hold letters, digits, ., _ and - (not starting with . or -), at most 255 characters in all';
  return null;
}

/**
 * Rules 1 to 3 of a platform skill: the name, SKILL.md and its front matter, the files. Answers
 * the description, the size, and the problems (each naming its field).
 */
export function checkSkill(name: string, body: string, resources: Record<string, string>) {
  const errors: FieldProblem[] = [];
  if (!isSkillName(name)) errors.push({ field: 'name', message: `must be ${SKILL_NAME_WORDS}, at most ${SKILL_NAME_MAX} characters` });
  if (bytes(body) > SKILL_FILE_MAX_BYTES) errors.push({ field: 'body', message: `SKILL.md is ${bytes(body)} bytes; at most ${SKILL_FILE_MAX_BYTES}` });
  if (body.includes('\u0000')) errors.push({ field: 'body', message: 'must be text (no NUL characters)' });
  const fm = frontMatter(body);
  let description = '';
  if (!fm) errors.push({ field: 'body', message: 'SKILL.md must start with YAML front matter between --- lines' });
  else {
    if (fm.name !== name) errors.push({ field: 'body', message: `front matter name must be "${name}" (the name in the path)` });
    if (typeof fm.description !== 'string' || fm.description.trim() === '') errors.push({ field: 'body', message: 'front matter needs a description' });
    // An escape ("\0") in the YAML makes the character the body itself does not hold; the description is stored as text.
    else if (fm.description.includes('\u0000')) errors.push({ field: 'body', message: 'front matter description must not contain a NUL character' });
    else description = fm.description.trim();
  }
  const paths = Object.keys(resources);
  if (paths.length > SKILL_MAX_FILES) errors.push({ field: 'resources', message: `${paths.length} files; at most ${SKILL_MAX_FILES}` });
  let total = bytes(body);
  for (const path of paths) {
    const text = resources[path];
    const problem = resourcePathProblem(path);
    if (problem) errors.push({ field: `resources.${path}`, message: problem });
    if (text.includes('\u0000')) errors.push({ field: `resources.${path}`, message: 'must be text (no NUL characters)' });
    if (bytes(text) > SKILL_FILE_MAX_BYTES) errors.push({ field: `resources.${path}`, message: `is ${bytes(text)} bytes; at most ${SKILL_FILE_MAX_BYTES}` });
    total += bytes(text);
  }
  if (total > SKILL_TOTAL_MAX_BYTES) errors.push({ field: 'resources', message: `SKILL.md and its files are ${total} bytes; at most ${SKILL_TOTAL_MAX_BYTES} in total` });
  return { description, size: total, errors };
}
