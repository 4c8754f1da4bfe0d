import type { Json, RowVersion, Timestamp } from '../../db/columns.ts';
import type { TemplateContent } from './templates.schemas.ts';

export interface TemplatesTables {
  team_templates: {
    name: string;
    description: string;
    current_version: number;
    created_at: Timestamp;
    updated_at: Timestamp;
    row_version: RowVersion;
  };
  team_template_versions: {
    template_name: string;
    version: number;
    note: string;
    created_by: string;
    created_at: Timestamp;
    content: Json<TemplateContent>;
    content_sha256: string;
  };
  team_template_version_roles: {
    template_name: string;
    version: number;
    role: string;
    agent: string;
    environment: string;
    mcp_servers: string[];
    skills: string[];
  };
}
