/**
 * The five integrations and what each needs, from the spec's table of kinds and requirements.
 * Settings are plain values stored with the integration; secrets are references
 * `integrations/<kind>/<name>` written with `PUT /secrets/...` and never stored here.
 */

export const INTEGRATION_KINDS = ['chat_a', 'chat_b', 'code_host', 'tracker_a', 'tracker_b'] as const;
export type IntegrationKind = (typeof INTEGRATION_KINDS)[number];
export type SettingValue = string | boolean;

/**
 * The service each integration kind is, as people name it: texts people read (a thread's post, a
 * comment, an error a person acts on) say this, never the internal kind (`tracker_a`). No
 * integration record carries a name of its own, so the kind's service is its name.
 */
export const SERVICE_NAMES: Record<IntegrationKind, string> = { chat_a: 'Mattermost', chat_b: 'Slack', code_host: 'GitHub', tracker_a: 'Linear', tracker_b: 'Jira' };

/** A surface kind's service name; anything else (`console`, `api`) as it is. */
export function serviceName(kind: string): string {
  return Object.hasOwn(SERVICE_NAMES, kind) ? SERVICE_NAMES[kind as IntegrationKind] : kind;
}

/** An actor's name as people read it: `chat_a:@alice` is `@alice on Mattermost`; one without a surface kind (`admin`) as it is. */
export function actorForPeople(name: string): string {
  const at = name.indexOf(':');
  const kind = at > 0 ? name.slice(0, at) : '';
  return Object.hasOwn(SERVICE_NAMES, kind) && at + 1 < name.length ? `${name.slice(at + 1)} on ${SERVICE_NAMES[kind as IntegrationKind]}` : name;
}

export const DEFAULT_CODE_HOST_API_URL = 'https://api.github.com';
export const DEFAULT_CHAT_B_API_URL = 'https://slack.com/api/';
/** Linear's GraphQL endpoint (tracker_a's `api_url`). */
export const DEFAULT_LINEAR_API_URL = 'https://api.linear.app/graphql';
/** Atlassian's API gateway and OAuth host (tracker_b's `api_url`, `auth_url`). */
export const DEFAULT_JIRA_API_URL = 'https://api.atlassian.com';
export const DEFAULT_JIRA_AUTH_URL = 'https://auth.atlassian.com';

export interface SettingDef {
  name: string;
  type: 'string' | 'id' | 'url' | 'boolean';
  /** Needed to enable: always, or when another setting says so. */
  required: boolean | ((settings: Record<string, SettingValue>) => boolean);
  default?: SettingValue;
  description: string;
}

export interface SecretDef {
  name: string;
  required: boolean | ((settings: Record<string, SettingValue>) => boolean);
  description: string;
}

export interface KindDef {
  kind: IntegrationKind;
  purpose: string;
  settings: SettingDef[];
  secrets: SecretDef[];
  /** The surface of its inbound webhooks (`/webhooks/<surface>`), for the kinds that receive them. */
  webhook: boolean;
}

const slashCommand = (s: Record<string, SettingValue>) => s.slash_command === true;

