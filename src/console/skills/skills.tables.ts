import type { Generated, Json, RowVersion, Timestamp } from '../../db/columns.ts';

export interface SkillsTables {
  platform_skills: {
    name: string;
    description: string;
    body: string;
    resources: Json<Record<string, string>>;
    size_bytes: number;
    revision: number;
    /** Written through the API since the last repository import: an import does not overwrite it without forcing. */
    api_edited: Generated<boolean>;
    source: Generated<'api' | 'import'>;
    created_at: Timestamp;
    updated_at: Timestamp;
    row_version: RowVersion;
  };
  /** Skills deleted through the API; the next import restores one whose file still exists. */
  platform_skill_tombstones: {
    name: string;
    revision: number;
    deleted_by: string;
    deleted_at: Timestamp;
  };
}
