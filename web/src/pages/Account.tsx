import { useState, type FormEvent } from 'react';
import { call, get, type Page, type SessionUser } from '../api.ts';
import type { Section } from '../sections.ts';
import { cellText, ConfirmButton, DataTable, OnceBox, ProblemNote, useLoad, useAction } from '../ui.tsx';
import type { NewToken, Onboarding, Token } from '../types.ts';

/** The account: who you are, your API tokens (list, create, revoke) and onboarding an agent. */
export function Account({ section, user }: { section: Section; user: SessionUser }) {
  const tokens = useLoad(() => get<Page<Token>>('/session/tokens'));
  const [created, setCreated] = useState<NewToken | null>(null);
  const [revokeError, setRevokeError] = useState<unknown>(null);

  const revoke = async (t: Token) => {
    setRevokeError(null);
    try {
      await call('DELETE', `/session/tokens/${t.id}`);
      tokens.setData((p) => (p ? { ...p, items: p.items.filter((x) => x.id !== t.id) } : p));
    } catch (err) {
      setRevokeError(err);
    }
  };

  return (
    <section aria-labelledby="section-title">
      <div className="section-head">
        <div>
          <h1 id="section-title">{section.label}</h1>
          <p className="muted">{section.blurb}</p>
        </div>
      </div>
      <dl className="fields">
        <div>
          <dt>Name</dt>
          <dd>{user.name}</dd>
        </div>
        <div>
          <dt>Email</dt>
          <dd>{user.email ?? '—'}</dd>
        </div>
        <div>
          <dt>Role</dt>
          <dd>{user.role}</dd>
        </div>
      </dl>

      <div className="part">
        <h2>API tokens</h2>
        <p className="muted">A token acts with your role ({user.role}). Send it as <code>Authorization: Bearer &lt;token&gt;</code>.</p>
        <CreateToken
          onCreated={(t) => {
            setCreated(t);
            void tokens.reload();
          }}
        />
        {created && <OnceBox label={`Token ${created.name}`} value={created.token} onClose={() => setCreated(null)} />}
        <ProblemNote error={revokeError} />
        <ProblemNote error={tokens.error} />
        {tokens.data && (
          <DataTable
            rows={tokens.data.items as unknown as Array<Record<string, unknown>>}
            label="tokens"
            columns={['name', 'kind', 'prefix', 'created_at', 'expires_at', 'last_used_at']}
            empty="You have no live tokens."
            actions={(row) => <ConfirmButton label="Revoke" confirm={`Revoke ${String(row.name)}`} onConfirm={() => void revoke(row as unknown as Token)} />}
          />
        )}
      </div>

      <OnboardingPart onMinted={() => void tokens.reload()} />
    </section>
  );
}

function CreateToken({ onCreated }: { onCreated: (t: NewToken) => void }) {
  const [name, setName] = useState('');
  const [days, setDays] = useState('');
  const { busy, error, run } = useAction();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    await run(async () => {
      const expires = days.trim() === '' ? null : Number(days);
      const { body } = await call<NewToken>('POST', '/session/tokens', { body: { name: name.trim(), expires_in_days: expires } });
      setName('');
      setDays('');
      onCreated(body);
    });
  };

  return (
    <form className="panel inline-form" onSubmit={(e) => void submit(e)} aria-label="create a token">
      <div className="row">
        <label>
          Token name
          <input required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} placeholder="e.g. laptop script" />
        </label>
        <label>
          Expires in days (empty: never)
          <input type="number" min={1} max={3650} step={1} value={days} onChange={(e) => setDays(e.target.value)} />
        </label>
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create token'}
        </button>
      </div>
      <ProblemNote error={error} />
    </form>
  );
}

function OnboardingPart({ onMinted }: { onMinted: () => void }) {
  const info = useLoad(() => get<Onboarding>('/onboarding'));
  const [minted, setMinted] = useState<{ prompt: string; expires: string | null } | null>(null);
  const { busy, error, run } = useAction();

  const mint = async () => {
    await run(async () => {
      const { body } = await call<NewToken & { prompt: string }>('POST', '/session/onboarding-token');
      setMinted({ prompt: body.prompt, expires: body.expires_at });
      onMinted();
    });
  };

  return (
    <div className="part">
      <h2>Onboard an agent</h2>
      <ProblemNote error={info.error} />
      {info.data && (
        <>
          <p className="muted">
            Give an agent this prompt and a token, and it can work with this Console ({info.data.api_base_url}) as {info.data.role}.
          </p>
          <pre className="raw" aria-label="onboarding prompt">
            {info.data.prompt}
          </pre>
          <details>
            <summary>Agent instructions</summary>
            <pre className="raw">{info.data.instructions}</pre>
          </details>
        </>
      )}
      <div className="row">
        <button type="button" onClick={() => void mint()} disabled={busy}>
          {busy ? 'Minting…' : 'Mint an onboarding token'}
        </button>
        <span className="muted">The prompt comes back with a fresh token filled in.</span>
      </div>
      <ProblemNote error={error} />
      {minted && (
        <OnceBox label="Onboarding prompt with token" value={minted.prompt} onClose={() => setMinted(null)}>
          {minted.expires && <p className="muted">The token expires {cellText(minted.expires)}.</p>}
        </OnceBox>
      )}
    </div>
  );
}
