import { useState } from 'react';
import { seg } from '../../api.ts';
import { go } from '../../hash.ts';
import { useDoc, type Doc } from '../../resource.ts';
import { cellText, ConfirmButton, DataTable, Field, Loaded, PagedTable, PageHead, ProblemNote, useAction, useCan, usePaged } from '../../ui.tsx';
import { Documents } from '../shared/Documents.tsx';
import { McpServers } from '../shared/McpServers.tsx';
import { BudgetBadge, StateBadge } from './badges.tsx';
import { Links } from './Links.tsx';
import { RoleEgress } from './RoleEgress.tsx';
import { RoleSettings } from './RoleSettings.tsx';
import type { Team } from '../../types.ts';

/** One team: state, settings, roles, egress overrides, links, documents, MCP servers, skills, archive. */
export function TeamPage({ name }: { name: string }) {
  const base = `/teams/${seg(name)}`;
  const team = useDoc<Team>(base);
  const operator = useCan('operator');
  const admin = useCan('admin');
  const act = useAction();
  const archive = () =>
    void act.run(async () => {
      await team.write('DELETE');
      go('#/teams');
    });
  const t = team.data;
  const live = t !== null && t.status !== 'archived';
  return (
    <section aria-labelledby="section-title">
      <PageHead title={name} back={{ href: '#/teams', label: 'Teams' }}>
        {operator && live && t.status === 'active' && (
          <a className="button" href={`#/runs/new?team=${encodeURIComponent(name)}`}>
            Give a task
          </a>
        )}
        {t && (
          <a className="button secondary" href={`#/runs?team=${encodeURIComponent(name)}`}>
            Runs
          </a>
        )}
        {operator && live && <ConfirmButton label="Archive team" confirm={`Archive ${name}`} onConfirm={archive} disabled={act.busy} />}
      </PageHead>
      <ProblemNote error={act.error} />
      <Loaded data={t} error={team.error} loading={team.loading}>
        {(t) => (
          <>
            <dl className="fields">
              <div>
                <dt>State</dt>
                <dd>
                  <StateBadge team={t} /> {t.active_runs > 0 && `${t.active_runs} active run${t.active_runs === 1 ? '' : 's'}`}
                </dd>
              </div>
              <div>
                <dt>Template</dt>
                <dd>
                  <a href={`#/team-templates/${seg(t.template.name)}`}>{t.template.name}</a> version {cellText(t.template.version)}
                </dd>
              </div>
              <div>
                <dt>Budget</dt>
                <dd>
                  ${t.spent_usd ?? 0} of ${t.budget_usd_per_day} today <BudgetBadge state={t.budget_state} />
                </dd>
              </div>
              <div>
                <dt>Home</dt>
                <dd>{t.home.surface === 'none' || t.home.surface === 'console' ? 'the Console' : `${t.home.surface} ${t.home.room_label ?? t.home.room_id ?? ''}`}</dd>
              </div>
              <div>
                <dt>Repository</dt>
                <dd>{t.repo_url ?? '—'}</dd>
              </div>
              <div>
                <dt>Last run</dt>
                <dd>{cellText(t.last_run_at)}</dd>
              </div>
              <div>
                <dt>Created</dt>
                <dd>
                  {cellText(t.created_at)} by {t.created_by}
                </dd>
              </div>
            </dl>
            {operator && live && <Upgrade team={t} write={team.write} />}
            <Settings team={t} write={team.write} canWrite={operator && live} />
            <RoleSettings team={t} write={team.write} canWrite={operator && live} />
            <div className="part">
              <h2>Role egress</h2>
              <p className="muted">Where each role may connect: the agent's egress unless the team overrides it{admin ? '' : ' (an admin sets overrides)'}.</p>
              {t.roles.map((r) => (
                <RoleEgress key={r} team={t.name} role={r} canWrite={admin && live} />
              ))}
            </div>
            <Links team={t} canWrite={operator && live} onChanged={() => void team.reload()} />
            <Documents base={base} canWrite={operator && live} owner={`team ${t.name}`} />
            <McpServers team={t.name} roles={t.roles} />
            <TeamSkills base={base} />
            <div className="part">
              <h2>Members</h2>
              <DataTable rows={t.members} label="members" columns={['name', 'email', 'role']} />
            </div>
          </>
        )}
      </Loaded>
    </section>
  );
}

