import type { ColumnType } from 'kysely';
import type { Generated, NullableTimestamp, RowVersion, Timestamp } from '../../db/columns.ts';
import type { Egress } from '../../egress/setting.ts';
import type { Sealed } from '../../secrets/cipher.ts';
import type { MemoryInput } from '../templates/templates.schemas.ts';

/** A jsonb column with a default: written as JSON text or left out. */
type JsonDefault<T> = ColumnType<T, string | undefined, string>;
/** A text[] column with a default. */
type TextArray = ColumnType<string[], string[] | undefined, string[]>;

export type TeamStatus = 'provisioning' | 'active' | 'archived';
export type HomeSurface = 'chat_a' | 'chat_b' | 'console' | 'none';

export interface TeamsTables {
  teams: {
    id: Generated<number>;
    name: string;
    status: TeamStatus;
    template_name: string;
    template_version: number | null;
    template_hash: string;
    lead: string;
    home_surface: HomeSurface;
    home_room_id: string | null;
    home_room_label: string | null;
    repo_url: string | null;
    budget_usd_per_day: number;
    idle_after_seconds: number;
    deep_sleep_after_seconds: number;
    isolation: 'shared' | 'dedicated';
    rework_rounds: number;
    memory: JsonDefault<MemoryInput>;
    manual_fields: TextArray;
    created_by: string;
    created_at: Timestamp;
    updated_at: Timestamp;
    archived_at: NullableTimestamp;
    archiving_at: NullableTimestamp;
    row_version: RowVersion;
  };
  team_roles: {
    team_id: number;
    role: string;
    agent: string;
    model: string;
    vm: string;
    profile: string;
    provider: string | null;
    checkpoint_id: string | null;
    replicas_max: number;
    concurrent_runs: number;
    max_iterations: number | null;
    confirmation_policy: 'never_confirm' | 'confirm_risky' | null;
    memory: JsonDefault<MemoryInput>;
    max_budget: number | null;
    budget_duration: string | null;
    rpm_limit: number | null;
    tpm_limit: number | null;
    pipeline_next_role: string | null;
    skills: TextArray;
    mcp_servers: TextArray;
    manual_fields: TextArray;
    egress_override: JsonDefault<Egress | null>;
    proxy_key_id: ColumnType<string | null, string | null | undefined, string | null>;
    proxy_key: JsonDefault<Sealed | null>;
    row_version: RowVersion;
  };
  team_members: {
    team_id: number;
    user_id: number;
    role: string;
    created_at: Timestamp;
  };
  team_links: {
    team_id: number;
    surface: string;
    external_id: string;
    label: string;
    verification: 'verified' | 'unverified' | 'not_applicable';
    created_at: Timestamp;
  };
  team_skills: {
    team_id: number;
    name: string;
    version: number;
    status: 'curated' | 'proposed';
    source: string;
    body: string;
    updated_at: Timestamp;
  };
}
