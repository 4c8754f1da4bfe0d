import { useState } from 'react';
import { call, getAll, seg } from '../../api.ts';
import { openDoc, useDoc } from '../../resource.ts';
import { asYaml, ConfirmButton, DataTable, Field, listOf, parseStructured, ProblemNote, StructuredEditor, useAction, useCan, useLoad } from '../../ui.tsx';
import type { McpServer } from '../../types.ts';

/** The path of a server for writes: `{team}/{name}`, `platform` for a platform server. */
const writePath = (s: McpServer) => `/mcp-servers/${seg(s.team ?? 'platform')}/${seg(s.name)}`;

/** MCP servers: every one (the section), or a team's (its page); add, change, accept, remove. */
export function McpServers({ team, roles }: { team?: string; roles?: string[] }) {
  const list = useLoad(() => getAll<McpServer>('/mcp-servers'));
  const operator = useCan('operator');
  const admin = useCan('admin');
  const [editing, setEditing] = useState<McpServer | null>(null);
  const act = useAction();
  const items = (list.data ?? []).filter((s) => team === undefined || s.team === team);
  const mayWrite = (s: McpServer) => (s.scope === 'platform' ? admin : operator);
  const rows = items.map((s) => ({ ...s, secret_status: s.secret.status, roles_text: s.scope === 'platform' ? '—' : s.roles.join(', ') || 'every role', warnings_text: s.warnings.length ? `egress of ${s.warnings.join(', ')} lacks ${s.destination}` : '' }));
  return (
    <div className="part">
      <h2>MCP servers</h2>
      {team === undefined && <p className="muted">Platform servers first (agents and templates name them), then each team's.</p>}
      <ProblemNote error={list.error} />
      <ProblemNote error={act.error} />
      {list.data && (
        <DataTable
          rows={rows}
          label="mcp servers"
          columns={team === undefined ? ['id', 'url', 'destination', 'auth', 'secret_status', 'roles_text', 'status', 'warnings_text'] : ['name', 'url', 'destination', 'auth', 'secret_status', 'roles_text', 'status', 'warnings_text']}
          empty={team === undefined ? 'No MCP servers.' : 'The team has no MCP servers of its own.'}
          actions={(r) => {
            const s = r as unknown as McpServer;
            if (!mayWrite(s)) return null;
            return (
              <>
                {s.status === 'proposed' && (
                  <button type="button" className="secondary small" disabled={act.busy} onClick={() => void act.run(async () => { await call('POST', `${writePath(s)}/accept`); await list.reload(); })}>
                    Accept
                  </button>
                )}
                <button type="button" className="secondary small" onClick={() => setEditing(s)}>
                  Edit
                </button>
                <ConfirmButton label="Remove" confirm={`Remove ${s.name}`} disabled={act.busy} onConfirm={() => void act.run(async () => { await removeServer(s); await list.reload(); })} />
              </>
            );
          }}
        />
      )}
      {editing && (
        <EditServer
          key={editing.id}
          server={editing}
          onDone={(changed) => {
            setEditing(null);
            if (changed) void list.reload();
          }}
        />
      )}
      {operator && !editing && <NewServer team={team} roles={roles} admin={admin} onCreated={() => void list.reload()} />}
    </div>
  );
}

/** Removing needs the server's ETag, read just before. */
async function removeServer(s: McpServer) {
  await (await openDoc<McpServer>(`/mcp-servers/${seg(s.id)}`)).write('DELETE', writePath(s));
}

function EditServer({ server, onDone }: { server: McpServer; onDone: (changed: boolean) => void }) {
  const doc = useDoc<McpServer>(`/mcp-servers/${seg(server.id)}`);
  const [text, setText] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  const s = doc.data;
  const value = text ?? (s ? asYaml({ url: s.url, destination: s.destination, auth: s.auth, header: s.header, secret: s.secret.ref, roles: s.roles }) : '');
  const save = () =>
    run(async () => {
      const parsed = parseStructured(value);
      if (parsed.error) throw new Error(`Not valid YAML or JSON: ${parsed.error}`);
      await doc.write('PUT', writePath(server), parsed.value);
      onDone(true);
    });
  return (
    <form
      className="panel"
      aria-label={`edit ${server.name}`}
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
    >
      <h3>{server.id}</h3>
      <ProblemNote error={doc.error} />
      {s && <StructuredEditor label="Server" value={value} onChange={setText} rows={8} error={error} name="server" />}
      {s?.secret.set_with && <p className="muted">The secret has no value yet: {s.secret.set_with}</p>}
      <ProblemNote error={error} />
      <div className="row">
        <button type="submit" disabled={busy || !s}>
          Save
        </button>
        <button type="button" className="secondary" onClick={() => onDone(false)}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function NewServer({ team, roles, admin, onCreated }: { team?: string; roles?: string[]; admin: boolean; onCreated: () => void }) {
  const [open, setOpen] = useState(false);
  const [f, setF] = useState({ team: team ?? '', name: '', url: '', destination: '', auth: 'none', header: '', roles: '' });
  const { busy, error, run } = useAction();
  if (!open)
    return (
      <button type="button" className="secondary" onClick={() => setOpen(true)}>
        Add an MCP server
      </button>
    );
  const set = (k: keyof typeof f) => (e: { target: { value: string } }) => setF({ ...f, [k]: e.target.value });
  return (
    <form
      className="panel"
      aria-label="new mcp server"
      onSubmit={(e) => {
        e.preventDefault();
        void run(async () => {
          await call('POST', '/mcp-servers', {
            body: { team: f.team.trim() || null, name: f.name.trim(), url: f.url.trim(), destination: f.destination.trim(), auth: f.auth, ...(f.auth === 'header' ? { header: f.header.trim() } : {}), roles: listOf(f.roles) },
          });
          setOpen(false);
          setF({ ...f, name: '', url: '', roles: '' });
          onCreated();
        });
      }}
    >
      <div className="row">
        {team === undefined && (
          <Field label={admin ? 'Team (empty: a platform server)' : 'Team'} name="team" error={error}>
            <input value={f.team} onChange={set('team')} required={!admin} />
          </Field>
        )}
        <Field label="Name" name="name" error={error}>
          <input required value={f.name} onChange={set('name')} />
        </Field>
        <Field label="URL" name="url" error={error}>
          <input required type="url" value={f.url} onChange={set('url')} />
        </Field>
        <Field label="Destination" name="destination" error={error} hint="the egress destination that reaches it">
          <input required value={f.destination} onChange={set('destination')} />
        </Field>
        <Field label="Auth" name="auth" error={error}>
          <select value={f.auth} onChange={set('auth')}>
            <option value="none">none</option>
            <option value="bearer">bearer token</option>
            <option value="header">a header</option>
          </select>
        </Field>
        {f.auth === 'header' && (
          <Field label="Header" name="header" error={error}>
            <input required value={f.header} onChange={set('header')} />
          </Field>
        )}
        <Field label="Roles" name="roles" error={error} hint={roles ? `comma-separated, empty: all (${roles.join(', ')})` : 'comma-separated, empty: all'}>
          <input value={f.roles} onChange={set('roles')} />
        </Field>
      </div>
      <ProblemNote error={error} />
      <div className="row">
        <button type="submit" disabled={busy}>
          Add server
        </button>
        <button type="button" className="secondary" onClick={() => setOpen(false)}>
          Cancel
        </button>
      </div>
    </form>
  );
}
