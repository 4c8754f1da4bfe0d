import type { Json, RowVersion, Timestamp } from '../../db/columns.ts';
import type { Egress } from '../../egress/setting.ts';

export type ConfirmationPolicy = 'never_confirm' | 'confirm_risky';

export type { Egress };

export interface AgentsTables {
  agents: {
    name: string;
    display_name: string | null;
    kind: string | null;
    description: string;
    current_version: number;
    created_by: string;
    created_at: Timestamp;
    updated_at: Timestamp;
    row_version: RowVersion;
  };
  agent_versions: {
    agent_name: string;
    version: number;
    note: string;
    created_by: string;
    created_at: Timestamp;
    system_prompt: string;
    tools: Json<string[]>;
    confirmation_policy: ConfirmationPolicy;
    produces_branch: boolean;
    works_on_branch: boolean | null;
    skills: Json<string[]>;
    mcp_servers: Json<string[]>;
    egress: Json<Egress>;
    context: Json<Array<Record<string, unknown>>>;
    model: string | null;
    environment: string | null;
  };
  agent_avatars: {
    agent_name: string;
    media_type: string;
    bytes: Uint8Array;
    size_bytes: number;
    updated_at: Timestamp;
    row_version: RowVersion;
  };
}
