import { useState } from 'react';
import { seg } from '../../api.ts';
import { go } from '../../hash.ts';
import { useDoc, type Doc } from '../../resource.ts';
import { cellText, Chain, ConfirmButton, DataTable, Field, Loaded, PageHead, ProblemNote, useAction, useCan } from '../../ui.tsx';
import { NewVersion, Versions } from '../shared/Versions.tsx';
import { chainOf } from './RolesEditor.tsx';
import type { Template, TemplateVersion } from '../../types.ts';

const ROLE_INPUT = ['agent', 'model', 'vm', 'replicas', 'concurrent_runs', 'max_iterations', 'confirmation_policy', 'memory', 'max_budget', 'budget_duration', 'rpm_limit', 'tpm_limit', 'skills', 'mcp_servers'];

/** The body of a new version that reproduces `v` (only the fields a version input takes). */
function versionInput(v: TemplateVersion) {
  const roles = Object.fromEntries(Object.entries<Record<string, unknown>>(v.roles).map(([name, r]) => [name, Object.fromEntries(ROLE_INPUT.filter((k) => r[k] !== undefined).map((k) => [k, r[k]]))]));
  return {
    lead: v.lead,
    roles,
    pipeline: v.pipeline ?? {},
    sleep: {},
    idle_after_seconds: v.idle_after_seconds,
    deep_sleep_after_seconds: v.deep_sleep_after_seconds,
    budget_usd_per_day: v.budget_usd_per_day,
    isolation: v.isolation,
    requires_repo: v.requires_repo,
    rework_rounds: v.rework_rounds,
  };
}

/** One team template: roles, the pipeline as a chain, versions with a diff, a new version, delete. */
export function TemplatePage({ name }: { name: string }) {
  const base = `/team-templates/${seg(name)}`;
  const tpl = useDoc<Template>(base);
  const admin = useCan('admin');
  const operator = useCan('operator');
  const act = useAction();
  const remove = () =>
    void act.run(async () => {
      await tpl.write('DELETE');
      go('#/team-templates');
    });
  return (
    <section aria-labelledby="section-title">
      <PageHead title={name} back={{ href: '#/team-templates', label: 'Team templates' }} blurb={tpl.data?.description}>
        {operator && tpl.data && (
          <a className="button secondary" href={`#/teams/new?template=${encodeURIComponent(name)}`}>
            Create a team from it
          </a>
        )}
        {admin && tpl.data && <ConfirmButton label="Delete template" confirm={`Delete ${name}`} onConfirm={remove} disabled={act.busy} />}
      </PageHead>
      <ProblemNote error={act.error} />
      <Loaded data={tpl.data} error={tpl.error} loading={tpl.loading}>
        {(t) => (
          <>
            {admin && <Description tpl={t} write={tpl.write} />}
            {t.current ? <Current v={t.current} /> : <p className="muted">No current version.</p>}
            {admin && t.current && <NewVersion schemaName="TemplateNewVersion" path={`${base}/versions`} start={() => versionInput(t.current!)} write={tpl.write} onSaved={tpl.reload} omit={['from_version', 'sleep']} />}
            <Versions base={base} current={t.current_version} />
          </>
        )}
      </Loaded>
    </section>
  );
}

function Current({ v }: { v: TemplateVersion }) {
  const rows = Object.entries(v.roles).map(([role, r]) => ({
    role: role === v.lead ? `${role} (lead)` : role,
    agent: r.agent,
    model: r.model,
    environment: `${r.vm} (${r.provider} ${r.profile})`,
    replicas: r.replicas.max,
    concurrent_runs: r.concurrent_runs,
    confirmation_policy: r.confirmation_policy,
    skills: r.skills.join(', '),
    mcp_servers: r.mcp_servers.join(', '),
  }));
  return (
    <div className="part">
      <h2>Version {v.version}</h2>
      <dl className="fields">
        <div>
          <dt>Budget per day</dt>
          <dd>{v.budget_usd_per_day === null ? '—' : `$${v.budget_usd_per_day}`}</dd>
        </div>
        <div>
          <dt>Idle after / deep sleep after</dt>
          <dd>
            {v.idle_after_seconds} s / {v.deep_sleep_after_seconds} s
          </dd>
        </div>
        <div>
          <dt>Isolation</dt>
          <dd>{v.isolation}</dd>
        </div>
        <div>
          <dt>Rework rounds</dt>
          <dd>{cellText(v.rework_rounds)}</dd>
        </div>
        <div>
          <dt>Needs a repository</dt>
          <dd>{v.requires_repo ? 'yes' : 'no'}</dd>
        </div>
      </dl>
      <h3>Pipeline</h3>
      {v.lead ? <Chain steps={chainOf(v.lead, v.pipeline ?? {})} label="pipeline" /> : <p className="muted">No lead.</p>}
      <h3>Roles</h3>
      <DataTable rows={rows} label="roles" />
    </div>
  );
}

function Description({ tpl, write }: { tpl: Template; write: Doc<Template>['write'] }) {
  const [text, setText] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  if (text === null)
    return (
      <button type="button" className="secondary" onClick={() => setText(tpl.description)}>
        Edit description
      </button>
    );
  return (
    <form
      className="panel"
      aria-label="edit description"
      onSubmit={(e) => {
        e.preventDefault();
        void run(async () => {
          await write('PATCH', undefined, { description: text || null }, { replace: true });
          setText(null);
        });
      }}
    >
      <Field label="Description" name="description" error={error}>
        <input value={text} onChange={(e) => setText(e.target.value)} />
      </Field>
      <ProblemNote error={error} />
      <div className="row">
        <button type="submit" disabled={busy}>
          Save
        </button>
        <button type="button" className="secondary" onClick={() => setText(null)}>
          Cancel
        </button>
      </div>
    </form>
  );
}
