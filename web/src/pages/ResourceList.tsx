import { useState } from 'react';
import { get } from '../api.ts';
import type { Section } from '../sections.ts';
import { cellText, DataTable, heading, ProblemNote, useLoad } from '../ui.tsx';

type Row = Record<string, unknown>;
const isRecord = (v: unknown): v is Row => typeof v === 'object' && v !== null && !Array.isArray(v);
const isRows = (v: unknown): v is Row[] => Array.isArray(v) && v.every(isRecord);

/** A section read from its API route: a `{items, next_cursor}` list as a table, any other object as fields and tables. */
export function ResourceList({ section }: { section: Section }) {
  const api = section.api!;
  const { data, setData, error, loading, reload } = useLoad(() => get<unknown>(api));
  const [more, setMore] = useState<{ busy: boolean; error: unknown }>({ busy: false, error: null });

  const page = isRecord(data) && Array.isArray(data.items) ? (data as { items: unknown[]; next_cursor?: string | null }) : null;

  const loadMore = async () => {
    if (!page?.next_cursor) return;
    setMore({ busy: true, error: null });
    try {
      const sep = api.includes('?') ? '&' : '?';
      const next = await get<{ items: unknown[]; next_cursor?: string | null }>(`${api}${sep}cursor=${encodeURIComponent(page.next_cursor)}`);
      setData({ ...page, items: [...page.items, ...next.items], next_cursor: next.next_cursor ?? null });
      setMore({ busy: false, error: null });
    } catch (err) {
      setMore({ busy: false, error: err });
    }
  };

  return (
    <section aria-labelledby="section-title">
      <div className="section-head">
        <div>
          <h1 id="section-title">{section.label}</h1>
          <p className="muted">{section.blurb}</p>
        </div>
        <button type="button" className="secondary small" onClick={() => void reload()} disabled={loading}>
          Refresh
        </button>
      </div>
      {loading && data === null && error === null && <p className="muted">Loading…</p>}
      <ProblemNote error={error} />
      {error === null && page && (
        <>
          {isRows(page.items) ? (
            <DataTable rows={page.items} label={section.label} empty={`No ${section.label.toLowerCase()} yet.`} />
          ) : (
            <pre className="raw">{JSON.stringify(page.items, null, 2)}</pre>
          )}
          {page.next_cursor && (
            <button type="button" className="secondary" onClick={() => void loadMore()} disabled={more.busy}>
              {more.busy ? 'Loading…' : 'Load more'}
            </button>
          )}
          <ProblemNote error={more.error} />
        </>
      )}
      {error === null && !page && data !== null && <ObjectView value={data} />}
    </section>
  );
}

/** Any other answer (e.g. spend): scalar fields as a list, arrays of records as tables, nested objects in turn. */
function ObjectView({ value, depth = 0 }: { value: unknown; depth?: number }) {
  if (!isRecord(value)) return <pre className="raw">{JSON.stringify(value, null, 2)}</pre>;
  const entries = Object.entries(value);
  const scalars = entries.filter(([, v]) => !isRecord(v) && !Array.isArray(v));
  const nested = entries.filter(([, v]) => isRecord(v) || Array.isArray(v));
  return (
    <div className={depth > 0 ? 'nested' : undefined}>
      {scalars.length > 0 && (
        <dl className="fields">
          {scalars.map(([k, v]) => (
            <div key={k}>
              <dt>{heading(k)}</dt>
              <dd>{cellText(v)}</dd>
            </div>
          ))}
        </dl>
      )}
      {nested.map(([k, v]) => (
        <div key={k} className="part">
          <h2>{heading(k)}</h2>
          {isRows(v) ? <DataTable rows={v} label={heading(k)} /> : depth < 2 && isRecord(v) ? <ObjectView value={v} depth={depth + 1} /> : <pre className="raw">{JSON.stringify(v, null, 2)}</pre>}
        </div>
      ))}
    </div>
  );
}
