import { useEffect, useState, type FormEvent } from 'react';
import { ApiError, call, get, getAll, seg } from '../../api.ts';
import { go } from '../../hash.ts';
import { Field, PageHead, ProblemNote, useAction, useLoad } from '../../ui.tsx';
import type { TemplateSummary } from '../../types.ts';

/** A new team from a template; creation takes up to about a minute, so it shows its progress. */
export function TeamNew({ template }: { template: string | null }) {
  const templates = useLoad(() => getAll<TemplateSummary>('/team-templates'));
  const [f, setF] = useState({ name: '', template: template ?? '', version: '', repo_url: '', surface: 'none', room_id: '', budget: '' });
  const { busy, error, run } = useAction();
  const set = (k: keyof typeof f) => (e: { target: { value: string } }) => setF({ ...f, [k]: e.target.value });

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    await run(async () => {
      const body = {
        name: f.name.trim(),
        template: { name: f.template, version: f.version ? Number(f.version) : null },
        repo_url: f.repo_url.trim() || null,
        home: f.surface === 'none' ? { surface: f.surface } : { surface: f.surface, room_id: f.room_id.trim() || null },
        budget_usd_per_day: f.budget ? Number(f.budget) : null,
      };
      const { body: team } = await call<{ name: string }>('POST', '/teams', { body });
      go(`#/teams/${seg(team.name)}`);
    });
  };

  const chosen = templates.data?.find((t) => t.name === f.template);
  if (templates.data && templates.data.length === 0)
    return (
      <section aria-labelledby="section-title">
        <PageHead title="New team" back={{ href: '#/teams', label: 'Teams' }} />
        <p className="notice">
          A team is made from a template, and there is none yet. <a href="#/team-templates/new">Create a team template</a> first.
        </p>
      </section>
    );
  return (
    <section aria-labelledby="section-title">
      <PageHead title="New team" back={{ href: '#/teams', label: 'Teams' }} blurb="The team gets a model key per role and its sandboxes; this takes up to about a minute." />
      <ProblemNote error={templates.error} />
      <form className="panel form" aria-label="new team" onSubmit={(e) => void submit(e)}>
        <fieldset disabled={busy}>
          <div className="row">
            <Field label="Name" name="name" error={error} hint="lowercase letters, digits and -">
              <input required value={f.name} onChange={set('name')} pattern="[a-z0-9][a-z0-9\-]{0,62}" />
            </Field>
            <Field label="Template" name="template.name" error={error}>
              <select required value={f.template} onChange={set('template')}>
                <option value="">choose…</option>
                {templates.data?.map((t) => (
                  <option key={t.name}>{t.name}</option>
                ))}
              </select>
            </Field>
            <Field label="Template version" name="template.version" error={error} hint={chosen ? `empty: the current one (${chosen.current_version})` : 'empty: the current one'}>
              <input type="number" min={1} value={f.version} onChange={set('version')} />
            </Field>
          </div>
          <div className="row">
            <Field label="Repository URL" name="repo_url" error={error} hint="needed when the template says so">
              <input type="url" value={f.repo_url} onChange={set('repo_url')} />
            </Field>
            <Field label="Home" name="home.surface" error={error}>
              <select value={f.surface} onChange={set('surface')}>
                <option value="none">the Console</option>
                <option value="chat_a">chat A room</option>
                <option value="chat_b">chat B channel</option>
              </select>
            </Field>
            {f.surface !== 'none' && (
              <Field label="Room" name="home.room_id" error={error} hint={f.surface === 'chat_a' ? 'the channel id (in the channel: View Info); the team\'s bot must be a member' : 'the channel id; the app must be in the channel'}>
                <input required value={f.room_id} onChange={set('room_id')} />
              </Field>
            )}
            <Field label="Budget (USD per day)" name="budget_usd_per_day" error={error} hint="empty: the template's">
              <input type="number" min="0.01" step="0.01" value={f.budget} onChange={set('budget')} />
            </Field>
          </div>
        </fieldset>
        <ProblemNote error={error} />
        {busy && <Provisioning name={f.name.trim()} />}
        <div className="row">
          <button type="submit" disabled={busy}>
            {busy ? 'Creating…' : 'Create team'}
          </button>
          <a href="#/teams">Cancel</a>
        </div>
      </form>
    </section>
  );
}

/** While the create request runs: the seconds it has taken and what the team's record says so far. */
function Provisioning({ name }: { name: string }) {
  const [seconds, setSeconds] = useState(0);
  const [status, setStatus] = useState<string | null>(null);
  useEffect(() => {
    const started = Date.now();
    const tick = setInterval(() => setSeconds(Math.round((Date.now() - started) / 1000)), 1000);
    const poll = setInterval(() => {
      get<{ status: string }>(`/teams/${seg(name)}`).then(
        (t) => setStatus(t.status),
        (err: unknown) => setStatus(err instanceof ApiError && err.status === 404 ? null : 'unknown'),
      );
    }, 2000);
    return () => {
      clearInterval(tick);
      clearInterval(poll);
    };
  }, [name]);
  return (
    <div className="progress notice" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      <span>
        Creating team {name}: {status === 'provisioning' ? 'the record is made; giving each role its model key and sandbox' : 'checking the template and reserving the name'}… {seconds} s
      </span>
    </div>
  );
}