function Settings({ team, write, canWrite }: { team: Team; write: Doc<Team>['write']; canWrite: boolean }) {
  const s = team.settings;
  const initial = {
    budget: String(team.budget_usd_per_day),
    rework: String(s.rework_rounds),
    idle: String(s.idle_after_seconds),
    deep: String(s.deep_sleep_after_seconds),
    inject: s.memory?.inject ?? true,
    max_entries: String(s.memory?.max_entries ?? 10),
    write_outcomes: s.memory?.write_outcomes ?? true,
  };
  // Only what the person changed is kept over a re-read, so a 412 shows the others' new values.
  const [f, setF] = useState<Partial<typeof initial> | null>(null);
  const { busy, error, run } = useAction();
  const [saved, setSaved] = useState(false);
  const v = { ...initial, ...f };
  const save = () =>
    run(async () => {
      await write(
        'PATCH',
        undefined,
        {
          budget_usd_per_day: Number(v.budget),
          rework_rounds: Number(v.rework),
          idle_after_seconds: Number(v.idle),
          deep_sleep_after_seconds: Number(v.deep),
          memory: { inject: v.inject, max_entries: Number(v.max_entries), write_outcomes: v.write_outcomes },
        },
        { replace: true },
      );
      setF(null);
      setSaved(true);
    });
  const edit = (patch: Partial<typeof initial>) => {
    setSaved(false);
    setF({ ...f, ...patch });
  };
  return (
    <form
      className="part"
      aria-label="team settings"
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
    >
      <h2>Settings</h2>
      <fieldset disabled={!canWrite} className="plain">
        <div className="row">
          <Field label="Budget (USD per day)" name="budget_usd_per_day" error={error}>
            <input type="number" min="0.01" step="0.01" value={v.budget} onChange={(e) => edit({ budget: e.target.value })} />
          </Field>
          <Field label="Rework rounds" name="rework_rounds" error={error}>
            <input type="number" min={0} max={10} value={v.rework} onChange={(e) => edit({ rework: e.target.value })} />
          </Field>
          <Field label="Idle after (s)" name="idle_after_seconds" error={error}>
            <input type="number" min={60} value={v.idle} onChange={(e) => edit({ idle: e.target.value })} />
          </Field>
          <Field label="Deep sleep after (s)" name="deep_sleep_after_seconds" error={error}>
            <input type="number" min={60} value={v.deep} onChange={(e) => edit({ deep: e.target.value })} />
          </Field>
        </div>
        <div className="row">
          <label className="check">
            <input type="checkbox" checked={v.inject} onChange={(e) => edit({ inject: e.target.checked })} />
            Put team memory into a conversation's first task
          </label>
          <Field label="Memory entries injected" name="memory.max_entries" error={error}>
            <input type="number" min={0} max={10} value={v.max_entries} onChange={(e) => edit({ max_entries: e.target.value })} />
          </Field>
          <label className="check">
            <input type="checkbox" checked={v.write_outcomes} onChange={(e) => edit({ write_outcomes: e.target.checked })} />
            Write an outcome entry when a run completes
          </label>
        </div>
      </fieldset>
      <p className="muted">Isolation: {s.isolation}.</p>
      <ProblemNote error={error} />
      {saved && <p className="notice">Saved.</p>}
      {canWrite && (
        <button type="submit" disabled={busy || f === null}>
          {busy ? 'Saving…' : 'Save settings'}
        </button>
      )}
    </form>
  );
}

function TeamSkills({ base }: { base: string }) {
  const list = usePaged<Record<string, unknown>>(`${base}/skills`);
  return (
    <div className="part">
      <h2>Skills of this team</h2>
      <p className="muted">Stored from chat commands and agent proposals; read-only here.</p>
      <PagedTable list={list} label="team skills" empty="The team has no skills of its own." />
    </div>
  );
}

/** Moves the team to another version of its template; fields set by hand are kept. */
function Upgrade({ team, write }: { team: Team; write: Doc<Team>['write'] }) {
  const [version, setVersion] = useState('');
  const { busy, error, run } = useAction();
  const [done, setDone] = useState<string | null>(null);
  return (
    <form
      className="part"
      aria-label="upgrade team"
      onSubmit={(e) => {
        e.preventDefault();
        void run(async () => {
          setDone(null);
          const t = await write<Team>('POST', `/teams/${seg(team.name)}/upgrade`, { version: version ? Number(version) : null }, { replace: true });
          setDone(`Now on version ${String(t.template.version)} of ${t.template.name}.`);
          setVersion('');
        });
      }}
    >
      <h2>Template version</h2>
      <div className="row">
        <Field label="Move to version" name="version" error={error} hint="empty: the template's current version">
          <input type="number" min={1} value={version} onChange={(e) => setVersion(e.target.value)} />
        </Field>
        <button type="submit" className="secondary" disabled={busy}>
          {busy ? 'Upgrading…' : 'Upgrade team'}
        </button>
      </div>
      <ProblemNote error={error} />
      {done && <p className="notice">{done}</p>}
    </form>
  );
}
