import { useState, type FormEvent } from 'react';
import { call, type Role, type SessionUser } from '../api.ts';
import { changedFields, Conflict, openDoc } from '../resource.ts';
import type { Section } from '../sections.ts';
import { cellText, ConfirmButton, OnceBox, PagedTable, ProblemNote, useAction, usePaged } from '../ui.tsx';
import type { User, UserWithSetup } from '../types.ts';

const ROLES: Role[] = ['viewer', 'operator', 'admin'];

/** Users (admin): list, create (the setup link is shown once), disable and enable, a fresh setup link. */
export function Users({ section, self }: { section: Section; self: SessionUser }) {
  const list = usePaged<User>('/users');
  const [setup, setSetup] = useState<{ user: string; url: string; expires: string } | null>(null);
  const [actionError, setActionError] = useState<unknown>(null);
  const [busy, setBusy] = useState<number | null>(null);

  const replace = (u: User) => list.setData((p) => (p ? { ...p, items: p.items.map((x) => (x.id === u.id ? u : x)) } : p));

  const change = async (u: User, patch: { disabled?: boolean; role?: Role }) => {
    setBusy(u.id);
    setActionError(null);
    try {
      // A change needs the current ETag: read the user, then write with If-Match.
      const current = await openDoc<User>(`/users/${u.id}`);
      // What the list showed is what the person decided on; if it has changed since, say so first.
      const changed = changedFields(u, current.data).filter((k) => k in u && current.data !== null && k in current.data);
      if (changed.length > 0) {
        replace(current.data!);
        throw new Conflict(changed);
      }
      const body = await current.write<User>('PATCH', undefined, patch);
      replace(body);
    } catch (err) {
      setActionError(err);
    } finally {
      setBusy(null);
    }
  };
  const setDisabled = (u: User, disabled: boolean) => change(u, { disabled });

  const newSetupLink = async (u: User) => {
    setBusy(u.id);
    setActionError(null);
    try {
      const { body } = await call<UserWithSetup>('POST', `/users/${u.id}/setup-token`);
      setSetup({ user: body.name, url: body.setup_url, expires: body.setup_expires_at });
    } catch (err) {
      setActionError(err);
    } finally {
      setBusy(null);
    }
  };

  return (
    <section aria-labelledby="section-title">
      <div className="section-head">
        <div>
          <h1 id="section-title">{section.label}</h1>
          <p className="muted">{section.blurb} New accounts have no password: give the person their one-time setup link.</p>
        </div>
      </div>
      <CreateUser
        onCreated={(u) => {
          setSetup({ user: u.name, url: u.setup_url, expires: u.setup_expires_at });
          void list.reload();
        }}
      />
      {setup && (
        <OnceBox label={`Setup link for ${setup.user}`} value={setup.url} onClose={() => setSetup(null)}>
          <p className="muted">Valid until {cellText(setup.expires)}; it works once, and a newer link voids it.</p>
        </OnceBox>
      )}
      <ProblemNote error={actionError} />
      <PagedTable
        list={list}
        label="users"
        columns={['name', 'email', 'role', 'status', 'last_login_at', 'created_at']}
        cells={{ status: (u) => (u.disabled ? 'disabled' : u.password_set ? 'active' : 'waiting for setup') }}
        actions={(u) => (
          <>
            {u.id !== self.id && (
              <select aria-label={`role of ${u.name}`} className="small" value={u.role} disabled={busy === u.id} onChange={(e) => void change(u, { role: e.target.value as Role })}>
                {ROLES.map((r) => (
                  <option key={r} value={r}>
                    {r}
                  </option>
                ))}
              </select>
            )}
            {!u.disabled && (
              <button type="button" className="secondary small" disabled={busy === u.id} onClick={() => void newSetupLink(u)}>
                New setup link
              </button>
            )}
            {u.id === self.id ? null : u.disabled ? (
              <button type="button" className="secondary small" disabled={busy === u.id} onClick={() => void setDisabled(u, false)}>
                Enable
              </button>
            ) : (
              <ConfirmButton label="Disable" confirm={`Disable ${u.name}`} disabled={busy === u.id} onConfirm={() => void setDisabled(u, true)} />
            )}
          </>
        )}
      />
    </section>
  );
}

function CreateUser({ onCreated }: { onCreated: (u: UserWithSetup) => void }) {
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  const { busy, error, run } = useAction();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    await run(async () => {
      const { body } = await call<UserWithSetup>('POST', '/users', { body: { name: name.trim(), email: email.trim() || null, role } });
      setName('');
      setEmail('');
      setRole('viewer');
      onCreated(body);
    });
  };

  return (
    <form className="panel inline-form" onSubmit={(e) => void submit(e)} aria-label="create a user">
      <h2>New user</h2>
      <div className="row">
        <label>
          Name
          <input required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <label>
          Email (optional)
          <input type="email" maxLength={254} value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <label>
          Role
          <select value={role} onChange={(e) => setRole(e.target.value as Role)}>
            {ROLES.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create user'}
        </button>
      </div>
      <ProblemNote error={error} />
    </form>
  );
}
