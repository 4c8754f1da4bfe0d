import { useState } from 'react';
import { seg } from '../../api.ts';
import { useDoc } from '../../resource.ts';
import { asYaml, ConfirmButton, parseStructured, ProblemNote, StructuredEditor, useAction } from '../../ui.tsx';
import type { Egress } from '../../types.ts';

/** A role's egress override: none (the agent's applies), or one an admin sets or removes. */
export function RoleEgress({ team, role, canWrite }: { team: string; role: string; canWrite: boolean }) {
  const doc = useDoc<{ override: Egress | null }>(`/teams/${seg(team)}/roles/${seg(role)}/egress`);
  const [text, setText] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  const o = doc.data?.override ?? null;
  const save = () =>
    run(async () => {
      const parsed = parseStructured(text ?? '');
      if (parsed.error) throw new Error(`The egress is not valid YAML or JSON: ${parsed.error}`);
      await doc.write('PUT', undefined, parsed.value, { replace: true });
      setText(null);
    });
  const remove = () =>
    run(async () => {
      await doc.write('DELETE');
      await doc.reload();
    });
  return (
    <div className="panel" role="group" aria-label={`egress of ${role}`}>
      <h3>{role}</h3>
      <ProblemNote error={doc.error} />
      {doc.data && text === null && (
        <>
          {o ? (
            <p>
              Override: <strong>{o.mode === 'allow_all' ? 'any destination' : `only ${(o.destinations ?? []).join(', ') || 'the built-ins'}`}</strong>
              {o.upstream_deny_cidrs?.length ? `; never ${o.upstream_deny_cidrs.join(', ')}` : ''}
            </p>
          ) : (
            <p className="muted">No override: the agent's egress applies.</p>
          )}
          {canWrite && (
            <div className="row">
              <button type="button" className="secondary small" onClick={() => setText(asYaml(o ?? { mode: 'allowlist', destinations: [], upstream_deny_cidrs: [] }))}>
                {o ? 'Change override' : 'Override'}
              </button>
              {o && <ConfirmButton label="Remove override" confirm={`Use the agent's egress for ${role}`} onConfirm={() => void remove()} disabled={busy} />}
            </div>
          )}
        </>
      )}
      {text !== null && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void save();
          }}
        >
          <StructuredEditor label={`Egress of ${role}`} value={text} onChange={setText} rows={6} error={error} name="egress" />
          <div className="row">
            <button type="submit" disabled={busy}>
              Save override
            </button>
            <button type="button" className="secondary" onClick={() => setText(null)}>
              Cancel
            </button>
          </div>
        </form>
      )}
      <ProblemNote error={error} />
    </div>
  );
}
