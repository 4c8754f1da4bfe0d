import { useCallback, useEffect, useRef, useState } from 'react';
import { ApiError, call, describe, rememberSession, whenSessionEnds, type SessionInfo } from './api.ts';
import { setupTokenOf, useHash } from './hash.ts';
import { Login } from './pages/Login.tsx';
import { Setup } from './pages/Setup.tsx';
import { Shell } from './Shell.tsx';

type State = { kind: 'loading' } | { kind: 'signed-out'; notice: string | null } | { kind: 'signed-in'; session: SessionInfo } | { kind: 'unreachable'; detail: string };

export function App() {
  const hash = useHash();
  const [state, setState] = useState<State>({ kind: 'loading' });
  // Bumped on every log-in and log-out, so a slower GET /session cannot undo one.
  const epoch = useRef(0);

  const signedIn = useCallback((session: SessionInfo) => {
    epoch.current++;
    rememberSession(session);
    setState({ kind: 'signed-in', session });
  }, []);
  const signedOut = useCallback((notice: string | null) => {
    epoch.current++;
    rememberSession(null);
    setState({ kind: 'signed-out', notice });
  }, []);

  const load = useCallback(async () => {
    const started = epoch.current;
    setState({ kind: 'loading' });
    try {
      const { body } = await call<SessionInfo>('GET', '/session', { quietUnauthorized: true });
      if (epoch.current === started) signedIn(body);
    } catch (err) {
      if (epoch.current !== started) return;
      if (err instanceof ApiError && err.status === 401) signedOut(null);
      else setState({ kind: 'unreachable', detail: describe(err) });
    }
  }, [signedIn, signedOut]);

  useEffect(() => {
    void load();
  }, [load]);

  useEffect(() => {
    whenSessionEnds(() => signedOut('Your session has ended. Log in again.'));
    return () => whenSessionEnds(null);
  }, [signedOut]);

  const setupToken = setupTokenOf(hash);
  if (setupToken !== null) return <Setup token={setupToken} onDone={signedIn} />;

  switch (state.kind) {
    case 'loading':
      return <div className="center muted">Loading…</div>;
    case 'unreachable':
      return (
        <div className="center">
          <div className="card">
            <h1>Crewhouse</h1>
            <p className="problem" role="alert">{state.detail}</p>
            <button onClick={() => void load()}>Try again</button>
          </div>
        </div>
      );
    case 'signed-out':
      return <Login notice={state.notice} onDone={signedIn} />;
    case 'signed-in':
      return <Shell session={state.session} hash={hash} onLoggedOut={() => signedOut('You are logged out.')} />;
  }
}
