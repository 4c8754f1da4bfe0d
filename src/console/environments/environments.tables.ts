import type { RowVersion, Timestamp } from '../../db/columns.ts';

export interface EnvironmentsTables {
  environments: {
    name: string;
    provider: 'microvm' | 'hosted' | 'local';
    profile: string | null;
    vcpus: number | null;
    memory_mib: number | null;
    disk_gib: number | null;
    checkpoint_id: string | null;
    idle_after_seconds: number;
    deep_sleep_after_seconds: number;
    created_at: Timestamp;
    updated_at: Timestamp;
    row_version: RowVersion;
  };
}
