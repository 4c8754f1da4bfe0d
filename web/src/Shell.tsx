import { useState } from 'react';
import { call, type SessionInfo } from './api.ts';
import { sectionOf } from './hash.ts';
import { Account } from './pages/Account.tsx';
import { ResourceList } from './pages/ResourceList.tsx';
import { RunsSection } from './pages/runs/RunsSection.tsx';
import { SpendPage } from './pages/spend/SpendPage.tsx';
import { Users } from './pages/Users.tsx';
import { mayOpen, SECTIONS, type Section } from './sections.ts';
import { ProblemNote } from './ui.tsx';

const DEFAULT_SECTION = 'teams';

/** The signed-in console: header with the user, navigation, and the open section. */
export function Shell({ session, hash, onLoggedOut }: { session: SessionInfo; hash: string; onLoggedOut: () => void }) {
  const { user } = session;
  const [error, setError] = useState<unknown>(null);
  const [leaving, setLeaving] = useState(false);
  const visible = SECTIONS.filter((s) => mayOpen(user.role, s));
  const current = sectionOf(hash) || DEFAULT_SECTION;
  const section = SECTIONS.find((s) => s.path === current);

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
        </nav>
        <main className="content">
          <SectionPage key={current} section={section} session={session} />
        </main>
      </div>
    </div>
  );
}

function SectionPage({ section, session }: { section: Section | undefined; session: SessionInfo }) {
  if (!section)
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
  if (section.path === 'users') return <Users section={section} self={session.user} />;
  if (section.path === 'account') return <Account section={section} user={session.user} />;
  if (section.path === 'runs') return <RunsSection user={session.user} />;
  if (section.path === 'spend') return <SpendPage />;
  return <ResourceList section={section} />;
}
