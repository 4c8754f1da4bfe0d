import type { Generated, NullableTimestamp, Timestamp } from '../db/columns.ts';

export interface AuthTables {
  api_tokens: {
    id: Generated<number>;
    user_id: number;
    name: string;
    kind: 'api' | 'onboarding';
    prefix: string;
    token_hash: string;
    created_at: Timestamp;
    expires_at: NullableTimestamp;
    last_used_at: NullableTimestamp;
    revoked_at: NullableTimestamp;
  };
  sessions: {
    id: Generated<number>;
    user_id: number;
    token_hash: string;
    csrf_token: string;
    created_at: Timestamp;
    expires_at: Timestamp;
    revoked_at: NullableTimestamp;
  };
}
