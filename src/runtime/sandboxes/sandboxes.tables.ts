import type { ColumnType } from 'kysely';
import type { NullableTimestamp, Timestamp } from '../../db/columns.ts';
import type { SandboxState } from './provider.ts';

/** A nullable text column with no default that an insert may leave out. */
type OptionalText = ColumnType<string | null, string | null | undefined, string | null>;

/** The sandboxes module's tables (created by migrations 0401, 0605 and 0610). */
export interface SandboxesTables {
  sandboxes: {
    id: string;
    team_id: number;
    role: string;
    replica: number;
    provider: string;
    state: SandboxState;
    created_at: Timestamp;
    updated_at: Timestamp;
    /** The sandbox host it was placed on. */
    host_id: OptionalText;
    /** The host end and the sandbox end of its link: the gateway knows it by these. */
    host_address: OptionalText;
    sandbox_address: OptionalText;
    environment: OptionalText;
    host_interface: OptionalText;
    vcpus: ColumnType<number, number | undefined, number>;
    memory_mib: ColumnType<number, number | undefined, number>;
    disk_gib: ColumnType<number, number | undefined, number>;
    /** True once a provider made it on its host; false while placed but not yet made (or re-placed). */
    created: ColumnType<boolean, boolean | undefined, boolean>;
    failure: OptionalText;
    last_active_at: Timestamp;
    /** When its host freed its resources (null while the host holds them). */
    released_at: NullableTimestamp;
  };
}
