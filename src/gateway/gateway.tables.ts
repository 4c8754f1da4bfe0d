import type { Generated, Timestamp } from '../db/columns.ts';

export interface GatewayTables {
  gateway_ca: {
    id: 'deployment';
    certificate: string;
    key_sealed: string;
    key_id: string;
    created_at: Timestamp;
  };
  /** Every refusal of the gateway (and, in report mode, what enforcement would have refused). */
  egress_events: {
    id: Generated<string>;
    at: Timestamp;
    sandbox_id: string;
    team_id: number;
    role: string;
    method: string;
    host: string;
    path: string;
    destination: string | null;
    rule: string;
    reason: string;
    enforced: Generated<boolean>;
  };
  /** Every ref a code host accepted from a sandbox's push (read from the upstream's report). */
  git_pushes: {
    id: Generated<string>;
    at: Timestamp;
    sandbox_id: string;
    team_id: number;
    role: string;
    destination: string | null;
    repository: string;
    ref: string;
    old_commit: string;
    new_commit: string;
  };
}
