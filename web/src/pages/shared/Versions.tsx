import { useEffect, useRef, useState, type ReactNode } from 'react';
import { get } from '../../api.ts';
import type { Doc } from '../../resource.ts';
import { checked, type Schema } from '../../schema.ts';
import { SchemaForm, useSchema } from '../../SchemaForm.tsx';
import { cellText, PagedTable, ProblemNote, SaveButtons, useAction, usePaged, VersionDiff } from '../../ui.tsx';
import type { VersionMeta } from '../../types.ts';

/** The meta fields of a version, left out of the diff so it shows content only. */
const META = new Set(['version', 'note', 'created_by', 'created_at', 'content_sha256']);
const content = (v: Record<string, unknown>) => Object.fromEntries(Object.entries(v).filter(([k]) => !META.has(k)));

/**
 * The versions of an agent or a template, newest first: pick two to compare side by side, and
 * (with `onRestore`) make an older one current again.
 */
export function Versions({ base, current, onRestore, busy }: { base: string; current: number; onRestore?: (version: number) => void; busy?: boolean }) {
  const list = usePaged<VersionMeta>(`${base}/versions`);
  const [pair, setPair] = useState<{ left: number; right: number } | null>(null);
  const { reload } = list;
  // A new current version (saved or made current on this page) adds a row: read the list again.
  const shown = useRef(current);
  useEffect(() => {
    if (shown.current === current) return;
    shown.current = current;
    void reload();
  }, [current, reload]);

  const items = list.data?.items ?? [];
  return (
    <div className="part">
      <h2>Versions</h2>
      <PagedTable
        list={list}
        label="versions"
        columns={['version', 'note', 'created_by', 'created_at']}
        cells={{ version: (v) => (v.version === current ? `${v.version} (current)` : String(v.version)) }}
        actions={(v) => (
          <>
            {v.version !== current && (
              <button type="button" className="secondary small" onClick={() => setPair({ left: v.version, right: current })}>
                Compare with current
              </button>
            )}
            {onRestore && v.version !== current && (
              <button type="button" className="secondary small" disabled={busy} onClick={() => onRestore(v.version)}>
                Make current
              </button>
            )}
          </>
        )}
      />
      {items.length > 1 && (
        <div className="row compare">
          <label>
            Compare
            <select value={pair?.left ?? ''} onChange={(e) => setPair({ left: Number(e.target.value), right: pair?.right ?? current })}>
              <option value="" disabled>
                version
              </option>
              {items.map((v) => (
                <option key={v.version} value={v.version}>
                  {v.version}
                </option>
              ))}
            </select>
          </label>
          <label>
            with
            <select value={pair?.right ?? current} onChange={(e) => setPair({ left: pair?.left ?? items[items.length - 1].version, right: Number(e.target.value) })}>
              {items.map((v) => (
                <option key={v.version} value={v.version}>
                  {v.version}
                </option>
              ))}
            </select>
          </label>
        </div>
      )}
      {pair && <PairDiff base={base} left={pair.left} right={pair.right} />}
    </div>
  );
}

function PairDiff({ base, left, right }: { base: string; left: number; right: number }) {
  const [state, setState] = useState<{ left: Record<string, unknown>; right: Record<string, unknown> } | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let live = true;
    setState(null);
    setError(null);
    Promise.all([get<Record<string, unknown>>(`${base}/versions/${left}`), get<Record<string, unknown>>(`${base}/versions/${right}`)]).then(
      ([l, r]) => live && setState({ left: l, right: r }),
      (err: unknown) => live && setError(err),
    );
    return () => {
      live = false;
    };
  }, [base, left, right]);
  if (error) return <ProblemNote error={error} />;
  if (!state) return <p className="muted">Loading the two versions…</p>;
  return (
    <VersionDiff
      left={content(state.left)}
      right={content(state.right)}
      leftLabel={`version ${left} (${cellText(state.left.created_at)})`}
      rightLabel={`version ${right} (${cellText(state.right.created_at)})`}
    />
  );
}

/**
 * "Edit as a new version" of an agent or a template: a form built from the contract's schema of
 * a new version (`schemaName`), started from the current version, saved with the resource's
 * If-Match as a new version at `path`. `children` (the current version) shows while not editing.
 */
export function NewVersion(props: {
  schemaName: string;
  path: string;
  start: () => Record<string, unknown>;
  write: Doc<unknown>['write'];
  onSaved: () => Promise<unknown>;
  fields?: string[];
  omit: string[];
  children?: ReactNode;
}) {
  const { schema, error: schemaError } = useSchema(props.schemaName);
  const [value, setValue] = useState<Record<string, unknown> | null>(null);
  const { busy, error, setError, run } = useAction();
  if (value === null || !schema)
    return (
      <>
        <ProblemNote error={schemaError} />
        {props.children}
        <button
          type="button"
          disabled={!schema}
          onClick={() => {
            setError(null);
            setValue(props.start());
          }}
        >
          Edit as a new version
        </button>
      </>
    );
  const save = (s: Schema) =>
    run(async () => {
      await props.write('POST', props.path, checked(s, value));
      setValue(null);
      await props.onSaved();
    });
  return (
    <form
      className="panel"
      aria-label="new version"
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        void save(schema);
      }}
    >
      <SchemaForm schema={schema} value={value} onChange={setValue} error={error} fields={props.fields} omit={props.omit} label="version" />
      <SaveButtons busy={busy} label="Save as new version" onCancel={() => setValue(null)} />
    </form>
  );
}
