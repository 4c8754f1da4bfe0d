import { useState } from 'react';
import { call, seg } from '../../api.ts';
import { go } from '../../hash.ts';
import { useDoc } from '../../resource.ts';
import { ConfirmButton, Empty, Field, Loaded, PagedTable, PageHead, ProblemNote, useAction, useCan, usePaged } from '../../ui.tsx';
import type { Skill, SkillSummary } from '../../types.ts';

export function SkillList() {
  const list = usePaged<SkillSummary>('/skills');
  const admin = useCan('admin');
  return (
    <section aria-labelledby="section-title">
      <PageHead title="Skills" blurb="The platform skill catalogue: a SKILL.md each, with files; agents and templates name them.">
        {admin && (
          <a className="button" href="#/skills/new">
            New skill
          </a>
        )}
      </PageHead>
      <PagedTable
        list={list}
        label="skills"
        columns={['name', 'description', 'files', 'size_bytes', 'revision', 'updated_at']}
        cells={{ name: (s) => <a href={`#/skills/${seg(s.name)}`}>{s.name}</a>, files: (s) => s.files.join(', ') || '—' }}
        empty={<Empty>No skills in the catalogue. {admin && <a href="#/skills/new">Write the first one</a>}</Empty>}
      />
    </section>
  );
}

const starter = (name: string) => `---\nname: ${name || 'my-skill'}\ndescription: what the skill does and when to use it\n---\n\n# ${name || 'my-skill'}\n\nSteps the agent follows.\n`;

type Files = Array<{ path: string; text: string }>;

/** The SKILL.md body and the files of a skill, edited together. */
function SkillEditor({ body, files, onBody, onFiles, error, readOnly }: { body: string; files: Files; onBody: (b: string) => void; onFiles: (f: Files) => void; error: unknown; readOnly: boolean }) {
  return (
    <>
      <Field label="SKILL.md" name="body" error={error}>
        <textarea className="code" rows={16} value={body} readOnly={readOnly} onChange={(e) => onBody(e.target.value)} />
      </Field>
      <h3>Files</h3>
      {files.length === 0 && <p className="muted">No files.</p>}
      {files.map((f, i) => (
        <div className="panel" key={i} role="group" aria-label={`file ${f.path || i + 1}`}>
          <div className="row">
            <Field label="Path" name={`resources.${f.path}`} error={error}>
              <input value={f.path} readOnly={readOnly} onChange={(e) => onFiles(files.map((x, j) => (j === i ? { ...x, path: e.target.value } : x)))} />
            </Field>
            {!readOnly && (
              <button type="button" className="secondary small" onClick={() => onFiles(files.filter((_, j) => j !== i))}>
                Remove file
              </button>
            )}
          </div>
          <textarea className="code" rows={8} aria-label={`content of ${f.path}`} value={f.text} readOnly={readOnly} onChange={(e) => onFiles(files.map((x, j) => (j === i ? { ...x, text: e.target.value } : x)))} />
        </div>
      ))}
      {!readOnly && (
        <button type="button" className="secondary small" onClick={() => onFiles([...files, { path: '', text: '' }])}>
          Add a file
        </button>
      )}
    </>
  );
}

const resourcesOf = (files: Files) => Object.fromEntries(files.filter((f) => f.path.trim()).map((f) => [f.path.trim(), f.text]));

export function SkillNew() {
  const [name, setName] = useState('');
  const [body, setBody] = useState<string | null>(null);
  const [files, setFiles] = useState<Files>([]);
  const { busy, error, run } = useAction();
  const save = () =>
    run(async () => {
      await call('PUT', `/skills/${seg(name.trim())}`, { body: { body: body ?? starter(name.trim()), resources: resourcesOf(files) } });
      go(`#/skills/${seg(name.trim())}`);
    });
  return (
    <section aria-labelledby="section-title">
      <PageHead title="New skill" back={{ href: '#/skills', label: 'Skills' }} blurb="The front matter's name must be the skill's name and it needs a description." />
      <form
        className="panel"
        aria-label="new skill"
        onSubmit={(e) => {
          e.preventDefault();
          void save();
        }}
      >
        <Field label="Name" name="name" error={error} hint="lowercase words joined by -">
          <input required value={name} onChange={(e) => setName(e.target.value)} />
        </Field>
        <SkillEditor body={body ?? starter(name.trim())} files={files} onBody={setBody} onFiles={setFiles} error={error} readOnly={false} />
        <ProblemNote error={error} />
        <div className="row">
          <button type="submit" disabled={busy}>
            {busy ? 'Saving…' : 'Create skill'}
          </button>
          <a href="#/skills">Cancel</a>
        </div>
      </form>
    </section>
  );
}

export function SkillPage({ name }: { name: string }) {
  const doc = useDoc<Skill>(`/skills/${seg(name)}`);
  const admin = useCan('admin');
  const [draft, setDraft] = useState<{ body: string; files: Files } | null>(null);
  const [saved, setSaved] = useState(false);
  const { busy, error, run } = useAction();
  const save = () =>
    run(async () => {
      if (!draft) return;
      await doc.write('PUT', undefined, { body: draft.body, resources: resourcesOf(draft.files) }, { replace: true });
      setDraft(null);
      setSaved(true);
    });
  const remove = () =>
    run(async () => {
      await doc.write('DELETE');
      go('#/skills');
    });
  return (
    <section aria-labelledby="section-title">
      <PageHead title={name} back={{ href: '#/skills', label: 'Skills' }} blurb={doc.data?.description}>
        {admin && doc.data && <ConfirmButton label="Delete skill" confirm={`Delete ${name}`} onConfirm={() => void remove()} disabled={busy} />}
      </PageHead>
      <Loaded data={doc.data} error={doc.error} loading={doc.loading}>
        {(s) => {
          const current = draft ?? { body: s.body, files: Object.entries(s.resources).map(([path, text]) => ({ path, text })) };
          return (
            <form
              aria-label="skill"
              onSubmit={(e) => {
                e.preventDefault();
                void save();
              }}
            >
              <p className="muted">
                Revision {s.revision}, {s.size_bytes} bytes.
              </p>
              <SkillEditor
                body={current.body}
                files={current.files}
                onBody={(b) => {
                  setSaved(false);
                  setDraft({ ...current, body: b });
                }}
                onFiles={(f) => {
                  setSaved(false);
                  setDraft({ ...current, files: f });
                }}
                error={error}
                readOnly={!admin}
              />
              <ProblemNote error={error} />
              {saved && <p className="notice">Saved.</p>}
              {admin && (
                <div className="row">
                  <button type="submit" disabled={busy || draft === null}>
                    {busy ? 'Saving…' : 'Save skill'}
                  </button>
                </div>
              )}
            </form>
          );
        }}
      </Loaded>
    </section>
  );
}
