import { useEffect, useState, type FormEvent } from 'react';
import { ApiError, call, get, type Page, type SessionUser } from '../../api.ts';
import { ProblemNote, useAction } from '../../ui.tsx';
import { mayWrite } from './RunsList.tsx';
import type { TeamSummary } from '../../types.ts';
import './runs.css';

const MAX_TASK_CHARS = 32_000;

/** What a refusal of POST /teams/{name}/tasks means for the person, beside the server's detail. */
function refusal(err: unknown): string | null {
  if (!(err instanceof ApiError)) return null;
  if (err.status === 409) return 'This team cannot take a task now.';
  if (err.status === 429) return "This team's budget for today is spent; raise it or wait for tomorrow (UTC).";
  if (err.status === 503) return 'No sandbox host can take the work right now; check that a worker and its gateway are running.';
  if (err.status === 404) return 'There is no such team.';
  return null;
}

/** Give a team a task: POST /teams/{name}/tasks, then the new run's page. */
export function NewTask({ user, team: initialTeam }: { user: SessionUser; team: string }) {
  const [team, setTeam] = useState(initialTeam);
  const [text, setText] = useState('');
  const [teams, setTeams] = useState<TeamSummary[] | null>(null);
  const [teamsError, setTeamsError] = useState<unknown>(null);
  const { busy, error, run } = useAction();

  // A link to another team's form (`#/runs/new?team=x`) may reuse this page without a remount.
  useEffect(() => {
    if (initialTeam) setTeam(initialTeam);
  }, [initialTeam]);

  useEffect(() => {
    get<Page<TeamSummary>>('/teams?limit=200').then(
      (p) => {
        setTeams(p.items);
        setTeam((t) => t || p.items.find((x) => x.status === undefined || x.status === 'active')?.name || '');
      },
      (err: unknown) => setTeamsError(err),
    );
  }, []);

  if (!mayWrite(user))
    return (
      <section>
        <h1>Give a task</h1>
        <p className="problem" role="alert">
          Giving a task needs the operator role; you are {user.role}.
        </p>
        <a href="#/runs">Back to runs</a>
      </section>
    );

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    await run(async () => {
      const { body } = await call<{ run_id: string }>('POST', `/teams/${encodeURIComponent(team)}/tasks`, { body: { text } });
      window.location.hash = `#/runs/${encodeURIComponent(body.run_id)}`;
    });
  };

  const why = refusal(error);
  const options = teams ?? [];
  return (
    <section aria-labelledby="section-title">
      <div className="section-head">
        <div>
          <h1 id="section-title">Give a task</h1>
          <p className="muted">The team&apos;s lead gets the text and the run starts; you watch it on the run&apos;s page.</p>
        </div>
        <a href="#/runs">Back to runs</a>
      </div>
      <ProblemNote error={teamsError} />
      {teams !== null && teams.length === 0 && (
        <p className="notice">
          There is no team yet. Create one from a template under <a href="#/teams">Teams</a> first.
        </p>
      )}
      <form className="panel task-form" aria-label="give a task" onSubmit={(e) => void submit(e)}>
        <label>
          Team
          <select required value={team} onChange={(e) => setTeam(e.target.value)}>
            <option value="" disabled>
              {teams === null && teamsError === null ? 'Loading teams…' : 'Choose a team'}
            </option>
            {[...options, ...(team && !options.some((t) => t.name === team) ? [{ name: team, status: undefined }] : [])].map((t) => (
              <option key={t.name} value={t.name}>
                {t.name}
                {t.status && t.status !== 'active' ? ` (${t.status})` : ''}
              </option>
            ))}
          </select>
        </label>
        <label>
          Task
          <textarea required rows={8} maxLength={MAX_TASK_CHARS} value={text} onChange={(e) => setText(e.target.value)} placeholder="What should the team do?" />
        </label>
        <p className="hint">
          {text.length} of {MAX_TASK_CHARS} characters
        </p>
        {why && (
          <p className="problem" role="alert">
            <strong>{why}</strong>
          </p>
        )}
        <ProblemNote error={error} />
        <div className="row">
          <button type="submit" disabled={busy || !team || text.trim() === ''}>
            {busy ? 'Starting…' : 'Start the run'}
          </button>
        </div>
      </form>
    </section>
  );
}
