import { Empty, PagedTable, PageHead, useCan, usePaged } from '../../ui.tsx';
import { seg } from '../../api.ts';
import type { AgentSummary } from '../../types.ts';

/** Agents: what each runs on and how many templates and teams use it. */
export function AgentList() {
  const list = usePaged<AgentSummary>('/agents');
  const admin = useCan('admin');
  return (
    <section aria-labelledby="section-title">
      <PageHead title="Agents" blurb="Agent definitions: a system prompt, tools, skills and an egress policy, versioned.">
        {admin && (
          <a className="button" href="#/agents/new">
            New agent
          </a>
        )}
      </PageHead>
      <PagedTable
        list={list}
        label="agents"
        columns={['name', 'description', 'model', 'environment', 'tool_count', 'current_version', 'used_by', 'updated_at']}
        cells={{ name: (a) => <a href={`#/agents/${seg(a.name)}`}>{a.display_name ? `${a.display_name} (${a.name})` : a.name}</a> }}
        empty={
          <Empty>
            <p>No agents yet. An agent is the first thing a team needs: a system prompt, the tools it may use and where it may connect.</p>
            {admin ? <a href="#/agents/new">Create the first agent</a> : <p className="muted">An admin creates agents.</p>}
          </Empty>
        }
      />
    </section>
  );
}
