/**
 * What the webhooks module asks of the code-host app (`services.integrations.codeHostApp()`):
 * only these calls, so the module depends on the app's behaviour and not on how it is built.
 */
export interface CodeHostClient {
  /** Opens a pull request, or answers the open one of the same head and base (idempotent). */
  openPullRequest(input: { repo: string; head: string; base: string; title: string; body: string }): Promise<{ number: number; url: string }>;
  comment(input: { repo: string; issue: number; body: string }): Promise<unknown>;
  /** The repository's default branch, the base of a pull request. */
  defaultBranch(repo: string): Promise<string>;
  /** A fresh installation token narrowed to the repositories (the app caches and renews it). */
  installationToken(repositories: string[]): Promise<string>;
  /** Host names people reach the code host's repositories at (a team's `repo_url` on one of them counts as linked). */
  webHosts: string[];
}

/** The inbound surfaces: `code_host` is consumed; the trackers' deliveries are recorded and answered until their adapters exist. */
export const WEBHOOK_SURFACES = ['code_host', 'tracker_a', 'tracker_b'] as const;
export type WebhookSurface = (typeof WEBHOOK_SURFACES)[number];
export const isWebhookSurface = (s: string): s is WebhookSurface => (WEBHOOK_SURFACES as readonly string[]).includes(s);