export const KINDS: Record<IntegrationKind, KindDef> = {
  chat_a: {
    kind: 'chat_a',
    purpose: 'chat rooms, threads, slash command (self-hosted chat)',
    settings: [
      { name: 'url', type: 'url', required: true, description: 'base URL of the chat server' },
      { name: 'slash_command', type: 'boolean', required: false, default: false, description: 'accept the slash command; needs the command_token secret' },
    ],
    secrets: [
      { name: 'bot_token', required: true, description: 'the surface bot\'s API key: posts for every role without a bot of its own' },
      { name: 'command_token', required: slashCommand, description: 'the token the chat server sends with the slash command; required when slash_command is true' },
    ],
    webhook: false,
  },
  chat_b: {
    kind: 'chat_b',
    purpose: 'channels and threads (hosted chat workspace)',
    settings: [
      { name: 'api_url', type: 'url', required: false, default: DEFAULT_CHAT_B_API_URL, description: 'the Web API base URL, also where Socket Mode connections are opened; another only for a proxy or a test double' },
    ],
    secrets: [
      { name: 'bot_token', required: true, description: 'the app\'s bot token' },
      { name: 'app_token', required: true, description: 'the app-level token its event connection opens with' },
    ],
    webhook: false,
  },
  code_host: {
    kind: 'code_host',
    purpose: 'issues, pull requests and repository access through one app',
    settings: [
      { name: 'app_id', type: 'id', required: true, description: 'the app\'s id (or client id), the issuer of its JWTs' },
      { name: 'installation_id', type: 'id', required: true, description: 'the id of the app\'s installation on the account whose repositories teams use' },
      { name: 'api_url', type: 'url', required: false, default: DEFAULT_CODE_HOST_API_URL, description: 'REST base URL; https://<host>/api/v3 for an enterprise server' },
    ],
    secrets: [
      { name: 'app_key', required: true, description: 'the app\'s private key (PEM), checked by POST /integrations/code_host/test' },
      { name: 'webhook_secret', required: true, description: 'the secret the code host signs webhook deliveries with (X-Hub-Signature-256)' },
    ],
    webhook: true,
  },
  tracker_a: {
    kind: 'tracker_a',
    purpose: 'issue-tracker agent app',
    settings: [{ name: 'api_url', type: 'url', required: false, default: DEFAULT_LINEAR_API_URL, description: 'the GraphQL endpoint; another for a proxy or a test server (https, or http on localhost)' }],
    secrets: [
      { name: 'access_token', required: true, description: 'the agent app\'s access token' },
      { name: 'webhook_secret', required: true, description: 'the secret the tracker signs webhook deliveries with' },
    ],
    webhook: true,
  },
  tracker_b: {
    kind: 'tracker_b',
    purpose: 'issue-tracker agent',
    settings: [
      { name: 'client_id', type: 'string', required: true, description: 'the OAuth app\'s client id' },
      { name: 'cloud_id', type: 'string', required: true, description: 'the site (cloud) id' },
      { name: 'account_id', type: 'string', required: true, description: 'the account the agent acts as' },
      { name: 'api_url', type: 'url', required: false, default: DEFAULT_JIRA_API_URL, description: 'the API gateway; the site is <api_url>/ex/jira/<cloud_id>' },
      { name: 'auth_url', type: 'url', required: false, default: DEFAULT_JIRA_AUTH_URL, description: 'the OAuth host: client-credentials tokens are fetched from <auth_url>/oauth/token' },
      { name: 'site_url', type: 'url', required: false, description: 'the site people browse (https://<name>.atlassian.net): a run links back to <site_url>/browse/<issue>' },
      { name: 'done_transition', type: 'string', required: false, description: 'the transition (by name, e.g. Done) made on the issue when its run succeeds; none when unset' },
    ],
    secrets: [
      { name: 'client_secret', required: true, description: 'the OAuth app\'s client secret' },
      { name: 'webhook_secret', required: false, description: 'the secret webhook deliveries are verified with; without it every delivery to /webhooks/tracker_b is refused' },
    ],
    webhook: true,
  },
};

export const isKind = (k: string): k is IntegrationKind => (INTEGRATION_KINDS as readonly string[]).includes(k);

export const isRequired = (r: SettingDef['required'], settings: Record<string, SettingValue>) => (typeof r === 'function' ? r(settings) : r);

/** The secret reference name of one of a kind's secrets. */
export const secretName = (kind: IntegrationKind, name: string) => `integrations/${kind}/${name}`;

/** A setting's value with its default applied; undefined when unset and without default. */
export function settingOf(kind: IntegrationKind, settings: Record<string, SettingValue>, name: string): SettingValue | undefined {
  const def = KINDS[kind].settings.find((s) => s.name === name);
  return settings[name] ?? def?.default;
}

/** The secrets of chat_a's per-role bots: `bots/<team>/<role>`, one API key per role of a team homed on chat_a. */
const ROLE_BOT_SECRET = /^bots\/[^/]+\/[^/]+$/;

/**
 * Why an `integrations/<kind>/<secret>` name is not one an integration takes, in words, or
 * null when it is (or the name is not under `integrations/`): an unknown kind, or a secret the
 * kind does not take (a plain setting among them). Values are written only under names an
 * integration reads; references stored before this check stay readable and removable.
 */
export function integrationSecretRefusal(name: string): string | null {
  if (!name.startsWith('integrations/')) return null;
  const [, kind = '', ...rest] = name.split('/');
  const secret = rest.join('/');
  if (!isKind(kind)) {
    const known = INTEGRATION_KINDS.map((k) => `${k} (${SERVICE_NAMES[k]})`).join(', ');
    return `no integration named "${kind}": an integration secret is named integrations/<integration>/<secret>, and the integrations are ${known}`;
  }
  const def = KINDS[kind];
  if (def.secrets.some((s) => s.name === secret)) return null;
  if (kind === 'chat_a' && ROLE_BOT_SECRET.test(secret)) return null;
  const takes = def.secrets.map((s) => s.name).join(', ') + (kind === 'chat_a' ? ', and bots/<team>/<role> for a role\'s own bot' : '');
  const setting = def.settings.some((s) => s.name === secret) ? ` (${secret} is one of its settings, not a secret: it is set with the integration's settings)` : '';
  const what = secret === '' ? 'names no secret' : `takes no secret named "${secret}"${setting}`;
  return `the ${kind} integration (${SERVICE_NAMES[kind]}) ${what}: its secrets are ${takes}`;
}
