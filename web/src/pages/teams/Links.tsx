import { useState } from 'react';
import { call, seg } from '../../api.ts';
import { ConfirmButton, DataTable, Field, ProblemNote, useAction } from '../../ui.tsx';
import type { Team } from '../../types.ts';

const SURFACES: Array<[string, string]> = [
  ['chat_a', 'chat A room'],
  ['chat_b', 'chat B channel'],
  ['code_host', 'code host repository (owner/repo)'],
  ['tracker_a', 'tracker A team'],
  ['tracker_b', 'tracker B project'],
];

/** The surfaces linked to a team: work arriving there becomes a task for the lead. */
export function Links({ team, canWrite, onChanged }: { team: Team; canWrite: boolean; onChanged: () => void }) {
  const [f, setF] = useState({ surface: 'code_host', external_id: '', label: '' });
  const add = useAction();
  const remove = useAction();
  const base = `/teams/${seg(team.name)}/links`;
  return (
    <div className="part">
      <h2>Links</h2>
      <p className="muted">Work arriving on a linked repository, room or tracker becomes a task for the lead ({team.lead}).</p>
      <DataTable
        rows={team.links}
        label="links"
        columns={['surface', 'external_id', 'label', 'verification']}
        empty="Not linked to anything."
        actions={canWrite ? (l) => <ConfirmButton label="Unlink" confirm={`Unlink ${l.external_id}`} onConfirm={() => void remove.run(async () => { await call('DELETE', `${base}/${seg(l.surface)}/${l.external_id.split('/').map(seg).join('/')}`); onChanged(); })} /> : undefined}
      />
      <ProblemNote error={remove.error} />
      {canWrite && (
        <form
          className="panel"
          aria-label="link a surface"
          onSubmit={(e) => {
            e.preventDefault();
            void add.run(async () => {
              await call('PUT', base, { body: { surface: f.surface, external_id: f.external_id.trim(), ...(f.label.trim() ? { label: f.label.trim() } : {}) } });
              setF({ ...f, external_id: '', label: '' });
              onChanged();
            });
          }}
        >
          <div className="row">
            <Field label="Surface" name="surface" error={add.error}>
              <select value={f.surface} onChange={(e) => setF({ ...f, surface: e.target.value })}>
                {SURFACES.map(([v, l]) => (
                  <option key={v} value={v}>
                    {l}
                  </option>
                ))}
              </select>
            </Field>
            <Field label="External id" name="external_id" error={add.error}>
              <input required value={f.external_id} onChange={(e) => setF({ ...f, external_id: e.target.value })} />
            </Field>
            <Field label="Label (optional)" name="label" error={add.error}>
              <input value={f.label} onChange={(e) => setF({ ...f, label: e.target.value })} />
            </Field>
            <button type="submit" disabled={add.busy}>
              Link
            </button>
          </div>
          <ProblemNote error={add.error} />
        </form>
      )}
    </div>
  );
}
