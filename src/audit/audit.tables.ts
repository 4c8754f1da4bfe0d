import type { Generated, Json, Timestamp } from '../db/columns.ts';

export interface AuditTables {
  audit_log: {
    id: Generated<number>;
    at: Timestamp;
    actor_user_id: number | null;
    actor: string;
    via: string;
    action: string;
    target_type: string;
    target: string;
    request_id: string | null;
    details: Json<Record<string, unknown>>;
  };
}
