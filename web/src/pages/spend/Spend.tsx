import { useEffect, useState } from 'react';
import { Bar, BarChart, CartesianGrid, Line, LineChart, ReferenceLine, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { get } from '../../api.ts';
import { ProblemNote } from '../../ui.tsx';
import './spend.css';

interface DaySpend {
  date: string;
  spend_usd: number;
  tokens: number;
  requests: number;
}
interface Totals {
  spend_usd: number;
  tokens: number;
  requests: number;
}
type BudgetState = 'normal' | 'warning' | 'exceeded';
interface TeamSpend {
  team: string;
  budget_usd_per_day: number;
  state: BudgetState;
  series: DaySpend[];
  totals: Totals;
}
export interface SpendAnswer {
  days: number;
  series: DaySpend[];
  totals: Totals;
  budget_usd_per_day: number;
  teams: TeamSpend[];
}

const DAY_CHOICES = [7, 14, 30, 90];
const STATE_TEXT: Record<BudgetState, string> = { normal: 'within budget', warning: 'near the budget', exceeded: 'budget exceeded' };
/** Dollars with enough decimals to show two significant digits of small amounts ($0.00001 is not $0.00). */
const money = (n: number) => {
  const decimals = n === 0 || Math.abs(n) >= 1 ? 2 : Math.min(8, Math.max(2, 1 - Math.floor(Math.log10(Math.abs(n)))));
  return `$${n.toFixed(decimals)}`;
};
const count = (n: number) => n.toLocaleString();
const day = (d: string) => d.slice(5);

/** Spend of the active teams per UTC day: totals against the summed budget, then each team against its own. */
export function Spend() {
  const [days, setDays] = useState(7);
  const [data, setData] = useState<SpendAnswer | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);

  useEffect(() => {
    let current = true;
    setLoading(true);
    get<SpendAnswer>(`/spend?days=${days}`).then(
      (d) => {
        if (!current) return;
        setData(d);
        setError(null);
        setLoading(false);
      },
      (err: unknown) => {
        if (!current) return;
        setError(err);
        setLoading(false);
      },
    );
    return () => {
      current = false;
    };
  }, [days]);

  return (
    <section aria-labelledby="section-title" className="spend">
      <div className="section-head">
        <div>
          <h1 id="section-title">Spend</h1>
          <p className="muted">Model spend, tokens and requests of the active teams per UTC day, against their daily budgets. Figures are up to a minute old.</p>
        </div>
        <label>
          Days
          <select value={days} onChange={(e) => setDays(Number(e.target.value))}>
            {DAY_CHOICES.map((d) => (
              <option key={d} value={d}>
                last {d} days
              </option>
            ))}
          </select>
        </label>
      </div>
      {loading && data === null && error === null && <p className="muted">Loading…</p>}
      <ProblemNote error={error} />
      {data && (
        <>
          <div className="panel" role="region" aria-label="all teams">
            <h2>All active teams</h2>
            <Totals totals={data.totals} budget={data.budget_usd_per_day} days={data.days} />
            <Charts series={data.series} budget={data.budget_usd_per_day} label="all teams" />
          </div>
          {data.teams.length === 0 ? (
            <p className="muted">
              No active team. Spend appears here once a team exists: create one under <a href="#/teams">Teams</a>.
            </p>
          ) : (
            data.teams.map((t) => (
              <div key={t.team} className={`panel spend-team budget-${t.state}`} role="region" aria-label={`team ${t.team}`}>
                <div className="spend-team-head">
                  <h2>{t.team}</h2>
                  <span className={`budget-state budget-state-${t.state}`}>{STATE_TEXT[t.state]}</span>
                </div>
                <Totals totals={t.totals} budget={t.budget_usd_per_day} days={data.days} today={t.series.at(-1)?.spend_usd ?? 0} />
                <Charts series={t.series} budget={t.budget_usd_per_day} label={`team ${t.team}`} />
              </div>
            ))
          )}
        </>
      )}
    </section>
  );
}

