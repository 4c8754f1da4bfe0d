import { useState, type FormEvent } from 'react';
import { call, getAll, seg } from '../../api.ts';
import { go } from '../../hash.ts';
import { Field, PageHead, ProblemNote, useAction, useLoad } from '../../ui.tsx';
import { RolesEditor, rolesBody, type RoleRow } from './RolesEditor.tsx';

/** A new team template: its roles as rows, the lead, the hand-off chain, budget and sleep. */
export function TemplateNew() {
  const agents = useLoad(() => getAll<{ name: string }>('/agents'));
  const [f, setF] = useState({ name: '', description: '', budget: '10', idle: '600', deep: '3600', rework: '2', isolation: 'shared', requires_repo: false });
  const [roles, setRoles] = useState<RoleRow[]>([{ role: 'lead', agent: '', model: '', vm: '', next: '' }]);
  const [lead, setLead] = useState('lead');
  const { busy, error, run } = useAction();
  const set = (k: keyof typeof f) => (e: { target: { value: string } }) => setF({ ...f, [k]: e.target.value });

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    await run(async () => {
      const { roles: r, pipeline } = rolesBody(roles);
      const body = {
        name: f.name.trim(),
        description: f.description,
        lead,
        roles: r,
        pipeline,
        sleep: {},
        idle_after_seconds: Number(f.idle),
        deep_sleep_after_seconds: Number(f.deep),
        budget_usd_per_day: Number(f.budget),
        rework_rounds: Number(f.rework),
        isolation: f.isolation,
        requires_repo: f.requires_repo,
        note: 'first version',
      };
      const { body: t } = await call<{ name: string }>('POST', '/team-templates', { body });
      go(`#/team-templates/${seg(t.name)}`);
    });
  };

  const noAgents = agents.data !== null && agents.data.length === 0;
  return (
    <section aria-labelledby="section-title">
      <PageHead title="New team template" back={{ href: '#/team-templates', label: 'Team templates' }} />
      <ProblemNote error={agents.error} />
      {noAgents && (
        <p className="notice">
          There are no agents yet: <a href="#/agents/new">create an agent</a> first, then put it into a role here.
        </p>
      )}
      <form className="panel form" aria-label="new template" onSubmit={(e) => void submit(e)}>
        <div className="row">
          <Field label="Name" name="name" error={error} hint="lowercase letters, digits and -">
            <input required value={f.name} onChange={set('name')} />
          </Field>
          <Field label="Description" name="description" error={error}>
            <input value={f.description} onChange={set('description')} />
          </Field>
        </div>
        <RolesEditor rows={roles} onChange={setRoles} lead={lead} onLead={setLead} error={error} />
        <div className="row">
          <Field label="Budget (USD per day)" name="budget_usd_per_day" error={error}>
            <input type="number" min="0.01" step="0.01" required value={f.budget} onChange={set('budget')} />
          </Field>
          <Field label="Idle after (seconds)" name="idle_after_seconds" error={error}>
            <input type="number" min={60} required value={f.idle} onChange={set('idle')} />
          </Field>
          <Field label="Deep sleep after (seconds)" name="deep_sleep_after_seconds" error={error}>
            <input type="number" min={60} required value={f.deep} onChange={set('deep')} />
          </Field>
          <Field label="Rework rounds" name="rework_rounds" error={error}>
            <input type="number" min={0} max={10} value={f.rework} onChange={set('rework')} />
          </Field>
          <Field label="Isolation" name="isolation" error={error}>
            <select value={f.isolation} onChange={set('isolation')}>
              <option value="shared">shared</option>
              <option value="dedicated">dedicated</option>
            </select>
          </Field>
          <label className="check">
            <input type="checkbox" checked={f.requires_repo} onChange={(e) => setF({ ...f, requires_repo: e.target.checked })} />
            Teams need a repository
          </label>
        </div>
        <ProblemNote error={error} />
        <div className="row">
          <button type="submit" disabled={busy}>
            {busy ? 'Creating…' : 'Create template'}
          </button>
          <a href="#/team-templates">Cancel</a>
        </div>
      </form>
    </section>
  );
}
