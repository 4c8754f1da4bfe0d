import { useState } from 'react';
import { ApiError, call, fieldErrors, get, seg } from '../../api.ts';
import { useDoc, type Doc } from '../../resource.ts';
import type { Integration, IntegrationSecret as SecretInfo, IntegrationSettingField as SettingField } from '../../types.ts';
import { setSecret } from './Secrets.tsx';
import { checked, type Schema } from '../../schema.ts';
import { SchemaForm } from '../../SchemaForm.tsx';
import { cellText, CopyButton, DataTable, Loaded, PageHead, ProblemNote, useAction, useCan, useLoad } from '../../ui.tsx';

const KINDS: Record<string, string> = {
  chat_a: 'Chat A: rooms, threads, a slash command',
  chat_b: 'Chat B: channels and threads',
  code_host: 'Code host: issues, pull requests and repository access through one app',
  tracker_a: 'Issue tracker A: an agent app',
  tracker_b: 'Issue tracker B: an agent',
};
/** Surfaces whose service calls us back: the webhook URL to give it. */
const WEBHOOK_KINDS = new Set(['code_host', 'tracker_a', 'tracker_b']);

/** The settings of a kind as a schema, from its definition: what the form shows and checks. */
function settingsSchema(fields: SettingField[], enabling: boolean): Schema {
  const TYPE_HELP = { id: 'a number', url: 'an http(s) URL without credentials', string: '', boolean: '' };
  return {
    type: 'object',
    properties: Object.fromEntries(
      fields.map((f) => [
        f.name,
        f.type === 'boolean'
          ? { type: 'boolean', description: f.description, default: f.default ?? undefined }
          : { type: 'string', maxLength: 2000, format: f.type === 'url' ? 'uri' : undefined, description: [f.description, TYPE_HELP[f.type], f.required ? 'needed to enable' : ''].filter(Boolean).join('; '), default: f.default ?? undefined },
      ]),
    ),
    // Required only to enable: a disabled integration may be saved incomplete.
    required: enabling ? fields.filter((f) => f.required).map((f) => f.name) : [],
  };
}

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
              <Settings integration={i} canWrite={admin} write={doc.write} reload={doc.reload} />
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
          <dd>{k === 'applied' && v === 'pending' ? 'pending: the running service has not taken the change yet' : Array.isArray(v) ? v.join(', ') || 'none' : cellText(v)}</dd>
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

/** The kind's settings as a form, and each of its secrets with a box to set it in place. */
function Settings({ integration, canWrite, write, reload }: { integration: Integration; canWrite: boolean; write: Doc<Integration>['write']; reload: () => Promise<unknown> }) {
  const [enabled, setEnabled] = useState<boolean | null>(null);
  const [value, setValue] = useState<Record<string, unknown> | null>(null);
  const [saved, setSaved] = useState(false);
  const { busy, error, run } = useAction();
  const settings = isRecord(integration.settings) ? integration.settings : {};
  const fields = Array.isArray(integration.fields) ? integration.fields : [];
  const enabling = enabled ?? Boolean(integration.enabled);
  const schema = settingsSchema(fields, enabling);
  const save = () =>
    run(async () => {
      setSaved(false);
      // Empty text is a setting left out (it takes its default).
      const current = Object.fromEntries(Object.entries(value ?? settings).filter(([, v]) => v !== '' && v !== undefined && v !== null));
      const body = checked({ type: 'object', properties: { enabled: { type: 'boolean' }, settings: schema } }, { enabled: enabling, settings: current });
      await write('PUT', undefined, body, { replace: true });
      setValue(null);
      setEnabled(null);
      setSaved(true);
    });
  return (
    <>
      <form
        className="part"
        aria-label="integration settings"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          void save();
        }}
      >
        <h2>Settings</h2>
        {canWrite ? (
          <>
            <label className="check">
              <input type="checkbox" checked={enabling} onChange={(e) => setEnabled(e.target.checked)} />
              Enabled
            </label>
            {fields.length === 0 ? <p className="muted">This kind takes no settings.</p> : <SchemaForm schema={schema} value={value ?? settings} onChange={setValue} error={error} label="settings" prefix="settings." shownElsewhere={['secrets']} />}
            {saved && (
              <p className="notice" role="status">
                Saved.
              </p>
            )}
            <button type="submit" disabled={busy}>
              {busy ? 'Saving…' : 'Save settings'}
            </button>
          </>
        ) : (
          <dl className="fields">
            {fields.map((f) => (
              <div key={f.name}>
                <dt>{f.name.replace(/_/g, ' ')}</dt>
                <dd>{cellText(settings[f.name] ?? f.default)}</dd>
              </div>
            ))}
          </dl>
        )}
      </form>
      <Secrets kind={String(integration.kind ?? '')} integration={integration} admin={canWrite} enableError={error} onSet={reload} />
    </>
  );
}

