import { sql } from 'kysely';
import type { Logger } from 'pino';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { updateIfVersion } from '../../db/conditional.ts';
import { API_PREFIX } from '../../http/openapi.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';
import { integrationCheckProblem, problems, type FieldProblem } from '../../errors/problems.ts';
import { redactSecrets } from '../../logger.ts';
import type { CodeHostApp } from '../../integrations/code_host/app.ts';
import type { Coverage } from '../../hooks.ts';

/** Octokit is loaded on first use: a deployment without the code host never holds it in memory. */
const codeHostModule = () => import('../../integrations/code_host/app.ts');
import { syncRoleBotsJob } from '../../integrations/chat_a/sync-role-bots.job.ts';
import type { SecretsService } from '../../secrets/secrets.service.ts';
import type { Integration, IntegrationPut, IntegrationTestResult } from './integrations.schemas.ts';
import * as store from './integrations.store.ts';
import type { IntegrationRow } from './integrations.store.ts';
import { DEFAULT_CODE_HOST_API_URL, INTEGRATION_KINDS, KINDS, isKind, isRequired, secretName, settingOf, type IntegrationKind, type SettingDef, type SettingValue } from './kinds.ts';

/** What this module asks of others (wired in src/services.ts). */
export interface IntegrationsDeps {
  db: Db;
  secrets: Pick<SecretsService, 'list' | 'get' | 'reveal' | 'declare'>;
  publicBaseUrl: string;
  logger: Logger;
  /** The addresses of the live sandbox hosts; each runs a gateway that must load new settings. */
  liveHosts: () => Promise<string[]>;
  /** A team's repository URL and its code_host link, for `codeHostRepositoryOf`. */
  teamRepo: (team: string) => Promise<{ repoUrl: string | null; codeHostLink: string | null }>;
  /** Active teams homed on chat_a with their roles; an agent's display name and avatar. */
  chatTeams: () => Promise<Array<{ name: string; roomId: string | null; roles: Array<{ role: string; agent: string }> }>>;
  agentLook: (agent: string) => Promise<{ displayName: string | null; avatarUrl: string | null } | null>;
  /** The adapters' connection tests by kind, for the kinds other than code_host (late-bound: the adapters read this module's settings). */
  adapterTests?: Partial<Record<IntegrationKind, () => Promise<{ state: 'ok' | 'error'; detail: string }>>>;
  /** The clock the app judges its installation tokens' expiry by (tests: the fake code host's); the system's by default. */
  codeHostClock?: () => number;
}

const ID = /^[1-9][0-9]{0,19}$/;
const CLIENT_ID = /^Iv[0-9A-Za-z.]{1,40}$/;

/** The one-line code_host settings an app client is built from, or what is missing. */
interface CodeHostSettings {
  apiUrl: string;
  appId: string;
  installationId: string;
}

/** `<owner>/<repo>` of a repository URL on the code host whose REST API is `apiUrl`, or null when it is elsewhere. */
export function repositoryOnCodeHost(repoUrl: string, apiUrl: string): string | null {
  let api: URL;
  try {
    api = new URL(apiUrl);
  } catch {
    return null;
  }
  // api.github.com serves github.com; an enterprise server serves both from one host.
  const webHost = (api.hostname.startsWith('api.') ? api.hostname.slice(4) : api.hostname).toLowerCase();
  const scp = /^[A-Za-z0-9_.-]+@([^:/]+):([^/]+)\/([^/]+?)(?:\.git)?\/?$/.exec(repoUrl);
  let host: string;
  let owner: string | undefined;
  let repo: string | undefined;
  if (scp) [, host, owner, repo] = scp as unknown as [string, string, string, string];
  else {
    try {
      const u = new URL(repoUrl);
      host = u.hostname;
      [owner, repo] = u.pathname.replace(/^\/+|\/+$/g, '').replace(/\.git$/, '').split('/');
      if (u.pathname.replace(/^\/+|\/+$/g, '').split('/').length !== 2) return null;
    } catch {
      return null;
    }
  }
  if (host.toLowerCase() !== webHost || !owner || !repo) return null;
  return `${owner}/${repo}`;
}

/**
 * The five integrations: their settings and the secrets they need, what enabling requires,
 * whether every gateway has loaded the last change (`status.applied`), the connection test,
 * and what other modules need of the code host (an app client, the webhook secrets, whether a
 * repository is covered).
 */
