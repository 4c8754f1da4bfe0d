import { useState, type ReactNode } from 'react';
import { call, seg, type Role } from '../../api.ts';
import { go } from '../../hash.ts';
import { useDoc } from '../../resource.ts';
import { checked, type Schema } from '../../schema.ts';
import { SchemaForm, useSchema } from '../../SchemaForm.tsx';
import { cellText, ConfirmButton, Empty, Field, Loaded, PagedTable, PageHead, ProblemNote, SaveButtons, useAction, useCan, usePaged } from '../../ui.tsx';

type Row = Record<string, unknown> & { name: string };

/** A named resource edited as a whole document: destinations, environments. */
export interface Collection {
  /** `#/<route>` and the API path `/<api>`. */
  route: string;
  api: string;
  title: string;
  singular: string;
  blurb: string;
  columns: string[];
  /** The fields a create or replace body takes (a read's other fields are left out of the editor). */
  fields: string[];
  /** A starting body for a new one. */
  sample: Record<string, unknown>;
  /** The contract's schemas of a create and of a replace body: the forms are built from them. */
  schemas: { create: string; replace: string };
  /** Properties of those schemas the forms leave out (set by the service). */
  omit?: string[];
  writeRole: Role;
  /** Why this one cannot be changed (a built-in), or null. */
  locked?: (row: Row) => string | null;
  /** More on the detail page (e.g. the images of environments). */
  extra?: () => ReactNode;
  /** What creating the first one is for, in the empty list. */
  emptyText: string;
}

const pick = (row: Record<string, unknown>, fields: string[]) => Object.fromEntries(fields.filter((f) => f in row).map((f) => [f, row[f]]));

export function CollectionList({ c }: { c: Collection }) {
  const list = usePaged<Row>(`/${c.api}`);
  const canWrite = useCan(c.writeRole);
  return (
    <section aria-labelledby="section-title">
      <PageHead title={c.title} blurb={c.blurb}>
        {canWrite && (
          <a className="button" href={`#/${c.route}/new`}>
            New {c.singular}
          </a>
        )}
      </PageHead>
      <PagedTable
        list={list}
        label={c.title.toLowerCase()}
        columns={c.columns}
        cells={{ name: (r) => <a href={`#/${c.route}/${seg(r.name)}`}>{r.name}</a> }}
        empty={
          <Empty>
            <p>{c.emptyText}</p>
            {canWrite && <a href={`#/${c.route}/new`}>Create the first {c.singular}</a>}
          </Empty>
        }
      />
      {c.extra?.()}
    </section>
  );
}

export function CollectionNew({ c }: { c: Collection }) {
  const { schema, error: schemaError } = useSchema(c.schemas.create);
  const [value, setValue] = useState<Record<string, unknown>>(() => ({ ...c.sample, name: '' }));
  const { busy, error, run } = useAction();
  const save = (s: Schema) =>
    run(async () => {
      const { body } = await call<Row>('POST', `/${c.api}`, { body: checked(s, value) });
      go(`#/${c.route}/${seg(body.name)}`);
    });
  return (
    <section aria-labelledby="section-title">
      <PageHead title={`New ${c.singular}`} back={{ href: `#/${c.route}`, label: c.title }} blurb={c.blurb} />
      <ProblemNote error={schemaError} />
      {schema && (
        <form
          className="panel"
          aria-label={`new ${c.singular}`}
          noValidate
          onSubmit={(e) => {
            e.preventDefault();
            void save(schema);
          }}
        >
          <SchemaForm schema={schema} value={value} onChange={setValue} error={error} fields={['name', ...c.fields]} omit={c.omit} label={c.singular} />
          <div className="row">
            <button type="submit" disabled={busy}>
              {busy ? 'Creating…' : `Create ${c.singular}`}
            </button>
            <a href={`#/${c.route}`}>Cancel</a>
          </div>
        </form>
      )}
    </section>
  );
}

export function CollectionItem({ c, name }: { c: Collection; name: string }) {
  const doc = useDoc<Row>(`/${c.api}/${seg(name)}`);
  const canWrite = useCan(c.writeRole);
  const { schema, error: schemaError } = useSchema(c.schemas.replace);
  const [value, setValue] = useState<Record<string, unknown> | null>(null);
  const { busy, error, setError, run } = useAction();
  const locked = doc.data && c.locked ? c.locked(doc.data) : null;
  const save = (s: Schema) =>
    run(async () => {
      await doc.write('PUT', undefined, checked(s, value ?? {}), { replace: true });
      setValue(null);
    });
  const remove = () =>
    run(async () => {
      await doc.write('DELETE');
      go(`#/${c.route}`);
    });
  return (
    <section aria-labelledby="section-title">
      <PageHead title={name} back={{ href: `#/${c.route}`, label: c.title }}>
        {canWrite && doc.data && !locked && <ConfirmButton label={`Delete ${c.singular}`} confirm={`Delete ${name}`} onConfirm={() => void remove()} disabled={busy} />}
      </PageHead>
      <Loaded data={doc.data} error={doc.error} loading={doc.loading}>
        {(row) => (
          <>
            {locked && <p className="notice">{locked}</p>}
            {value === null || !schema ? (
              <>
                <dl className="fields">
                  {Object.entries(row).map(([k, v]) => (
                    <div key={k}>
                      <dt>{k.replace(/_/g, ' ')}</dt>
                      <dd>{Array.isArray(v) ? v.join(', ') || '—' : cellText(v)}</dd>
                    </div>
                  ))}
                </dl>
                <ProblemNote error={schemaError} />
                {canWrite && !locked && schema && (
                  <button
                    type="button"
                    onClick={() => {
                      setError(null);
                      setValue(pick(row, c.fields));
                    }}
                  >
                    Edit
                  </button>
                )}
              </>
            ) : (
              <form
                className="panel"
                aria-label={`edit ${c.singular}`}
                noValidate
                onSubmit={(e) => {
                  e.preventDefault();
                  void save(schema);
                }}
              >
                <Field label="Name" name="name" error={null}>
                  <input value={name} readOnly />
                </Field>
                <SchemaForm schema={schema} value={value} onChange={setValue} error={error} fields={c.fields} omit={['name', ...(c.omit ?? [])]} label={c.singular} />
                <SaveButtons busy={busy} label="Save" onCancel={() => setValue(null)} />
              </form>
            )}
            {value === null && <ProblemNote error={error} />}
          </>
        )}
      </Loaded>
    </section>
  );
}
