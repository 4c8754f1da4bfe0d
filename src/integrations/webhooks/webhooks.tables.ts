import type { ColumnType } from 'kysely';
import type { Generated, Timestamp } from '../../db/columns.ts';

type Defaulted<T> = ColumnType<T, T | undefined, T>;

export interface WebhooksTables {
  /** Every inbound delivery, good or bad. */
  webhook_deliveries: {
    id: Generated<string>;
    surface: string;
    delivery_id: string;
    event: string;
    action: string | null;
    signature_valid: boolean;
    /** The one row of a delivery taken in (unique per surface and delivery id); a refusal, recorded each time, is not. */
    taken: Defaulted<boolean>;
    received_at: Timestamp;
    times_received: Defaulted<number>;
    /** accepted (queued), processed, ignored, refused, failed */
    outcome: string;
    detail: Defaulted<string | null>;
    run_id: Defaulted<string | null>;
    /**
     * The sender's own id of what a delivery taken in reports, where a copy under a new delivery
     * id would repeat its effect (a comment's id): unique per surface, so a replay is not taken in.
     */
    subject: Defaulted<string | null>;
    /** The verified payload, kept for the job that processes it. */
    payload: ColumnType<unknown, string | null | undefined, string | null>;
  };
  /** Refusals without a valid signature counted per surface in its current minute (the cap on recording them: refusal-cap.ts). */
  webhook_refusal_minutes: {
    surface: string;
    /** Minutes since the epoch. */
    minute: number;
    count: number;
  };
}