/** Each secret the kind takes, set or not, with a box that sets its value in place (never shown again). */
function Secrets({ integration, admin, enableError, onSet }: { kind: string; integration: Integration; admin: boolean; enableError: unknown; onSet: () => Promise<unknown> }) {
  const secrets = Array.isArray(integration.secrets) ? integration.secrets : [];
  return (
    <div className="part">
      <h2>Secrets</h2>
      <p className="muted">Values are written once and never shown again, not even to an admin.</p>
      {secrets.length === 0 ? <p className="muted">This kind takes no secrets.</p> : secrets.map((s) => <SecretBox key={s.name} secret={s} admin={admin} enableError={enableError} onSet={onSet} />)}
    </div>
  );
}

function SecretBox({ secret, admin, enableError, onSet }: { secret: SecretInfo; admin: boolean; enableError: unknown; onSet: () => Promise<unknown> }) {
  const [value, setValue] = useState('');
  const [done, setDone] = useState(false);
  const { busy, error, run } = useAction();
  const name = secret.ref.replace(/^secret:/, '');
  const id = `secret-${secret.name}`;
  const problems = [...fieldErrors(enableError, `secrets.${secret.name}`), ...(error instanceof ApiError ? error.errors.map((e) => e.message) : [])];
  const set = () =>
    run(async () => {
      setDone(false);
      if (value === '') throw new ApiError(400, 'Type the value first.', [{ field: 'value', message: 'must not be empty' }]);
      await setSecret(name, value);
      setValue('');
      setDone(true);
      await onSet();
    });
  return (
    <form
      className={problems.length > 0 ? 'field invalid secret-box' : 'field secret-box'}
      aria-label={`secret ${secret.name}`}
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        void set();
      }}
    >
      <div className="secret-head">
        <label htmlFor={id}>{secret.name.replace(/_/g, ' ')}</label>
        <span className={`badge ${secret.status === 'set' ? 'good' : 'warn'}`}>{secret.status === 'set' ? 'set' : 'no value'}</span>
        {secret.required && <span className="muted">needed to enable</span>}
      </div>
      {admin && (
        <div className="row">
          <input id={id} type="password" value={value} onChange={(e) => setValue(e.target.value)} autoComplete="new-password" placeholder={secret.status === 'set' ? 'type a new value to replace it' : 'type the value'} />
          <button type="submit" className="secondary" disabled={busy}>
            {busy ? 'Saving…' : secret.status === 'set' ? 'Replace' : 'Set'}
          </button>
        </div>
      )}
      <span className="hint">
        {secret.description}; kept as the secret {name}.
      </span>
      {[...new Set(problems)].map((m) => (
        <span key={m} className="field-error" role="alert">
          {m}
        </span>
      ))}
      {error !== null && !(error instanceof ApiError && error.errors.length > 0) && <ProblemNote error={error} />}
      {done && (
        <span className="notice" role="status">
          Stored. It will not be shown again.
        </span>
      )}
    </form>
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
