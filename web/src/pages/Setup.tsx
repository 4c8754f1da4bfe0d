import { useState, type FormEvent } from 'react';
import { ApiError, call, type SessionInfo } from '../api.ts';
import { replaceHash } from '../hash.ts';
import { ProblemNote, useAction } from '../ui.tsx';

const MIN_PASSWORD = 12;

/** The page behind a setup link (`#setup?token=...`): choose a password, then arrive signed in. */
export function Setup({ token, onDone }: { token: string; onDone: (s: SessionInfo) => void }) {
  const [password, setPassword] = useState('');
  const [repeat, setRepeat] = useState('');
  const { busy, error, setError, run } = useAction();

  const mismatch = repeat.length > 0 && repeat !== password;
  const tooShort = password.length > 0 && password.length < MIN_PASSWORD;

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (password.length < MIN_PASSWORD) return setError(new Error(`Choose a password of at least ${MIN_PASSWORD} characters.`));
    if (password !== repeat) return setError(new Error('The two passwords differ.'));
    await run(async () => {
      const { body } = await call<SessionInfo>('POST', '/session/setup', { body: { token, password }, quietUnauthorized: true });
      // The token is used up: take it out of the address bar and history, and land in the console.
      replaceHash('#/teams');
      onDone(body);
    });
  };

  return (
    <main className="center">
      <form className="card" onSubmit={(e) => void submit(e)} aria-labelledby="setup-title">
        <h1 id="setup-title">Set your password</h1>
        {token === '' ? (
          <p className="problem" role="alert">
            This setup link has no token. Ask an admin for a new link.
          </p>
        ) : (
          <>
            <p className="muted">Choose a password for your Crewhouse account (at least {MIN_PASSWORD} characters). This link works once.</p>
            <label>
              New password
              <input name="new-password" type="password" autoComplete="new-password" required minLength={MIN_PASSWORD} maxLength={1024} value={password} onChange={(e) => setPassword(e.target.value)} autoFocus />
            </label>
            {tooShort && <p className="hint">{MIN_PASSWORD - password.length} more characters</p>}
            <label>
              Repeat password
              <input name="repeat-password" type="password" autoComplete="new-password" required maxLength={1024} value={repeat} onChange={(e) => setRepeat(e.target.value)} />
            </label>
            {mismatch && <p className="hint">The two passwords differ.</p>}
            <ProblemNote error={error} />
            {error instanceof ApiError && error.status === 422 && <p className="hint">Ask an admin for a new setup link.</p>}
            <button type="submit" disabled={busy}>
              {busy ? 'Saving…' : 'Set password and log in'}
            </button>
          </>
        )}
        <p className="small-print">
          <a href="#/">Go to the Console</a>
        </p>
      </form>
    </main>
  );
}
