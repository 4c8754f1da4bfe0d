import { useState, type FormEvent } from 'react';
import { call, seg } from '../../api.ts';
import { useDoc } from '../../resource.ts';
import { ConfirmButton, Field, PagedTable, ProblemNote, SaveButtons, useAction, usePaged } from '../../ui.tsx';
import type { Document, DocumentSummary } from '../../types.ts';

const MEDIA_TYPES = ['text/markdown', 'text/plain', 'text/csv', 'application/json', 'application/yaml'];

/** Context documents of an agent or a team: list, an editor for each, a new one, delete. */
export function Documents({ base, canWrite, owner }: { base: string; canWrite: boolean; owner: string }) {
  const list = usePaged<DocumentSummary>(`${base}/documents`);
  const [open, setOpen] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);

  return (
    <div className="part">
      <h2>Context documents</h2>
      <p className="muted">Placed read-only under /workspace/context/ in the sandbox of every role that runs {owner}; at most 20 and 384 KiB.</p>
      <PagedTable
        list={list}
        label="documents"
        columns={['name', 'media_type', 'description', 'size_bytes', 'updated_at']}
        empty={canWrite ? 'No documents yet. Add one below.' : 'No documents.'}
        cells={{
          name: (d) => (
            <button type="button" className="link" onClick={() => setOpen(d.name)}>
              {d.name}
            </button>
          ),
        }}
      />
      {canWrite && !creating && open === null && (
        <button type="button" className="secondary" onClick={() => setCreating(true)}>
          New document
        </button>
      )}
      {creating && (
        <NewDocument
          base={base}
          onDone={(name) => {
            setCreating(false);
            if (name) {
              setOpen(name);
              void list.reload();
            }
          }}
        />
      )}
      {open !== null && (
        <DocumentEditor
          key={open}
          path={`${base}/documents/${seg(open)}`}
          canWrite={canWrite}
          onClose={(changed) => {
            setOpen(null);
            if (changed) void list.reload();
          }}
        />
      )}
    </div>
  );
}

function NewDocument({ base, onDone }: { base: string; onDone: (name: string | null) => void }) {
  const [name, setName] = useState('');
  const [mediaType, setMediaType] = useState('text/markdown');
  const [description, setDescription] = useState('');
  const [content, setContent] = useState('');
  const { busy, error, run } = useAction();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    await run(async () => {
      await call('PUT', `${base}/documents/${seg(name.trim())}`, { body: { media_type: mediaType, description, content } });
      onDone(name.trim());
    });
  };
  return (
    <form className="panel" aria-label="new document" onSubmit={(e) => void submit(e)}>
      <h3>New document</h3>
      <div className="row">
        <Field label="File name" name="doc" error={error} hint="a-z, 0-9, . _ -">
          <input required value={name} onChange={(e) => setName(e.target.value)} pattern="[a-z0-9][a-z0-9._\-]{0,62}" />
        </Field>
        <Field label="Type" name="media_type" error={error}>
          <select value={mediaType} onChange={(e) => setMediaType(e.target.value)}>
            {MEDIA_TYPES.map((t) => (
              <option key={t}>{t}</option>
            ))}
          </select>
        </Field>
        <Field label="Description" name="description" error={error}>
          <input maxLength={200} value={description} onChange={(e) => setDescription(e.target.value)} />
        </Field>
      </div>
      <Field label="Content" name="content" error={error}>
        <textarea className="code" rows={12} value={content} onChange={(e) => setContent(e.target.value)} />
      </Field>
      <ProblemNote error={error} />
      <SaveButtons busy={busy} label="Add document" onCancel={() => onDone(null)} />
    </form>
  );
}

function DocumentEditor({ path, canWrite, onClose }: { path: string; canWrite: boolean; onClose: (changed: boolean) => void }) {
  const doc = useDoc<Document>(path);
  const [draft, setDraft] = useState<{ description: string; content: string; media_type: string } | null>(null);
  const { busy, error, run } = useAction();
  const [saved, setSaved] = useState(false);
  const current = draft ?? (doc.data ? { description: doc.data.description, content: doc.data.content, media_type: doc.data.media_type } : null);

  if (doc.error) return <ProblemNote error={doc.error} />;
  if (!current || !doc.data) return <p className="muted">Loading…</p>;
  const save = () =>
    run(async () => {
      await doc.write('PUT', undefined, current, { replace: true });
      setSaved(true);
    });
  const remove = () =>
    run(async () => {
      await doc.write('DELETE');
      onClose(true);
    });
  return (
    <div className="panel" aria-label={`document ${doc.data.name}`} role="region">
      <h3>{doc.data.name}</h3>
      <div className="row">
        <Field label="Type" name="media_type" error={error}>
          <select value={current.media_type} disabled={!canWrite} onChange={(e) => setDraft({ ...current, media_type: e.target.value })}>
            {MEDIA_TYPES.map((t) => (
              <option key={t}>{t}</option>
            ))}
          </select>
        </Field>
        <Field label="Description" name="description" error={error}>
          <input maxLength={200} readOnly={!canWrite} value={current.description} onChange={(e) => setDraft({ ...current, description: e.target.value })} />
        </Field>
      </div>
      <Field label="Content" name="content" error={error}>
        <textarea className="code" rows={16} readOnly={!canWrite} value={current.content} onChange={(e) => setDraft({ ...current, content: e.target.value })} />
      </Field>
      <ProblemNote error={error} />
      {saved && !busy && error === null && <p className="notice">Saved.</p>}
      <div className="row">
        {canWrite && (
          <button type="button" onClick={() => void save()} disabled={busy}>
            {busy ? 'Saving…' : 'Save document'}
          </button>
        )}
        {canWrite && <ConfirmButton label="Delete" confirm={`Delete ${doc.data.name}`} onConfirm={() => void remove()} />}
        <button type="button" className="secondary" onClick={() => onClose(saved)}>
          Close
        </button>
      </div>
    </div>
  );
}
