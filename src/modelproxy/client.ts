import type { Config } from '../config.ts';
import { Problem } from '../errors/problems.ts';
import type { AllSpend, KeyLimitsInput, KeyPage, MintedProxyKey, MintKeyInput, ProxyKey, RevokedTeamKeys, TeamBudget, TeamSpend } from './admin.schemas.ts';
import { serviceCredential } from './credential.ts';

/** The proxy is not configured or does not answer: the console answers 503. Renders as a problem. */
export class ModelProxyUnavailableError extends Problem {
  constructor(detail: string) {
    super(503, 'model-proxy-unavailable', 'Service unavailable', detail);
  }
}

/** The proxy answered, but badly (an error or an unexpected body): the console answers 502. `upstreamStatus` is what the proxy said. */
export class ModelProxyFailedError extends Problem {
  readonly upstreamStatus: number;
  constructor(detail: string, upstreamStatus: number) {
    super(502, 'model-proxy-failed', 'Bad gateway', detail);
    this.upstreamStatus = upstreamStatus;
  }
}

export type { AllSpend, DaySpend, KeyLimitsInput, MintKeyInput, ProxyKey, SpendTotals, TeamSpend } from './admin.schemas.ts';

export interface ModelProxyClientOptions {
  /** Overrides SERVICE_MODEL_PROXY_URL (the test harness points it at an ephemeral port). */
  baseUrl?: string;
  timeoutMs?: number;
}

/**
 * The console's way to the model proxy's admin API (keys, team budgets, spend), over HTTP with
 * the service credential. Every call may throw ModelProxyUnavailableError (503) or
 * ModelProxyFailedError (502); both are problems, so a route can let them through. `actor`
 * names the person for the proxy's audit entries.
 */
export function createModelProxyClient(config: Pick<Config, 'modelProxyUrl' | 'modelProxyPort' | 'modelProxyToken' | 'secretKey' | 'dataDir'>, opts: ModelProxyClientOptions = {}) {
  const base = (opts.baseUrl ?? config.modelProxyUrl ?? `http://127.0.0.1:${config.modelProxyPort}`).replace(/\/+$/, '');
  const timeoutMs = opts.timeoutMs ?? 10_000;
  let credential: string | null = null;

  async function call<T>(method: string, path: string, body?: unknown, actor?: string): Promise<T> {
    // Derived lazily: the key file it may come from is created when the first component starts.
    credential ??= serviceCredential(config);
    if (!credential) throw new ModelProxyUnavailableError('the model proxy is not configured: set SERVICE_SECRET_KEY (or SERVICE_MODEL_PROXY_TOKEN) for the console and the proxy');
    const headers: Record<string, string> = { authorization: `Bearer ${credential}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (actor && /^[\w.@+-]{1,100}$/.test(actor)) headers['x-crewhouse-actor'] = actor;
    let res: Response;
    try {
      res = await fetch(base + '/admin/v1' + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
    } catch (err) {
      const why = (err as Error).name === 'TimeoutError' ? `did not answer within ${timeoutMs / 1000} s` : 'is not answering';
      throw new ModelProxyUnavailableError(`the model proxy at ${base} ${why}`);
    }
    const text = await res.text().catch(() => '');
    let parsed: any = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    if (res.status === 503) throw new ModelProxyUnavailableError(`the model proxy is unavailable: ${String(parsed?.error?.message ?? 'it answered 503').slice(0, 300)}`);
    if (!res.ok) throw new ModelProxyFailedError(`the model proxy answered ${res.status}: ${String(parsed?.error?.message ?? 'no detail').slice(0, 300)}`, res.status);
    if (parsed === null || typeof parsed !== 'object') throw new ModelProxyFailedError('the model proxy answered without a JSON body', res.status);
    return parsed as T;
  }
  const seg = encodeURIComponent;

  return {
    /** Mints a key for a team's role and agent; `key` is shown in this answer only. */
    mintKey: (input: MintKeyInput, actor?: string) => call<MintedProxyKey>('POST', '/keys', input, actor),
    /** Changes a key's models and limits (sent fields only). */
    updateKey: (keyId: string, limits: KeyLimitsInput, actor?: string) => call<ProxyKey>('PATCH', `/keys/${seg(keyId)}`, limits, actor),
    revokeKey: (keyId: string, actor?: string) => call<ProxyKey>('DELETE', `/keys/${seg(keyId)}`, undefined, actor),
    /** Revokes every key of a team (archive); idempotent. */
    revokeTeamKeys: (team: string, actor?: string) => call<RevokedTeamKeys>('POST', `/teams/${seg(team)}/revoke-keys`, undefined, actor),
    listKeys: (team: string) => call<KeyPage>('GET', `/keys?team=${seg(team)}&limit=1000`),
    /** Sets the team's daily budget in USD per UTC day (null: no cap). */
    setTeamBudget: (team: string, usdPerDay: number | null, actor?: string) => call<TeamBudget>('PUT', `/teams/${seg(team)}/budget`, { usd_per_day: usdPerDay }, actor),
    /** The team's per-UTC-day series for the last `days` days (today included) and what it spent today. */
    teamSpend: (team: string, days: number) => call<TeamSpend>('GET', `/teams/${seg(team)}/spend?days=${Math.trunc(days)}`),
    /** Every team's per-UTC-day spend, and all teams summed per day. */
    spend: (opts: { days: number }) => call<AllSpend>('GET', `/spend?days=${Math.trunc(opts.days)}`),
  };
}

export type ModelProxyClient = ReturnType<typeof createModelProxyClient>;
