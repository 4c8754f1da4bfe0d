import { useCallback, useEffect, useRef, useState } from 'react';
import { get, type Page, type SessionUser } from '../../api.ts';
import { cellText, ProblemNote } from '../../ui.tsx';
import { RunBadge } from './RunBadge.tsx';
import './runs.css';
import { RUN_STATES, usd, type RunState, type RunSummary } from './types.ts';

const REFRESH_MS = 5_000;
const PAGE = 50;

/** The filters live in the hash (`#/runs?state=waiting&team=x`), so a filtered list can be linked to. */
function hashFor(state: string, team: string) {
  const q = new URLSearchParams();
  if (state) q.set('state', state);
  if (team) q.set('team', team);
  const s = q.toString();
  return `#/runs${s ? `?${s}` : ''}`;
}

function listPath(state: string, team: string, limit: number, cursor?: string | null) {
  const q = new URLSearchParams({ limit: String(limit) });
  if (state) q.set('state', state);
  if (team) q.set('team', team);
  if (cursor) q.set('cursor', cursor);
  return `/runs?${q.toString()}`;
}

export const mayWrite = (user: SessionUser) => user.role !== 'viewer';

/** Runs, open questions first, then newest first; filters by state and team; refreshes itself. */
export function RunsList({ user, query }: { user: SessionUser; query: URLSearchParams }) {
  const stateParam = query.get('state') ?? '';
  const state = (RUN_STATES as string[]).includes(stateParam) ? (stateParam as RunState) : '';
  const team = query.get('team') ?? '';
  const [runs, setRuns] = useState<Page<RunSummary> | null>(null);
  const [waiting, setWaiting] = useState<RunSummary[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const [more, setMore] = useState<{ busy: boolean; error: unknown }>({ busy: false, error: null });
  const [teams, setTeams] = useState<string[]>([]);
  const shown = useRef(PAGE);

  const load = useCallback(async () => {
    try {
      // Open questions are listed first whatever their age; the rest follows newest first.
      const [page, open] = await Promise.all([
        get<Page<RunSummary>>(listPath(state, team, Math.min(200, shown.current))),
        state === '' ? get<Page<RunSummary>>(listPath('waiting', team, 200)) : Promise.resolve(null),
      ]);
      setRuns(page);
      setWaiting(open?.items ?? []);
      setError(null);
    } catch (err) {
      setError(err);
    } finally {
      setLoading(false);
    }
  }, [state, team]);

  useEffect(() => {
    shown.current = PAGE;
    setLoading(true);
    void load();
    const timer = setInterval(() => void load(), REFRESH_MS);
    return () => clearInterval(timer);
  }, [load]);

  useEffect(() => {
    get<Page<{ name: string }>>('/teams?limit=200').then(
      (p) => setTeams(p.items.map((t) => t.name)),
      () => setTeams([]),
    );
  }, []);

  const loadMore = async () => {
    if (!runs?.next_cursor) return;
    setMore({ busy: true, error: null });
    try {
      const next = await get<Page<RunSummary>>(listPath(state, team, PAGE, runs.next_cursor));
      const items = [...runs.items, ...next.items];
      shown.current = items.length;
      setRuns({ items, next_cursor: next.next_cursor });
      setMore({ busy: false, error: null });
    } catch (err) {
      setMore({ busy: false, error: err });
    }
  };

  const openIds = new Set(waiting.map((r) => r.id));
  const rest = (runs?.items ?? []).filter((r) => !openIds.has(r.id));
  const rows = [...waiting, ...rest];

  return (
    <section aria-labelledby="section-title">
      <div className="section-head">
        <div>
          <h1 id="section-title">Runs</h1>
          <p className="muted">Work the teams are doing and have done: runs waiting for a person first, then newest first. The list refreshes itself.</p>
        </div>
        {mayWrite(user) && (
          <a className="button-link" href={`#/runs/new${team ? `?team=${encodeURIComponent(team)}` : ''}`}>
            Give a task
          </a>
        )}
      </div>
      <form className="row runs-filters" aria-label="filter runs" onSubmit={(e) => e.preventDefault()}>
        <label>
          State
          <select value={state} onChange={(e) => (window.location.hash = hashFor(e.target.value, team))}>
            <option value="">any</option>
            {RUN_STATES.map((s) => (
              <option key={s} value={s}>
                {s === 'waiting' ? 'waiting (open questions)' : s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Team
          <select value={team} onChange={(e) => (window.location.hash = hashFor(state, e.target.value))}>
            <option value="">any</option>
            {[...new Set([...teams, ...(team ? [team] : [])])].map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
      </form>
      {loading && runs === null && error === null && <p className="muted">Loading…</p>}
      <ProblemNote error={error} />
      {runs !== null && rows.length === 0 && (
        <p className="muted">
          {state || team ? 'No runs match these filters.' : 'No runs yet.'}{' '}
          {mayWrite(user) && !state && (
            <>
              Give a team a task to start one: <a href={`#/runs/new${team ? `?team=${encodeURIComponent(team)}` : ''}`}>give a task</a>.
            </>
          )}
        </p>
      )}
      {rows.length > 0 && (
        <div className="table-wrap">
          <table aria-label="runs" className="runs-table">
            <thead>
              <tr>
                <th>Run</th>
                <th>Team</th>
                <th>State</th>
                <th>Task</th>
                <th>Cost</th>
                <th>Started</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.id} className={openIds.has(r.id) ? 'run-open' : undefined}>
                  <td data-label="Run">
                    <a href={`#/runs/${encodeURIComponent(r.id)}`}>{r.id}</a>
                  </td>
                  <td data-label="Team">{r.team}</td>
                  <td data-label="State">
                    <RunBadge run={r} />
                    {r.open_question && <div className="run-question" title={r.open_question.text}>{r.open_question.text}</div>}
                  </td>
                  <td className="run-text" data-label="Task" title={r.text}>
                    {r.text}
                  </td>
                  <td data-label="Cost">{usd(r.cost_usd)}</td>
                  <td data-label="Started">{cellText(r.created_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {runs?.next_cursor && (
        <button type="button" className="secondary" onClick={() => void loadMore()} disabled={more.busy}>
          {more.busy ? 'Loading…' : 'Load more'}
        </button>
      )}
      <ProblemNote error={more.error} />
    </section>
  );
}
