/**
 * Admission: before a request is forwarded, its key is authenticated and, when every limit
 * admits it, its worst-case cost is reserved against the key and the team; when its answer went
 * out, the reservation is settled with what it really cost. Two implementations keep the same
 * rules (rules.ts): in the database (database.ts, for PostgreSQL shared by several proxies) and
 * in memory over the embedded database (ledger.ts).
 */

export type ReserveOutcome = 'ok' | 'invalid_key' | 'model_not_allowed' | 'rpm' | 'tpm' | 'key_budget' | 'team_budget';

export interface Reservation {
  outcome: ReserveOutcome;
  keyId: string | null;
  team: string | null;
  role: string | null;
  agent: string | null;
  reservation: number | null;
  retryAfter: number | null;
}

/** What a reservation asks for. */
export interface ReserveInput {
  keyHash: string;
  model: string;
  amount: number;
  tokens: number;
  ttlSeconds: number;
}

/**
 * How the proxy admits and settles requests: reserve before forwarding (answers at once),
 * settle when the answer went out (queued; written behind), drain on shutdown, and
 * `limitsChanged` after an admin changed a key's or a team's limits.
 */
export interface Admission {
  /** Whether a key exists and is not revoked; for refused requests only (a reservation authenticates too). */
  authenticate(keyHash: string): Promise<boolean>;
  reserve(r: ReserveInput): Promise<Reservation>;
  settle(s: Settlement): void;
  drain(): Promise<void>;
  /** Drains; the caller is done with it. */
  close(): Promise<void>;
  limitsChanged(target: { keyId?: string; team?: string }): Promise<void>;
  /** Releases reservations that outlived their time (their request never settled them); answers how many. */
  releaseExpired(): Promise<number>;
}

export interface Settlement {
  reservation: number | null;
  keyId: string | null;
  team: string | null;
  role: string | null;
  model: string | null;
  stream: boolean;
  cost: number;
  tokensIn: number;
  tokensOut: number;
  status: number;
  latencyMs: number;
  upstreamRequestId: string | null;
  requestId: string | null;
  error: string | null;
  /** Counts toward the day's requests (it reached the upstream). */
  count: boolean;
}

