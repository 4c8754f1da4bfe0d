import { useState } from 'react';
import type { Doc } from '../../resource.ts';
import { DataTable, Field, ProblemNote, SaveButtons, useAction } from '../../ui.tsx';
import type { RoleSetting, Team } from '../../types.ts';

/** Each role's settings, and a form to change what the team may change (model, scale, caps, memory). */
export function RoleSettings({ team, write, canWrite }: { team: Team; write: Doc<Team>['write']; canWrite: boolean }) {
  const [editing, setEditing] = useState<string | null>(null);
  const rows = team.role_settings.map((r) => ({
    ...r,
    role: r.role === team.lead ? `${r.role} (lead)` : r.role,
    key: r.role,
    limits: [r.max_budget !== null ? `$${r.max_budget}/${r.budget_duration ?? '?'}` : null, r.rpm_limit ? `${r.rpm_limit} rpm` : null, r.tpm_limit ? `${r.tpm_limit} tpm` : null].filter(Boolean).join(', ') || '—',
    memory_text: `${r.memory.inject ? `inject ${r.memory.max_entries}` : 'no injection'}${r.memory.own.length ? ` (own: ${r.memory.own.join(', ')})` : ''}`,
    scale: `${r.replicas_max} × ${r.concurrent_runs}`,
    confirmation: r.confirmation_policy === 'confirm_risky' ? 'risky actions' : r.confirmation_policy === 'never_confirm' ? 'never' : '—',
  }));
  const role = team.role_settings.find((r) => r.role === editing);
  return (
    <div className="part">
      <h2>Roles</h2>
      <DataTable
        rows={rows}
        label="role settings"
        variant="compact"
        columns={['role', 'agent', 'model', 'profile', 'scale', 'max_iterations', 'confirmation', 'pipeline_next_role', 'memory_text', 'limits']}
        headings={{ scale: 'Replicas × runs each', max_iterations: 'Iteration cap', confirmation: 'Asks before', pipeline_next_role: 'Hands on to', memory_text: 'Memory' }}
        actions={
          canWrite
            ? (r) => (
                <button type="button" className="secondary small" onClick={() => setEditing(String(r.key))}>
                  Edit {String(r.key)}
                </button>
              )
            : undefined
        }
      />
      {role && <RoleForm key={role.role} role={role} write={write} onDone={() => setEditing(null)} />}
    </div>
  );
}

function RoleForm({ role, write, onDone }: { role: RoleSetting; write: Doc<Team>['write']; onDone: () => void }) {
  const own = role.memory.own.length > 0;
  const [f, setF] = useState({
    model: role.model,
    replicas_max: String(role.replicas_max),
    concurrent_runs: String(role.concurrent_runs),
    max_iterations: role.max_iterations === null ? '' : String(role.max_iterations),
    confirmation_policy: role.confirmation_policy as string,
    ownMemory: own,
    inject: role.memory.inject,
    max_entries: String(role.memory.max_entries),
    write_outcomes: role.memory.write_outcomes,
  });
  const { busy, error, run } = useAction();
  const p = `role_settings.${role.role}`;
  const save = () =>
    run(async () => {
      const patch = {
        model: f.model,
        replicas_max: Number(f.replicas_max),
        concurrent_runs: Number(f.concurrent_runs),
        max_iterations: f.max_iterations === '' ? null : Number(f.max_iterations),
        confirmation_policy: f.confirmation_policy === '' ? null : f.confirmation_policy,
        memory: f.ownMemory ? { inject: f.inject, max_entries: Number(f.max_entries), write_outcomes: f.write_outcomes } : null,
      };
      await write('PATCH', undefined, { role_settings: { [role.role]: patch } }, { replace: true });
      onDone();
    });
  return (
    <form
      className="panel"
      aria-label={`role ${role.role}`}
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
    >
      <h3>Role {role.role}</h3>
      <div className="row">
        <Field label="Model" name={`${p}.model`} error={error}>
          <input required value={f.model} onChange={(e) => setF({ ...f, model: e.target.value })} />
        </Field>
        <Field label="Replicas (max)" name={`${p}.replicas_max`} error={error}>
          <input type="number" min={1} max={50} value={f.replicas_max} onChange={(e) => setF({ ...f, replicas_max: e.target.value })} />
        </Field>
        <Field label="Concurrent runs" name={`${p}.concurrent_runs`} error={error}>
          <input type="number" min={1} max={20} value={f.concurrent_runs} onChange={(e) => setF({ ...f, concurrent_runs: e.target.value })} />
        </Field>
        <Field label="Iteration cap" name={`${p}.max_iterations`} error={error} hint="empty: no cap">
          <input type="number" min={1} value={f.max_iterations} onChange={(e) => setF({ ...f, max_iterations: e.target.value })} />
        </Field>
        <Field label="Confirmation policy" name={`${p}.confirmation_policy`} error={error}>
          <select value={f.confirmation_policy} onChange={(e) => setF({ ...f, confirmation_policy: e.target.value })}>
            <option value="">the agent's</option>
            <option value="never_confirm">never confirm</option>
            <option value="confirm_risky">confirm risky tool calls</option>
          </select>
        </Field>
      </div>
      <div className="row">
        <label className="check">
          <input type="checkbox" checked={f.ownMemory} onChange={(e) => setF({ ...f, ownMemory: e.target.checked })} />
          Own memory settings (otherwise the team's)
        </label>
        {f.ownMemory && (
          <>
            <label className="check">
              <input type="checkbox" checked={f.inject} onChange={(e) => setF({ ...f, inject: e.target.checked })} />
              Inject memory
            </label>
            <Field label="Entries" name={`${p}.memory.max_entries`} error={error}>
              <input type="number" min={0} max={10} value={f.max_entries} onChange={(e) => setF({ ...f, max_entries: e.target.value })} />
            </Field>
            <label className="check">
              <input type="checkbox" checked={f.write_outcomes} onChange={(e) => setF({ ...f, write_outcomes: e.target.checked })} />
              Write outcomes
            </label>
          </>
        )}
      </div>
      <p className="muted">The role's model-key limits (budget, rpm, tpm) come from the template and change with an upgrade.</p>
      <ProblemNote error={error} />
      <SaveButtons busy={busy} label={`Save ${role.role}`} onCancel={onDone} />
    </form>
  );
}
