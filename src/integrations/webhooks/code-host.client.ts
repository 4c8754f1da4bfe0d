import type { CodeHostApp } from '../code-host/app.ts';

/** The code-host app as this module uses it (`services.integrations.codeHostApp()`). */
export type CodeHostClient = CodeHostApp;

/**
 * Host names people reach the code host's repositories at, from its REST base URL
 * (`api.github.com` serves `github.com`; GitHub Enterprise serves both from one host): a team's
 * `repo_url` on one of them counts as a link to the repository.
 */
export function webHostsOf(apiUrl: string): string[] {
  let host: string;
  try {
    host = new URL(apiUrl).hostname.toLowerCase();
  } catch {
    return [];
  }
  return host.startsWith('api.') ? [host.slice(4), host] : [host];
}

/** The inbound surfaces: `code_host` is consumed; the trackers' deliveries are recorded and answered until their adapters exist. */
export const WEBHOOK_SURFACES = ['code_host', 'tracker_a', 'tracker_b'] as const;
export type WebhookSurface = (typeof WEBHOOK_SURFACES)[number];
export const isWebhookSurface = (s: string): s is WebhookSurface => (WEBHOOK_SURFACES as readonly string[]).includes(s);