export function createIntegrationsService(deps: IntegrationsDeps) {
  const { db, secrets } = deps;
  const log = deps.logger.child({ component: 'integrations' });

  const mustKind = (kind: string): IntegrationKind => {
    if (!isKind(kind)) throw problems.notFound('integration', kind);
    return kind;
  };

  /** Which of the integration secrets have a value, in one query. */
  async function secretsSet(): Promise<Map<string, boolean>> {
    const out = new Map<string, boolean>();
    let cursor: string | undefined;
    do {
      const page = await secrets.list({ limit: 200, cursor, prefix: 'integrations/' });
      for (const s of page.items) out.set(s.name, s.set);
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    return out;
  }

  /** What enabling needs and is not there: `settings.<name>` and `secrets.<name>`. */
  function missingOf(kind: IntegrationKind, settings: Record<string, SettingValue>, set: Map<string, boolean>): string[] {
    const def = KINDS[kind];
    return [
      ...def.settings.filter((s) => isRequired(s.required, settings) && settingOf(kind, settings, s.name) === undefined).map((s) => `settings.${s.name}`),
      ...def.secrets.filter((s) => isRequired(s.required, settings) && !set.get(secretName(kind, s.name))).map((s) => `secrets.${s.name}`),
    ];
  }

  async function appliedOf(rows: IntegrationRow[]): Promise<Map<IntegrationKind, { applied: 'current' | 'pending'; pending: string[] }>> {
    const live = rows.some((r) => Number(r.generation) > 0) ? await deps.liveHosts() : [];
    const loads = await store.loadsOf(db, live);
    return new Map(
      rows.map((r) => {
        const pending = Number(r.generation) === 0 ? [] : live.filter((h) => (loads.get(h) ?? 0) < Number(r.generation));
        return [r.kind, { applied: pending.length ? ('pending' as const) : ('current' as const), pending }];
      }),
    );
  }

  const setWith = (name: string) => `PUT ${API_PREFIX}/secrets/${name}`;

  /** The whitelist of what leaves the server about an integration: settings, secret status, never a secret's value. */
  function present(row: IntegrationRow, set: Map<string, boolean>, applied: { applied: 'current' | 'pending'; pending: string[] }): Integration {
    const def = KINDS[row.kind];
    const settings = row.settings ?? {};
    const missing = missingOf(row.kind, settings, set);
    return {
      kind: row.kind,
      purpose: def.purpose,
      enabled: row.enabled,
      settings: { ...settings },
      fields: def.settings.map((s) => ({ name: s.name, type: s.type, required: isRequired(s.required, settings), default: s.default ?? null, description: s.description })),
      secrets: def.secrets.map((s) => {
        const name = secretName(row.kind, s.name);
        return { name: s.name, ref: `secret:${name}`, required: isRequired(s.required, settings), status: set.get(name) ? 'set' : 'unset', set_with: setWith(name), description: s.description };
      }),
      missing,
      webhook_url: def.webhook ? `${deps.publicBaseUrl}/webhooks/${row.kind}` : null,
      status: { applied: applied.applied, generation: Number(row.generation), pending_hosts: applied.pending, complete: missing.length === 0 },
      updated_by: row.updated_by,
      updated_at: row.updated_at,
    };
  }

  async function presentAll(rows: IntegrationRow[]): Promise<Integration[]> {
    const [set, applied] = await Promise.all([secretsSet(), appliedOf(rows)]);
    return rows.map((r) => present(r, set, applied.get(r.kind)!));
  }

  async function mustRow(kind: IntegrationKind): Promise<IntegrationRow> {
    const row = await store.getIntegration(db, kind);
    if (!row) throw problems.notFound('integration', kind);
    return row;
  }

  /** Checks each setting against the kind's fields: names, types, forms. Returns them normalized. */
  function normalize(kind: IntegrationKind, input: Record<string, string | number | boolean>): Record<string, SettingValue> {
    const def = KINDS[kind];
    const errors: FieldProblem[] = [];
    const out: Record<string, SettingValue> = {};
    for (const [name, raw] of Object.entries(input)) {
      const field = `settings.${name}`;
      const setting = def.settings.find((s) => s.name === name);
      if (!setting) {
        const secret = def.secrets.find((s) => s.name === name);
        errors.push({
          field,
          message: secret
            ? `is a secret, not a setting: an admin sets its value as the secret "${secretName(kind, name)}" (on the Secrets page or with crewhouse secrets set)`
            : `${kind} takes no setting "${name}"; its settings are ${def.settings.map((s) => s.name).join(', ') || 'none'}`,
        });
        continue;
      }
      const problem = checkValue(kind, setting, raw);
      if (typeof problem === 'string') errors.push({ field, message: problem });
      else out[name] = problem.value;
    }
    if (errors.length) throw problems.validation(errors);
    return out;
  }

  function checkValue(kind: IntegrationKind, s: SettingDef, raw: string | number | boolean): string | { value: SettingValue } {
    switch (s.type) {
      case 'boolean':
        return typeof raw === 'boolean' ? { value: raw } : 'must be true or false';
      case 'id': {
        const v = typeof raw === 'number' ? String(raw) : typeof raw === 'string' ? raw.trim() : null;
        if (v !== null && ID.test(v)) return { value: v };
        if (v !== null && kind === 'code_host' && s.name === 'app_id' && CLIENT_ID.test(v)) return { value: v };
        return s.name === 'app_id' ? 'must be the app\'s numeric id (or its client id, Iv...)' : 'must be a positive whole number';
      }
      case 'url': {
        if (typeof raw !== 'string') return 'must be an http(s) URL';
        let u: URL;
        try {
          u = new URL(raw);
        } catch {
          return 'must be an http(s) URL';
        }
        if (u.protocol !== 'https:' && u.protocol !== 'http:') return 'must be an http(s) URL';
        if (u.username || u.password) return 'must not carry credentials (they go in the secrets)';
        if (u.search || u.hash) return 'must have no query or fragment';
        return { value: raw.replace(/\/+$/, '') };
      }
      default:
        return typeof raw === 'string' && raw.trim().length > 0 && raw.length <= 300 ? { value: raw.trim() } : 'must be a non-empty string of at most 300 characters';
    }
  }

  function codeHostSettingsOf(row: IntegrationRow): CodeHostSettings | null {
    const s = row.settings ?? {};
    const appId = settingOf('code_host', s, 'app_id');
    const installationId = settingOf('code_host', s, 'installation_id');
    if (appId === undefined || installationId === undefined) return null;
    return { apiUrl: String(settingOf('code_host', s, 'api_url') ?? DEFAULT_CODE_HOST_API_URL), appId: String(appId), installationId: String(installationId) };
  }

  // The SDK's own warnings may quote a request or an error: they go through the logger's redaction.
  const appLog = { warn: (msg: string) => log.warn(redactSecrets(String(msg))) };
  let cached: { key: string; app: CodeHostApp } | null = null;

  /** The code-host app of the enabled, complete code_host integration; null otherwise. Rebuilt when its settings or key change. */
  async function codeHostApp(): Promise<CodeHostApp | null> {
    const row = await mustRow('code_host');
    if (!row.enabled) return null;
    const settings = codeHostSettingsOf(row);
    const keyMeta = await secrets.get(secretName('code_host', 'app_key'));
    if (!settings || !keyMeta?.set) return null;
    const key = `${row.generation}:${row.row_version}:${keyMeta.row_version}`;
    if (cached?.key === key) return cached.app;
    const pem = await secrets.reveal(secretName('code_host', 'app_key'));
    if (!pem) return null;
    const { createCodeHostApp } = await codeHostModule();
    cached = { key, app: createCodeHostApp({ ...settings, privateKey: pem }, { log: appLog, now: deps.codeHostClock }) };
    return cached.app;
  }

  /**
   * Whether the code-host app is installed on `<owner>/<repo>`, with the reason when it is not;
   * 503 when the code host refuses the app's credentials (401, 403: not the repository's fault, an
   * admin mends the integration), 502 when it cannot be asked now (unreachable, rate-limiting or
   * failing).
   */
  async function coversRepository(repo: string): Promise<Coverage> {
    const app = await codeHostApp();
    if (!app) {
      const row = await mustRow('code_host');
      const missing = missingOf('code_host', row.settings ?? {}, await secretsSet());
      return { covered: false, reason: `the code-host app is not installed on ${repo}: the code_host integration is not ${row.enabled ? `complete (missing ${missing.join(', ')})` : 'enabled'}` };
    }
    try {
      return await app.coversRepository(repo);
    } catch (err) {
      const { CodeHostError } = await codeHostModule();
      if (err instanceof CodeHostError && (err.transient || err.status === 401 || err.status === 403)) {
        const check = { what: `that the code-host app is installed on ${repo}`, service: 'the code host', integration: 'code_host', said: err.message };
        throw integrationCheckProblem(err.transient ? 'failed' : 'credentials', check);
      }
      const reason = err instanceof CodeHostError ? err.message : 'the code host could not be asked';
      return { covered: false, reason: `could not check that the code-host app is installed on ${repo}: ${reason}` };
    }
  }

  return {
    /** The five by kind, in pages like every list (a cursor is the last kind shown). */
    async list(query: { limit: number; cursor?: string }) {
      const after = decodeCursor(query.cursor, ['string'])?.[0] as string | undefined;
      const rows = (await store.allIntegrations(db)).filter((r) => after === undefined || r.kind > after).slice(0, query.limit + 1);
      const page = toPage(rows, query.limit, (r) => [r.kind], (r) => r);
      return { items: await presentAll(page.items), next_cursor: page.next_cursor };
    },

    /** One integration and its ETag (the row version). */
    async get(kind: string): Promise<{ integration: Integration; version: number }> {
      const row = await mustRow(mustKind(kind));
      return { integration: (await presentAll([row]))[0]!, version: row.row_version };
    },

    /**
     * Replaces the settings and the enabled flag (If-Match). Enabling needs every required
     * setting and secret: 422 naming each one missing. Takes a new settings generation (the
     * gateways are told, and `status.applied` is pending until each has loaded it), and
     * declares the kind's secret references, unset, so they are listed for an admin to fill.
     */
    async put(actor: Actor, kind: string, expected: number, input: IntegrationPut): Promise<{ integration: Integration; version: number }> {
      const k = mustKind(kind);
      // A stale If-Match is said first (412), before anything about the body: the client must read the integration again whatever it sends.
      if ((await mustRow(k)).row_version !== expected) throw problems.preconditionFailed();
      const settings = normalize(k, input.settings);
      if (input.enabled) {
        const missing = missingOf(k, settings, await secretsSet());
        if (missing.length) {
          throw problems.validation(
            missing.map((m) => {
              const [what, name] = m.split('.') as ['settings' | 'secrets', string];
              return what === 'settings'
                ? { field: m, message: `required to enable ${k}` }
                : { field: m, message: `required to enable ${k}: the secret "${secretName(k, name)}" has no value yet; an admin sets it first (on the Secrets page or with crewhouse secrets set)` };
            }),
            `${k} cannot be enabled: missing ${missing.join(', ')}`,
          );
        }
      }
      for (const s of KINDS[k].secrets) await secrets.declare(actor, secretName(k, s.name));
      const row = await db.transaction().execute(async (trx) => {
        const updated = await updateIfVersion<IntegrationRow>(trx, {
          table: 'integrations',
          where: { kind: k },
          expected,
          set: { enabled: input.enabled, settings: JSON.stringify(settings), generation: sql`nextval('integration_generation_seq')`, updated_by: actor.name },
          what: 'integration',
          label: k,
        });
        // Settings are not secrets: the audit keeps them; secrets are audited by their own writes.
        await recordAudit(trx, actor, 'integration.update', { type: 'integration', id: k }, { enabled: input.enabled, settings, generation: Number(updated.generation) });
        await store.notifySettingsChanged(trx);
        // The role bots show their agents' names and pictures once the server is known.
        if (k === 'chat_a' && input.enabled) await syncRoleBotsJob.enqueue(trx, { generation: Number(updated.generation) }, { key: `${syncRoleBotsJob.kind}:${updated.generation}` });
        return updated;
      });
      // Live hosts and secret status read other modules' tables: after the transaction.
      return { integration: (await presentAll([row]))[0]!, version: row.row_version };
    },

    /** Calls the service for real where an adapter exists (code_host, chat_a, chat_b, the trackers); the others are `unknown`. */
    async test(kind: string): Promise<IntegrationTestResult> {
      const k = mustKind(kind);
      const at = () => new Date().toISOString();
      const adapterTest = deps.adapterTests?.[k];
      if (adapterTest) return { kind: k, ...(await adapterTest()), tested_at: at() };
      if (k !== 'code_host') return { kind: k, state: 'unknown', detail: `the ${k} adapter is not built yet: its settings and secrets are stored and checked, but nothing can call ${KINDS[k].purpose.split(' (')[0]} yet`, tested_at: at() };
      const row = await mustRow(k);
      const settings = codeHostSettingsOf(row);
      const keyName = secretName(k, 'app_key');
      const pem = settings ? await secrets.reveal(keyName) : null;
      if (!settings || !pem) {
        const missing = missingOf(k, row.settings ?? {}, await secretsSet()).filter((m) => m !== 'secrets.webhook_secret');
        return { kind: k, state: 'error', detail: `code_host is not configured: missing ${missing.join(', ')}`, tested_at: at() };
      }
      // A client of its own: the test asks the code host now, with the settings as stored (enabled or not).
      const { createCodeHostApp } = await codeHostModule();
      const result = await createCodeHostApp({ ...settings, privateKey: pem }, { log: appLog }).check();
      return { kind: k, state: result.state, detail: result.detail, tested_at: at() };
    },

    codeHostApp,

    /** The webhook secret of an enabled integration that receives webhooks; null otherwise (its deliveries are refused). */
    async webhookSecret(kind: IntegrationKind): Promise<string | null> {
      if (!KINDS[kind]?.webhook) return null;
      const row = await mustRow(kind);
      if (!row.enabled) return null;
      return secrets.reveal(secretName(kind, 'webhook_secret'));
    },

    coversRepository,

    /**
     * A team's repo_url counts as a code_host link: when it is on the enabled code host, whether
     * the app covers its repository; null when it is elsewhere (any git server) or code_host is off.
     */
    async coversRepositoryUrl(url: string): Promise<(Coverage & { repository: string }) | null> {
      const row = await mustRow('code_host');
      if (!row.enabled) return null;
      const repository = repositoryOnCodeHost(url, String(settingOf('code_host', row.settings ?? {}, 'api_url') ?? DEFAULT_CODE_HOST_API_URL));
      if (!repository) return null;
      return { ...(await coversRepository(repository)), repository };
    },

    /**
     * The code-host repository (`<owner>/<repo>`) a team works on: its code_host link, else its
     * repo_url when that is on the code host (the host of the code_host api_url); null otherwise.
     */
    async codeHostRepositoryOf(team: string): Promise<string | null> {
      const { repoUrl, codeHostLink } = await deps.teamRepo(team);
      if (codeHostLink) return codeHostLink;
      if (!repoUrl) return null;
      const row = await mustRow('code_host');
      const apiUrl = String(settingOf('code_host', row.settings ?? {}, 'api_url') ?? DEFAULT_CODE_HOST_API_URL);
      return repositoryOnCodeHost(repoUrl, apiUrl);
    },

    /** The newest settings generation; a gateway records it with `recordLoaded` once it has loaded it. */
    generation: () => store.currentGeneration(db),

    /** A host's gateway has loaded the settings of `generation`. */
    recordLoaded: (hostAddress: string, generation: number) => store.recordLoad(db, hostAddress, generation),

    /** The NOTIFY channel a settings change is announced on. */
    async settingsChannel(): Promise<string> {
      const { rows } = await sql<{ channel: string }>`select ${store.settingsChannelSql} as channel`.execute(db);
      return rows[0]!.channel;
    },

    /**
     * One entry per role of each active team homed on chat_a: whether the role posts as its own
     * bot (its key is set at `integrations/chat_a/bots/<team>/<role>`) or through the surface
     * bot, and the name and picture its posts show.
     */
    async roleBots(query: { limit: number; cursor?: string }) {
      const after = decodeCursor(query.cursor, ['string', 'string']) as [string, string] | null;
      const [teams, set] = await Promise.all([deps.chatTeams(), secretsSet()]);
      const agents = new Map<string, { displayName: string | null; avatarUrl: string | null } | null>();
      for (const a of new Set(teams.flatMap((t) => t.roles.map((r) => r.agent)))) agents.set(a, await deps.agentLook(a));
      const entries = teams.flatMap((t) =>
        t.roles.map((r) => {
          const name = secretName('chat_a', `bots/${t.name}/${r.role}`);
          const own = set.get(name) === true;
          const agent = agents.get(r.agent) ?? null;
          return {
            team: t.name,
            room_id: t.roomId,
            role: r.role,
            agent: r.agent,
            posts_as: own ? ('role_bot' as const) : ('surface_bot' as const),
            bot_secret: { ref: `secret:${name}`, status: own ? ('set' as const) : ('unset' as const) },
            display_name: own ? (agent?.displayName ?? r.role) : `[${r.role}]`,
            avatar_url: own ? (agent?.avatarUrl ?? null) : null,
          };
        }),
      );
      const rest = after ? entries.filter((e) => e.team > after[0] || (e.team === after[0] && e.role > after[1])) : entries;
      return toPage(rest.slice(0, query.limit + 1), query.limit, (e) => [e.team, e.role], (e) => e);
    },

    /** Per name: 1 for a secret one of the kinds takes (`integrations/<kind>/<name>`), the secret's "used by". */
    async usesOfSecrets(names: string[]): Promise<Map<string, number>> {
      const known = new Set(INTEGRATION_KINDS.flatMap((k) => KINDS[k].secrets.map((x) => secretName(k, x.name))));
      return new Map(names.filter((n) => known.has(n)).map((n) => [n, 1]));
    },

    kinds: INTEGRATION_KINDS,
  };
}

export type IntegrationsService = ReturnType<typeof createIntegrationsService>;
