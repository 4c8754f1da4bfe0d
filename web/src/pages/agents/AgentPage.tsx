import { useState } from 'react';
import { API, seg } from '../../api.ts';
import { go } from '../../hash.ts';
import { openDoc, useDoc, type Doc } from '../../resource.ts';
import { asYaml, cellText, ConfirmButton, Field, Loaded, PageHead, ProblemNote, useAction, useCan } from '../../ui.tsx';
import { Documents } from '../shared/Documents.tsx';
import { NewVersion, Versions } from '../shared/Versions.tsx';
import type { Agent } from '../../types.ts';

/** The fields of a version an editor may change (the rest is bookkeeping). */
const EDITABLE = ['system_prompt', 'tools', 'confirmation_policy', 'produces_branch', 'works_on_branch', 'skills', 'mcp_servers', 'egress', 'context'];

/** One agent: its fields, current version, versions with a diff, avatar, documents. */
export function AgentPage({ name }: { name: string }) {
  const base = `/agents/${seg(name)}`;
  const agent = useDoc<Agent>(base);
  const admin = useCan('admin');
  const act = useAction();

  const restore = (version: number) =>
    void act.run(async () => {
      await agent.write('POST', `${base}/versions`, { from_version: version, note: `version ${version} made current again` });
      await agent.reload();
    });

  const remove = () =>
    void act.run(async () => {
      await agent.write('DELETE');
      go('#/agents');
    });

  return (
    <section aria-labelledby="section-title">
      <PageHead title={agent.data?.display_name || name} back={{ href: '#/agents', label: 'Agents' }} blurb={agent.data?.description}>
        {admin && agent.data && <ConfirmButton label="Delete agent" confirm={`Delete ${name}`} onConfirm={remove} disabled={act.busy} />}
      </PageHead>
      <ProblemNote error={act.error} />
      <Loaded data={agent.data} error={agent.error} loading={agent.loading}>
        {(a) => (
          <>
            <div className="split">
              <Avatar agent={a} canWrite={admin} onChanged={() => void agent.reload()} />
              <dl className="fields">
                {(['name', 'kind', 'model', 'environment', 'tool_count', 'current_version', 'used_by', 'updated_at'] as const).map((k) => (
                  <div key={k}>
                    <dt>{k.replace(/_/g, ' ')}</dt>
                    <dd>{cellText(a[k])}</dd>
                  </div>
                ))}
              </dl>
            </div>
            {admin && <EditAgent agent={a} write={agent.write} />}
            <CurrentVersion agent={a} canWrite={admin} write={agent.write} reload={agent.reload} />
            <Versions base={base} current={a.current_version} onRestore={admin ? restore : undefined} busy={act.busy} />
            <Documents base={base} canWrite={admin} owner={`agent ${a.name}`} />
          </>
        )}
      </Loaded>
    </section>
  );
}

function EditAgent({ agent, write }: { agent: Agent; write: Doc<Agent>['write'] }) {
  const [f, setF] = useState({ display_name: agent.display_name ?? '', kind: agent.kind ?? '', description: agent.description });
  const { busy, error, run } = useAction();
  const [open, setOpen] = useState(false);
  if (!open)
    return (
      <button type="button" className="secondary" onClick={() => setOpen(true)}>
        Edit name and description
      </button>
    );
  const save = () =>
    run(async () => {
      await write('PATCH', undefined, { display_name: f.display_name || null, kind: f.kind || null, description: f.description }, { replace: true });
      setOpen(false);
    });
  return (
    <form
      className="panel"
      aria-label="edit agent"
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
    >
      <div className="row">
        <Field label="Display name" name="display_name" error={error}>
          <input value={f.display_name} onChange={(e) => setF({ ...f, display_name: e.target.value })} />
        </Field>
        <Field label="Kind" name="kind" error={error}>
          <input value={f.kind} onChange={(e) => setF({ ...f, kind: e.target.value })} />
        </Field>
      </div>
      <Field label="Description" name="description" error={error}>
        <input value={f.description} onChange={(e) => setF({ ...f, description: e.target.value })} />
      </Field>
      <ProblemNote error={error} />
      <div className="row">
        <button type="submit" disabled={busy}>
          Save
        </button>
        <button type="button" className="secondary" onClick={() => setOpen(false)}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function CurrentVersion({ agent, canWrite, write, reload }: { agent: Agent; canWrite: boolean; write: Doc<Agent>['write']; reload: () => Promise<unknown> }) {
  const cur: Record<string, unknown> | null = agent.current;
  const start = () => ({ ...Object.fromEntries(EDITABLE.filter((k) => cur && k in cur && cur[k] !== null).map((k) => [k, cur![k]])), ...(agent.model ? { model: agent.model } : {}), ...(agent.environment ? { environment: agent.environment } : {}) });
  const shown = cur ? <pre className="raw">{asYaml(Object.fromEntries(EDITABLE.filter((k) => k in cur).map((k) => [k, cur[k]])))}</pre> : <p className="muted">No current version.</p>;
  return (
    <div className="part">
      <h2>Current version {cur ? `(${String(cur.version)})` : ''}</h2>
      {canWrite ? (
        <NewVersion schemaName="AgentVersionInput" path={`/agents/${seg(agent.name)}/versions`} start={start} write={write} onSaved={reload} fields={[...EDITABLE, 'model', 'environment', 'note']} omit={['from_version']}>
          {shown}
        </NewVersion>
      ) : (
        shown
      )}
    </div>
  );
}

function Avatar({ agent, canWrite, onChanged }: { agent: Agent; canWrite: boolean; onChanged: () => void }) {
  const { busy, error, run } = useAction();
  const [broken, setBroken] = useState(false);
  // avatar_url is absolute on SERVICE_PUBLIC_BASE_URL; the page loads it from its own origin (CSP 'self'), keeping the version.
  const src = agent.avatar_url ? `${API}/agents/${seg(agent.name)}/avatar${new URL(agent.avatar_url, window.location.href).search}` : null;
  const upload = (file: File) =>
    run(async () => {
      // Replacing an avatar is guarded by the avatar's own ETag; the first one needs none.
      const avatar = await openDoc(`/agents/${seg(agent.name)}/avatar`, { missing: true, anyType: true });
      await avatar.write('PUT', undefined, undefined, { raw: file });
      setBroken(false);
      onChanged();
    });
  return (
    <div className="avatar-box">
      {src && !broken ? <img className="avatar" src={src} alt={`avatar of ${agent.name}`} onError={() => setBroken(true)} /> : <div className="avatar placeholder">{agent.name.slice(0, 2)}</div>}
      {canWrite && (
        <label className="small-print">
          {busy ? 'Uploading…' : 'Set avatar (image, at most 512 KiB)'}
          <input
            type="file"
            accept="image/png,image/jpeg,image/gif,image/webp"
            disabled={busy}
            onChange={(e) => {
              const file = e.target.files?.[0];
              if (file) void upload(file);
              e.target.value = '';
            }}
          />
        </label>
      )}
      <ProblemNote error={error} />
    </div>
  );
}
