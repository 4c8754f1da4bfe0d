import { useState } from 'react';
import { cellText, heading, PagedTable, PageHead, usePaged } from '../../ui.tsx';
import type { AuditEntry } from '../../types.ts';

/** The audit log (admin): every write, newest first, filtered by action or target type. */
export function Audit() {
  const [action, setAction] = useState('');
  const [type, setType] = useState('');
  const q = new URLSearchParams();
  if (action.trim()) q.set('action', action.trim());
  if (type.trim()) q.set('target_type', type.trim());
  const qs = q.toString();
  return (
    <section aria-labelledby="section-title">
      <PageHead title="Audit log" blurb="Every write through the API, newest first: who, how, what and on which target. Secrets never appear here." />
      <form className="row filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <label>
          Action
          <input value={action} onChange={(e) => setAction(e.target.value)} placeholder="e.g. agent.create" />
        </label>
        <label>
          Target type
          <input value={type} onChange={(e) => setType(e.target.value)} placeholder="e.g. team" />
        </label>
      </form>
      <Entries key={qs} path={`/audit${qs ? `?${qs}` : ''}`} />
    </section>
  );
}

function Entries({ path }: { path: string }) {
  const list = usePaged<AuditEntry>(path);
  return (
    <>
      <PagedTable
        list={list}
        label="audit log"
        columns={['at', 'actor', 'via', 'action', 'target_type', 'target', 'details']}
        cells={{ details: (e) => <Details details={e.details} /> }}
        empty="Nothing recorded that matches."
      />
    </>
  );
}

/** An entry's details as named fields, one per line (nested values as short text). */
function Details({ details }: { details: Record<string, unknown> }) {
  const entries = Object.entries(details ?? {});
  if (entries.length === 0) return <>—</>;
  return (
    <dl className="details">
      {entries.map(([k, v]) => (
        <div key={k}>
          <dt>{heading(k)}</dt>
          <dd>{Array.isArray(v) && v.every((x) => typeof x !== 'object') ? v.join(', ') || '—' : cellText(v)}</dd>
        </div>
      ))}
    </dl>
  );
}
