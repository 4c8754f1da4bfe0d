/** The surfaces that receive webhooks (each verified in its own format: formats.ts). */
export const WEBHOOK_SURFACES = ['code_host', 'tracker_a', 'tracker_b'] as const;
export type WebhookSurface = (typeof WEBHOOK_SURFACES)[number];
export const isWebhookSurface = (s: string): s is WebhookSurface => (WEBHOOK_SURFACES as readonly string[]).includes(s);
