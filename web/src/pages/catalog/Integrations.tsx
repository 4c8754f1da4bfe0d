import { useState } from 'react';
import { ApiError, call, get, seg } from '../../api.ts';
import { useDoc, type Doc } from '../../resource.ts';
import { asYaml, cellText, CopyButton, DataTable, Loaded, PageHead, parseStructured, ProblemNote, StructuredEditor, useAction, useCan, useLoad } from '../../ui.tsx';

const KINDS: Record<string, string> = {
  chat_a: 'Chat A: rooms, threads, a slash command',
  chat_b: 'Chat B: channels and threads',
  code_host: 'Code host: issues, pull requests and repository access through one app',
  tracker_a: 'Issue tracker A: an agent app',
  tracker_b: 'Issue tracker B: an agent',
};
/** Surfaces whose service calls us back: the webhook URL to give it. */
const WEBHOOK_KINDS = new Set(['code_host', 'tracker_a', 'tracker_b']);

type Integration = Record<string, unknown> & { kind?: string; enabled?: boolean; settings?: Record<string, unknown>; status?: Record<string, unknown> };

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const itemsOf = (v: unknown): Integration[] => (Array.isArray(v) ? (v as Integration[]) : isRecord(v) && Array.isArray(v.items) ? (v.items as Integration[]) : []);

/** Says so plainly when this deployment does not serve integrations yet, rather than failing. */
function Unavailable({ error }: { error: unknown }) {
  if (error instanceof ApiError && error.status === 404) return <p className="notice">Integrations are not available on this deployment yet (the API has no such route).</p>;
  return <ProblemNote error={error} />;
}

export function IntegrationList() {
  const list = useLoad(() => get<unknown>('/integrations'));
  const rows = itemsOf(list.data).map((i) => ({ ...i, kind: String(i.kind ?? ''), purpose: KINDS[String(i.kind)] ?? '', enabled: i.enabled, applied: isRecord(i.status) ? i.status.applied : undefined }));
  return (
    <section aria-labelledby="section-title">
      <PageHead title="Integrations" blurb="Chat, the code host and issue trackers: settings, secrets and whether they answer." />
      {list.error !== null ? <Unavailable error={list.error} /> : list.loading && !list.data ? <p className="muted">Loading…</p> : null}
      {list.data !== null && (
        <DataTable
          rows={rows}
          label="integrations"
          columns={['kind', 'purpose', 'enabled', 'applied']}
          cells={{ kind: (r) => <a href={`#/integrations/${seg(r.kind)}`}>{r.kind}</a>, enabled: (r) => <span className={`badge ${r.enabled ? 'good' : ''}`}>{r.enabled ? 'enabled' : 'off'}</span> }}
          empty="No integrations are known to this deployment."
        />
      )}
    </section>
  );
}

export function IntegrationPage({ kind }: { kind: string }) {
  const doc = useDoc<Integration>(`/integrations/${seg(kind)}`);
  const admin = useCan('admin');
  const operator = useCan('operator');
  return (
    <section aria-labelledby="section-title">
      <PageHead title={kind} back={{ href: '#/integrations', label: 'Integrations' }} blurb={KINDS[kind]} />
      {doc.error !== null ? (
        <Unavailable error={doc.error} />
      ) : (
        <Loaded data={doc.data} error={null} loading={doc.loading}>
          {(i) => (
            <>
              <Status integration={i} />
              <Webhook kind={kind} integration={i} />
              <Settings integration={i} canWrite={admin} write={doc.write} />
              <Secrets kind={kind} integration={i} admin={admin} />
              {operator && <Test kind={kind} />}
              <Deliveries kind={kind} />
            </>
          )}
        </Loaded>
      )}
    </section>
  );
}

function Status({ integration }: { integration: Integration }) {
  const status = isRecord(integration.status) ? integration.status : {};
  return (
    <dl className="fields">
      <div>
        <dt>Enabled</dt>
        <dd>{integration.enabled ? 'yes' : 'no'}</dd>
      </div>
      {Object.entries(status).map(([k, v]) => (
        <div key={k}>
          <dt>{k.replace(/_/g, ' ')}</dt>
          <dd>{k === 'applied' && v === 'pending' ? 'pending: the running service has not taken the change yet' : cellText(v)}</dd>
        </div>
      ))}
    </dl>
  );
}

/** The webhook URL the external service is given: the server's, else the fixed route on this origin. */
function Webhook({ kind, integration }: { kind: string; integration: Integration }) {
  const given = Object.entries(integration).find(([k, v]) => /webhook.*url/i.test(k) && typeof v === 'string')?.[1] as string | undefined;
  if (!given && !WEBHOOK_KINDS.has(kind)) return null;
  const url = given ?? `${window.location.origin}/webhooks/${kind}`;
  return (
    <div className="part">
      <h2>Webhook URL</h2>
      <div className="row">
        <code className="copyable" aria-label="webhook URL">
          {url}
        </code>
        <CopyButton value={url} />
      </div>
      {!given && <p className="muted">As this browser reaches the Console; the service itself tells external services SERVICE_PUBLIC_BASE_URL.</p>}
    </div>
  );
}