function Totals({ totals, budget, days, today }: { totals: Totals; budget: number; days: number; today?: number }) {
  return (
    <dl className="fields spend-totals">
      <div>
        <dt>Spend, {days} days</dt>
        <dd>{money(totals.spend_usd)}</dd>
      </div>
      {today !== undefined && (
        <div>
          <dt>Today</dt>
          <dd>
            {money(today)} of {money(budget)}
          </dd>
        </div>
      )}
      <div>
        <dt>Budget per day</dt>
        <dd>{money(budget)}</dd>
      </div>
      <div>
        <dt>Tokens</dt>
        <dd>{count(totals.tokens)}</dd>
      </div>
      <div>
        <dt>Requests</dt>
        <dd>{count(totals.requests)}</dd>
      </div>
    </dl>
  );
}

/** Three charts per series (spend with the budget line, tokens, requests), and the same numbers as a table for keyboards and screen readers. */
function Charts({ series, budget, label }: { series: DaySpend[]; budget: number; label: string }) {
  const top = Math.max(budget, ...series.map((d) => d.spend_usd)) * 1.1 || 1;
  return (
    <>
      <div className="spend-charts">
        <figure aria-label={`spend per day, ${label}`}>
          <figcaption>Spend per day (USD), budget dashed</figcaption>
          <ResponsiveContainer width="100%" height={180}>
            <LineChart data={series} margin={{ top: 8, right: 12, bottom: 0, left: 0 }}>
              <CartesianGrid strokeDasharray="3 3" stroke="#dde2e8" />
              <XAxis dataKey="date" tickFormatter={day} fontSize={12} />
              <YAxis domain={[0, top]} tickFormatter={money} fontSize={12} width={72} />
              <Tooltip formatter={(v) => money(Number(v))} />
              <ReferenceLine y={budget} stroke="#b42318" strokeDasharray="6 4" label={{ value: 'budget', position: 'insideTopRight', fontSize: 11, fill: '#b42318' }} />
              <Line type="linear" dataKey="spend_usd" name="spend" stroke="#2f5fd0" strokeWidth={2} dot={{ r: 3 }} isAnimationActive={false} />
            </LineChart>
          </ResponsiveContainer>
        </figure>
        <figure aria-label={`tokens per day, ${label}`}>
          <figcaption>Tokens per day</figcaption>
          <ResponsiveContainer width="100%" height={180}>
            <BarChart data={series} margin={{ top: 8, right: 12, bottom: 0, left: 0 }}>
              <CartesianGrid strokeDasharray="3 3" stroke="#dde2e8" />
              <XAxis dataKey="date" tickFormatter={day} fontSize={12} />
              <YAxis allowDecimals={false} fontSize={12} width={56} />
              <Tooltip formatter={(v) => count(Number(v))} />
              <Bar dataKey="tokens" name="tokens" fill="#6c8fe0" isAnimationActive={false} />
            </BarChart>
          </ResponsiveContainer>
        </figure>
        <figure aria-label={`requests per day, ${label}`}>
          <figcaption>Requests per day</figcaption>
          <ResponsiveContainer width="100%" height={180}>
            <BarChart data={series} margin={{ top: 8, right: 12, bottom: 0, left: 0 }}>
              <CartesianGrid strokeDasharray="3 3" stroke="#dde2e8" />
              <XAxis dataKey="date" tickFormatter={day} fontSize={12} />
              <YAxis allowDecimals={false} fontSize={12} width={56} />
              <Tooltip formatter={(v) => count(Number(v))} />
              <Bar dataKey="requests" name="requests" fill="#8a6cd0" isAnimationActive={false} />
            </BarChart>
          </ResponsiveContainer>
        </figure>
      </div>
      <details>
        <summary>As a table</summary>
        <div className="table-wrap">
          <table aria-label={`spend per day, ${label}`}>
            <thead>
              <tr>
                <th>Day (UTC)</th>
                <th>Spend</th>
                <th>Tokens</th>
                <th>Requests</th>
              </tr>
            </thead>
            <tbody>
              {series.map((d) => (
                <tr key={d.date} className={budget > 0 && d.spend_usd >= budget ? 'over-budget' : undefined}>
                  <td>{d.date}</td>
                  <td>
                    {money(d.spend_usd)}
                    {budget > 0 && d.spend_usd >= budget ? ' (over budget)' : ''}
                  </td>
                  <td>{count(d.tokens)}</td>
                  <td>{count(d.requests)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </>
  );
}
