import { Type, type Static } from 'typebox';

export const SKILL_NAME_PATTERN = '^[a-z0-9]+(-[a-z0-9]+)*$';
/** What SKILL_NAME_PATTERN allows, in words. */
export const SKILL_NAME_WORDS = 'words of lowercase letters and digits joined by single "-"';
export const SKILL_NAME_MAX = 64;
export const SKILL_FILE_MAX_BYTES = 64 * 1024;
export const SKILL_MAX_FILES = 20;
export const SKILL_TOTAL_MAX_BYTES = 256 * 1024;
export const CATALOGUE_MAX_BYTES = 768 * 1024;

export const SkillSummary = Type.Object({
  name: Type.String(),
  description: Type.String({ description: 'from the front matter of SKILL.md' }),
  size_bytes: Type.Integer({ description: 'SKILL.md and every file, in bytes' }),
  revision: Type.Integer({ description: 'the catalogue revision the skill was last written at' }),
  files: Type.Array(Type.String(), { description: 'paths of the resource files (SKILL.md not included)' }),
  updated_at: Type.String(),
});

export const Skill = Type.Object({
  name: Type.String(),
  description: Type.String(),
  size_bytes: Type.Integer(),
  revision: Type.Integer(),
  resources: Type.Record(Type.String(), Type.String(), { description: 'relative path to text' }),
  created_at: Type.String(),
  updated_at: Type.String(),
  body: Type.String({ description: 'the text of SKILL.md' }),
});
export type Skill = Static<typeof Skill>;

// The schema bounds are loose on purpose: the skill rules (64 KiB, 20 files, 256 KiB) answer
// 422 naming the rule, the schema only keeps out what is not a skill at all.
export const SkillPut = Type.Object(
  {
    body: Type.String({ maxLength: 4 * SKILL_FILE_MAX_BYTES, description: 'SKILL.md: at most 64 KiB, front matter with name (the path name) and description' }),
    resources: Type.Optional(
      Type.Record(Type.String({ maxLength: 1024 }), Type.String({ maxLength: 4 * SKILL_FILE_MAX_BYTES }), {
        maxProperties: 100,
        description: 'relative path (not SKILL.md, no ..) to text; at most 64 KiB each, 20 files, 256 KiB in total with SKILL.md',
      }),
    ),
  },
  { additionalProperties: false },
);
export type SkillPut = Static<typeof SkillPut>;

export const SkillParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }) });