function Settings({ integration, canWrite, write }: { integration: Integration; canWrite: boolean; write: Doc<Integration>['write'] }) {
  const [enabled, setEnabled] = useState<boolean | null>(null);
  const [text, setText] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  const { busy, error, run } = useAction();
  const settings = isRecord(integration.settings) ? integration.settings : {};
  const save = () =>
    run(async () => {
      const parsed = parseStructured(text ?? asYaml(settings));
      if (parsed.error) throw new Error(`The settings are not valid YAML or JSON: ${parsed.error}`);
      await write('PUT', undefined, { enabled: enabled ?? Boolean(integration.enabled), settings: parsed.value ?? {} }, { replace: true });
      setText(null);
      setEnabled(null);
      setSaved(true);
    });
  return (
    <form
      className="part"
      aria-label="integration settings"
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
    >
      <h2>Settings</h2>
      {canWrite ? (
        <>
          <label className="check">
            <input type="checkbox" checked={enabled ?? Boolean(integration.enabled)} onChange={(e) => setEnabled(e.target.checked)} />
            Enabled
          </label>
          <StructuredEditor label="Settings" value={text ?? asYaml(settings)} onChange={setText} rows={8} error={error} name="settings" />
          <ProblemNote error={error} />
          {saved && <p className="notice">Saved.</p>}
          <button type="submit" disabled={busy}>
            {busy ? 'Saving…' : 'Save settings'}
          </button>
        </>
      ) : (
        <pre className="raw">{Object.keys(settings).length ? asYaml(settings) : 'No settings.'}</pre>
      )}
    </form>
  );
}

/** Each secret the integration needs, set or not: values are set on the Secrets page and never shown. */
function Secrets({ kind, integration, admin }: { kind: string; integration: Integration; admin: boolean }) {
  const raw = integration.secrets;
  const rows: Array<{ name: string; state: string }> = Array.isArray(raw)
    ? raw.map((s: unknown) => (isRecord(s) ? { name: String(s.name ?? s.setting ?? ''), state: String(s.status ?? (s.set === true ? 'set' : s.set === false ? 'unset' : '')) } : { name: String(s), state: '' }))
    : isRecord(raw)
      ? Object.entries(raw).map(([k, v]) => ({ name: k, state: isRecord(v) ? String(v.status ?? (v.set ? 'set' : 'unset')) : typeof v === 'boolean' ? (v ? 'set' : 'unset') : String(v) }))
      : [];
  return (
    <div className="part">
      <h2>Secrets</h2>
      <DataTable
        rows={rows}
        label="integration secrets"
        columns={['name', 'state']}
        empty="This integration reports no secrets."
        cells={{ state: (r) => <span className={`badge ${r.state === 'set' ? 'good' : 'warn'}`}>{r.state || 'unknown'}</span> }}
        actions={
          admin
            ? (r) => {
                const full = r.name.startsWith('integrations/') ? r.name : `integrations/${kind}/${r.name}`;
                return (
                  <a className="button secondary" href={`#/secrets?name=${encodeURIComponent(full)}`}>
                    {r.state === 'set' ? 'Replace' : 'Set'}
                  </a>
                );
              }
            : undefined
        }
      />
    </div>
  );
}

function Test({ kind }: { kind: string }) {
  const [result, setResult] = useState<{ state: string; detail: string } | null>(null);
  const { busy, error, run } = useAction();
  return (
    <div className="part">
      <h2>Test</h2>
      <div className="row">
        <button
          type="button"
          className="secondary"
          disabled={busy}
          onClick={() =>
            void run(async () => {
              setResult(null);
              const { body } = await call<{ state: string; detail: string }>('POST', `/integrations/${seg(kind)}/test`);
              setResult(body);
            })
          }
        >
          {busy ? 'Testing…' : 'Test the connection'}
        </button>
        {result && (
          <span role="status">
            <span className={`badge ${result.state === 'ok' ? 'good' : result.state === 'error' ? 'bad' : 'warn'}`}>{result.state}</span> {result.detail}
          </span>
        )}
      </div>
      <ProblemNote error={error} />
    </div>
  );
}

function Deliveries({ kind }: { kind: string }) {
  const list = useLoad(() => get<unknown>(`/integrations/${seg(kind)}/deliveries`));
  return (
    <div className="part">
      <h2>Recent deliveries</h2>
      {list.error !== null ? <Unavailable error={list.error} /> : list.data !== null && <DataTable rows={itemsOf(list.data)} label="deliveries" empty="No webhook deliveries yet." />}
    </div>
  );
}
