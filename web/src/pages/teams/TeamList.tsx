import { useState } from 'react';
import { get, seg, type Page } from '../../api.ts';
import { Empty, PagedTable, PageHead, ProblemNote, useCan, useLoad, usePaged } from '../../ui.tsx';
import type { TeamSummary } from '../../types.ts';
import { BudgetBadge, StateBadge } from './badges.tsx';

const STATES = ['running', 'waiting', 'sleeping', 'idle', 'archived'];

/** Teams, filtered by state and name; an empty list says what to create first. */
export function TeamList() {
  const [state, setState] = useState('');
  const [q, setQ] = useState('');
  const query = new URLSearchParams();
  if (state) query.set('state', state);
  if (q.trim()) query.set('q', q.trim());
  const qs = query.toString();
  return (
    <section aria-labelledby="section-title">
      <PageHead title="Teams" blurb="Teams of agents made from a template, with their state, home and budget.">
        {useCan('operator') && (
          <a className="button" href="#/teams/new">
            New team
          </a>
        )}
      </PageHead>
      <div className="row filters" role="search">
        <label>
          State
          <select value={state} onChange={(e) => setState(e.target.value)}>
            <option value="">any</option>
            {STATES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <label>
          Name contains
          <input value={q} onChange={(e) => setQ(e.target.value)} maxLength={100} />
        </label>
      </div>
      <Teams key={qs} path={`/teams${qs ? `?${qs}` : ''}`} filtered={qs !== ''} />
    </section>
  );
}

function Teams({ path, filtered }: { path: string; filtered: boolean }) {
  const list = usePaged<TeamSummary>(path);
  return (
    <>
      <PagedTable
        list={list}
        label="teams"
        columns={['name', 'state', 'template', 'lead', 'active_runs', 'budget_state', 'budget_usd_per_day', 'last_run_at']}
        cells={{
          name: (t) => <a href={`#/teams/${seg(t.name)}`}>{t.name}</a>,
          state: (t) => <StateBadge team={t} />,
          template: (t) => `${t.template.name} v${t.template.version ?? '?'}`,
          budget_state: (t) => <BudgetBadge state={t.budget_state} />,
        }}
        empty={filtered ? 'No team matches.' : <FirstSteps />}
      />
    </>
  );
}

/** What to create before the first team, in order, with links to each step. */
function FirstSteps() {
  const operator = useCan('operator');
  const admin = useCan('admin');
  const counts = useLoad(async () => {
    const [agents, templates] = await Promise.all([get<Page<unknown>>('/agents?limit=1'), get<Page<unknown>>('/team-templates?limit=1')]);
    return { agents: agents.items.length, templates: templates.items.length };
  });
  const c = counts.data;
  return (
    <Empty>
      <p>
        <strong>No teams yet.</strong> A team is a set of agents made from a template; you give it tasks and watch it work.
      </p>
      {c && (
        <ol className="steps">
          <li className={c.agents > 0 ? 'done' : undefined}>
            {c.agents > 0 ? 'There are agents. ' : ''}
            {admin ? <a href={c.agents > 0 ? '#/agents' : '#/agents/new'}>{c.agents > 0 ? 'See the agents' : 'Create an agent'}</a> : 'An admin creates an agent'}: a system prompt, tools and where it may connect.
          </li>
          <li className={c.templates > 0 ? 'done' : undefined}>
            {admin ? <a href={c.templates > 0 ? '#/team-templates' : '#/team-templates/new'}>{c.templates > 0 ? 'See the templates' : 'Create a team template'}</a> : 'An admin creates a team template'}: roles running those agents, the lead, the pipeline.
          </li>
          <li>
            {operator && c.templates > 0 ? <a href="#/teams/new">Create a team from a template</a> : 'Create a team from a template'}, then give it a task.
          </li>
        </ol>
      )}
      <ProblemNote error={counts.error} />
    </Empty>
  );
}
