import { useState } from 'react';
import { call, type SessionInfo } from './api.ts';
import { locationOf } from './hash.ts';
import { matchRoute } from './routes.tsx';
import { mayOpen, SECTIONS } from './sections.ts';
import { FieldRegistry, ProblemNote, UserContext } from './ui.tsx';

const DEFAULT_SECTION = 'teams';

/** The signed-in console: header with the user, navigation, and the open section. */
export function Shell({ session, hash, onLoggedOut }: { session: SessionInfo; hash: string; onLoggedOut: () => void }) {
  const { user } = session;
  const [error, setError] = useState<unknown>(null);
  const [leaving, setLeaving] = useState(false);
  const visible = SECTIONS.filter((s) => mayOpen(user.role, s));
  const location = locationOf(hash);
  const segments = location.segments.length > 0 ? location.segments : [DEFAULT_SECTION];
  const current = segments[0];

  const logOut = async () => {
    setLeaving(true);
    setError(null);
    try {
      await call('DELETE', '/session');
      onLoggedOut();
    } catch (err) {
      setError(err);
      setLeaving(false);
    }
  };

  return (
    <div className="shell">
      <header className="topbar">
        <a className="brand" href="#/">
          Crewhouse
        </a>
        <div className="who" aria-label="signed in as">
          <span className="user-name">{user.name}</span>
          <span className={`role role-${user.role}`}>{user.role}</span>
          <button type="button" className="secondary small" onClick={() => void logOut()} disabled={leaving}>
            Log out
          </button>
        </div>
      </header>
      {error !== null && (
        <div className="banner">
          <ProblemNote error={error} />
        </div>
      )}
      <div className="body">
        <nav className="sidebar" aria-label="sections">
          <ul>
            {visible.map((s) => (
              <li key={s.path}>
                <a href={`#/${s.path}`} aria-current={s.path === current ? 'page' : undefined}>
                  {s.label}
                </a>
              </li>
            ))}
          </ul>
          <ul className="sidebar-extra">
            <li>
              <a href="/api/docs" target="_blank" rel="noreferrer">
                API docs
              </a>
            </li>
          </ul>
        </nav>
        <main className="content">
          <UserContext.Provider value={user}>
            <FieldRegistry key={segments.join('/')}>
              <SectionPage segments={segments} query={location.query} session={session} />
            </FieldRegistry>
          </UserContext.Provider>
        </main>
      </div>
    </div>
  );
}

function SectionPage({ segments, query, session }: { segments: string[]; query: URLSearchParams; session: SessionInfo }) {
  const section = SECTIONS.find((s) => s.path === segments[0]);
  const match = matchRoute(segments);
  if (!section || !match)
    return (
      <>
        <h1>Not found</h1>
        <p className="muted">
          There is no such page. Pick a section on the left, or go to <a href="#/teams">Teams</a>.
        </p>
      </>
    );
  if (!mayOpen(session.user.role, section))
    return (
      <>
        <h1>{section.label}</h1>
        <p className="problem" role="alert">
          This section needs the {section.role} role; you are {session.user.role}.
        </p>
      </>
    );
  return <>{match.route.page({ params: match.params, query, section, user: session.user })}</>;
}
