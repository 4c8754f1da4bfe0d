/** The inbound surfaces: `code_host` is consumed; the trackers' deliveries are recorded and answered until their adapters exist. */
export const WEBHOOK_SURFACES = ['code_host', 'tracker_a', 'tracker_b'] as const;
export type WebhookSurface = (typeof WEBHOOK_SURFACES)[number];
export const isWebhookSurface = (s: string): s is WebhookSurface => (WEBHOOK_SURFACES as readonly string[]).includes(s);
