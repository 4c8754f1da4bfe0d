import type { ColumnType } from 'kysely';
import type { NullableTimestamp, Timestamp } from '../../db/columns.ts';

export interface SandboxHostsTables {
  sandbox_hosts: {
    id: string;
    /** Where the worker and gateway of this host are reached (SERVICE_SANDBOX_HOST_ADDRESS). */
    address: string;
    /** Environment providers it can serve (`microvm` also when `microvm_via_local`). */
    providers: string[];
    /** True when the operator let `local` serve microvm environments because KVM is unusable. */
    microvm_via_local: ColumnType<boolean, boolean | undefined, boolean>;
    vcpus: number;
    memory_mib: number;
    disk_gib: number;
    /** Why a provider it probed cannot run on it, by provider, in words (migration 0615). */
    provider_problems: ColumnType<Record<string, string>, string | undefined, string>;
    started_at: Timestamp;
    heartbeat_at: Timestamp;
    stopped_at: NullableTimestamp;
  };
  sandbox_claims: {
    /** Chosen by the caller (a run id): placing twice with the same claim answers the same sandbox. */
    id: string;
    sandbox_id: string;
    created_at: Timestamp;
  };
  /** A run's claim waiting for room on a sandbox host (migration 0615); the oldest is served first. */
  sandbox_waits: {
    claim_id: string;
    run_id: string;
    team_id: number;
    /** The team's name when it began to wait (for the hosts view). */
    team: string;
    provider: string;
    /** The one host that will do (the claim's sleeping sandbox is there); null: any host running the provider. */
    host_id: string | null;
    environment: string;
    vcpus: number;
    memory_mib: number;
    disk_gib: number;
    since: Timestamp;
  };
}
