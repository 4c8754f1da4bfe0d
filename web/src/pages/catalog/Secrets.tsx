import { useEffect, useState } from 'react';
import { ApiError, call, type Page } from '../../api.ts';
import { Conflict } from '../../resource.ts';
import { cellText, ConfirmButton, Empty, Field, PagedTable, PageHead, ProblemNote, useAction, useCan, usePaged } from '../../ui.tsx';

interface SecretRef {
  name: string;
  kind: string;
  set: boolean;
  used_by: number;
  value_set_at: string | null;
  updated_by: string;
  [k: string]: unknown;
}

/** The path of a secret: its name may hold slashes, which the route takes as they are. */
const pathOf = (name: string) => `/secrets/${name.split('/').map(encodeURIComponent).join('/')}`;

/** The ETag of a secret reference just read, or null when there is none yet. */
async function currentEtag(name: string): Promise<{ etag: string | null; before: SecretRef | null }> {
  try {
    const { body, etag } = await call<SecretRef>('GET', pathOf(name));
    return { etag, before: body };
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return { etag: null, before: null };
    throw err;
  }
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
      const { etag } = await currentEtag(target);
      try {
        await call('PUT', pathOf(target), { body: { value }, headers: etag ? { 'if-match': etag } : {} });
      } catch (err) {
        if (err instanceof ApiError && err.status === 412) throw new Conflict(['value']);
        throw err;
      }
      setValue('');
      setDone(`${target}: value stored. It will not be shown again.`);
      await list.reload();
    });

  const del = (s: SecretRef) =>
    remove.run(async () => {
      const { etag } = await currentEtag(s.name);
      await call('DELETE', pathOf(s.name), { headers: etag ? { 'if-match': etag } : {} });
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
