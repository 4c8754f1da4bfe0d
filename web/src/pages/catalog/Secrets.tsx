import { useEffect, useState } from 'react';
import type { Page } from '../../api.ts';
import { openDoc } from '../../resource.ts';
import { cellText, ConfirmButton, Empty, Field, PagedTable, PageHead, ProblemNote, useAction, useCan, usePaged } from '../../ui.tsx';
import type { SecretRef } from '../../types.ts';

/** The path of a secret: its name may hold slashes, which the route takes as they are. */
const secretPath = (name: string) => `/secrets/${name.split('/').map(encodeURIComponent).join('/')}`;

/**
 * Writes a secret's value (created, or replaced with the ETag just read). The value goes to the
 * server once and is never read back.
 */
export async function setSecret(name: string, value: string): Promise<void> {
  await (await openDoc<SecretRef>(secretPath(name), { missing: true })).write('PUT', undefined, { value });
}

/** Secrets: write-only values. Set, replace, remove; what uses each. */
export function Secrets({ preset }: { preset: string | null }) {
  const list = usePaged<SecretRef>('/secrets');
  const admin = useCan('admin');
  const [name, setName] = useState(preset ?? '');
  // A link with ?name= followed while this page is open fills the form as well.
  useEffect(() => {
    if (preset !== null) setName(preset);
  }, [preset]);
  const [value, setValue] = useState('');
  const [done, setDone] = useState<string | null>(null);
  const write = useAction();
  const remove = useAction();

  const put = (target: string) =>
    write.run(async () => {
      setDone(null);
      await setSecret(target, value);
      setValue('');
      setDone(`${target}: value stored. It will not be shown again.`);
      await list.reload();
    });

  const del = (s: SecretRef) =>
    remove.run(async () => {
      await (await openDoc<SecretRef>(secretPath(s.name))).write('DELETE');
      await list.reload();
    });

  const existing = (list.data as Page<SecretRef> | null)?.items.find((s) => s.name === name.trim());
  return (
    <section aria-labelledby="section-title">
      <PageHead title="Secrets" blurb="Values are written once and never shown; destinations, integrations and MCP servers refer to them as secret:<name>." />
      {admin && (
        <form
          className="panel"
          aria-label="set a secret"
          onSubmit={(e) => {
            e.preventDefault();
            void put(name.trim());
          }}
        >
          <div className="row">
            <Field label="Secret name" name="*" error={write.error} hint="e.g. github-token or integrations/code_host/app_key">
              <input required value={name} onChange={(e) => setName(e.target.value)} autoComplete="off" />
            </Field>
            <Field label="Value" name="value" error={write.error}>
              <input required type="password" value={value} onChange={(e) => setValue(e.target.value)} autoComplete="new-password" />
            </Field>
            <button type="submit" disabled={write.busy}>
              {existing?.set ? 'Replace value' : 'Set value'}
            </button>
          </div>
          {existing && <p className="muted">{existing.set ? `Has a value since ${cellText(existing.value_set_at)}; saving replaces it.` : 'Known but without a value.'}</p>}
          <ProblemNote error={write.error} />
          {done && (
            <p className="notice" role="status">
              {done}
            </p>
          )}
        </form>
      )}
      <ProblemNote error={remove.error} />
      <PagedTable
        list={list}
        label="secrets"
        columns={['name', 'kind', 'set', 'used_by', 'value_set_at', 'updated_by']}
        cells={{
          set: (s) => <span className={`badge ${s.set ? 'good' : 'warn'}`}>{s.set ? 'set' : 'no value'}</span>,
          used_by: (s) => (s.used_by === 0 ? 'unused' : `${s.used_by} place${s.used_by === 1 ? '' : 's'}`),
        }}
        empty={<Empty>{admin ? 'No secrets yet. Set one above; then name it as secret:<name> in a destination, an integration or an MCP server.' : 'No secrets yet.'}</Empty>}
        actions={
          admin
            ? (s) => (
                <>
                  <button type="button" className="secondary small" onClick={() => setName(s.name)}>
                    {s.set ? 'Replace' : 'Set'}
                  </button>
                  {s.set && <ConfirmButton label="Delete" confirm={`Delete ${s.name}`} onConfirm={() => void del(s)} disabled={remove.busy} />}
                </>
              )
            : undefined
        }
      />
    </section>
  );
}
