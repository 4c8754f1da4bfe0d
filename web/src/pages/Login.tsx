import { useState, type FormEvent } from 'react';
import { call, type SessionInfo } from '../api.ts';
import { ProblemNote, useAction } from '../ui.tsx';

export function Login({ notice, onDone }: { notice: string | null; onDone: (s: SessionInfo) => void }) {
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const { busy, error, run } = useAction();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await run(async () => {
      const { body } = await call<SessionInfo>('POST', '/session', { body: { name: name.trim(), password }, quietUnauthorized: true });
      onDone(body);
    });
    if (!ok) setPassword('');
  };

  return (
    <main className="center">
      <form className="card" onSubmit={(e) => void submit(e)} aria-labelledby="login-title">
        <h1 id="login-title">Log in to Crewhouse</h1>
        {notice && <p className="notice">{notice}</p>}
        <label>
          Name or email
          <input name="username" autoComplete="username" required maxLength={254} value={name} onChange={(e) => setName(e.target.value)} autoFocus />
        </label>
        <label>
          Password
          <input name="password" type="password" autoComplete="current-password" required maxLength={1024} value={password} onChange={(e) => setPassword(e.target.value)} />
        </label>
        <ProblemNote error={error} />
        <button type="submit" disabled={busy}>
          {busy ? 'Logging in…' : 'Log in'}
        </button>
        <p className="muted small-print">No account yet? An admin creates one for you and gives you a setup link.</p>
      </form>
    </main>
  );
}
