import type { Json, RowVersion, Timestamp } from '../../db/columns.ts';

export type McpAuth = 'none' | 'bearer' | 'header';
export type McpStatus = 'curated' | 'proposed';

export interface McpServersTables {
  mcp_servers: {
    /** '' for a platform server, else the team's name. */
    team_key: string;
    name: string;
    url: string;
    destination: string;
    auth: McpAuth;
    /** The request header the credential goes in, for `auth: header`. */
    auth_header: string | null;
    /** `secret:<name>`, or null for `auth: none`. */
    secret: string | null;
    roles: Json<string[]>;
    status: McpStatus;
    proposed_by: string | null;
    created_by: string;
    updated_by: string;
    created_at: Timestamp;
    updated_at: Timestamp;
    row_version: RowVersion;
  };
}
