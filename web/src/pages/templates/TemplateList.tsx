import { seg } from '../../api.ts';
import { Empty, PagedTable, PageHead, useCan, usePaged } from '../../ui.tsx';
import type { TemplateSummary } from '../../types.ts';

/** Team templates: the roles, the lead and how many teams use each. */
export function TemplateList() {
  const list = usePaged<TemplateSummary>('/team-templates');
  const admin = useCan('admin');
  return (
    <section aria-labelledby="section-title">
      <PageHead title="Team templates" blurb="Roles (each an agent on a model and an environment), the lead, the hand-off pipeline, budgets and sleep times.">
        {admin && (
          <a className="button" href="#/team-templates/new">
            New template
          </a>
        )}
      </PageHead>
      <PagedTable
        list={list}
        label="team templates"
        columns={['name', 'description', 'lead', 'roles', 'current_version', 'used_by', 'updated_at']}
        cells={{ name: (t) => <a href={`#/team-templates/${seg(t.name)}`}>{t.name}</a>, roles: (t) => t.roles.join(', ') }}
        empty={
          <Empty>
            <p>No templates yet. A template puts agents into roles; teams are made from it.</p>
            {admin ? (
              <p>
                <a href="#/team-templates/new">Create a template</a> (it needs at least one <a href="#/agents">agent</a>).
              </p>
            ) : (
              <p className="muted">An admin creates templates.</p>
            )}
          </Empty>
        }
      />
    </section>
  );
}
