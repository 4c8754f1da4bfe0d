import { getAll } from '../../api.ts';
import { Chain, Field, useLoad } from '../../ui.tsx';

export interface RoleRow {
  role: string;
  agent: string;
  model: string;
  vm: string;
  /** The role this one hands its work to ('' for none). */
  next: string;
}

/** The `roles` and `pipeline` of a template body from the editor's rows. */
export function rolesBody(rows: RoleRow[]) {
  const roles: Record<string, { agent: string; model: string; vm: string }> = {};
  const pipeline: Record<string, string> = {};
  for (const r of rows) {
    const name = r.role.trim();
    roles[name] = { agent: r.agent, model: r.model, vm: r.vm };
    if (r.next) pipeline[name] = r.next;
  }
  return { roles, pipeline };
}

/** The chain of roles starting at the lead, following the pipeline (stopping at a loop). */
export function chainOf(lead: string, pipeline: Record<string, string>): string[] {
  const out = [lead];
  let at = lead;
  while (pipeline[at] && !out.includes(pipeline[at])) {
    at = pipeline[at];
    out.push(at);
  }
  return out;
}

/** Rows of roles (agent, model, environment, hand-off), the lead, and the resulting chain drawn. */
export function RolesEditor({ rows, onChange, lead, onLead, error }: { rows: RoleRow[]; onChange: (rows: RoleRow[]) => void; lead: string; onLead: (lead: string) => void; error: unknown }) {
  const catalogues = useLoad(async () => {
    const [agents, models, environments] = await Promise.all([getAll<{ name: string }>('/agents'), getAll<{ alias: string }>('/models'), getAll<{ name: string }>('/environments')]);
    return { agents, models, environments };
  });
  const c = catalogues.data;
  const update = (i: number, patch: Partial<RoleRow>) => onChange(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  const names = rows.map((r) => r.role.trim()).filter(Boolean);
  const { pipeline } = rolesBody(rows);

  return (
    <fieldset className="roles">
      <legend>Roles</legend>
      {c && c.environments.length === 0 && (
        <p className="notice">
          There are no environments yet: <a href="#/environments">create one</a> for the roles to run in.
        </p>
      )}
      {rows.map((r, i) => {
        const key = r.role.trim() || `role ${i + 1}`;
        return (
          <div className="row role-row" key={i} role="group" aria-label={`role ${i + 1}`}>
            <Field label="Role" name={`roles.${r.role.trim()}`} error={error}>
              <input required value={r.role} pattern="[a-z][a-z0-9_\-]*" onChange={(e) => update(i, { role: e.target.value })} />
            </Field>
            <Field label="Agent" name={`roles.${key}.agent`} error={error}>
              <select required value={r.agent} onChange={(e) => update(i, { agent: e.target.value })}>
                <option value="">choose…</option>
                {c?.agents.map((a) => (
                  <option key={a.name}>{a.name}</option>
                ))}
              </select>
            </Field>
            <Field label="Model" name={`roles.${key}.model`} error={error}>
              <select required value={r.model} onChange={(e) => update(i, { model: e.target.value })}>
                <option value="">choose…</option>
                {c?.models.map((m) => (
                  <option key={m.alias}>{m.alias}</option>
                ))}
              </select>
            </Field>
            <Field label="Environment" name={`roles.${key}.vm`} error={error}>
              <select required value={r.vm} onChange={(e) => update(i, { vm: e.target.value })}>
                <option value="">choose…</option>
                {c?.environments.map((m) => (
                  <option key={m.name}>{m.name}</option>
                ))}
              </select>
            </Field>
            <Field label="Hands off to" name={`pipeline.${key}`} error={error}>
              <select value={r.next} onChange={(e) => update(i, { next: e.target.value })}>
                <option value="">nobody</option>
                {names
                  .filter((n) => n !== r.role.trim())
                  .map((n) => (
                    <option key={n}>{n}</option>
                  ))}
              </select>
            </Field>
            {rows.length > 1 && (
              <button type="button" className="secondary small" onClick={() => onChange(rows.filter((_, j) => j !== i))}>
                Remove {key}
              </button>
            )}
          </div>
        );
      })}
      <div className="row">
        <button type="button" className="secondary small" onClick={() => onChange([...rows, { role: '', agent: '', model: '', vm: '', next: '' }])}>
          Add a role
        </button>
        <Field label="Lead" name="lead" error={error} hint="the role every work item starts with">
          <select value={names.includes(lead) ? lead : ''} onChange={(e) => onLead(e.target.value)}>
            <option value="" disabled>
              choose…
            </option>
            {names.map((n) => (
              <option key={n}>{n}</option>
            ))}
          </select>
        </Field>
      </div>
      {names.includes(lead) && <Chain steps={chainOf(lead, pipeline)} label="pipeline" />}
    </fieldset>
  );
}
