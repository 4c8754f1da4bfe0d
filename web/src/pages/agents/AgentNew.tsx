import { useState, type FormEvent } from 'react';
import { call, getAll, seg } from '../../api.ts';
import { go } from '../../hash.ts';
import { Field, listOf, PageHead, ProblemNote, useAction, useLoad } from '../../ui.tsx';
import type { Environment, ModelEntry, ToolEntry } from '../../types.ts';

interface Catalogues {
  models: ModelEntry[];
  environments: Environment[];
  tools: ToolEntry[];
}

export async function loadCatalogues(): Promise<Catalogues> {
  const [models, environments, tools] = await Promise.all([
    getAll<ModelEntry>('/models'),
    getAll<Environment>('/environments'),
    getAll<ToolEntry>('/tools'),
  ]);
  return { models, environments, tools };
}

/** A new agent and its first version. */
export function AgentNew() {
  const catalogues = useLoad(loadCatalogues);
  const [f, setF] = useState({ name: '', display_name: '', description: '', system_prompt: '', model: '', environment: '', tools: '', confirmation_policy: 'never_confirm', egress: 'allow_all', destinations: '' });
  const { busy, error, run } = useAction();
  const set = (k: keyof typeof f) => (e: { target: { value: string } }) => setF({ ...f, [k]: e.target.value });

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    await run(async () => {
      const body = {
        name: f.name.trim(),
        display_name: f.display_name.trim() || null,
        description: f.description,
        version: {
          system_prompt: f.system_prompt,
          tools: listOf(f.tools),
          confirmation_policy: f.confirmation_policy,
          model: f.model || null,
          environment: f.environment || null,
          egress: f.egress === 'allowlist' ? { mode: 'allowlist', destinations: listOf(f.destinations) } : { mode: 'allow_all' },
          note: 'first version',
        },
      };
      const { body: agent } = await call<{ name: string }>('POST', '/agents', { body });
      go(`#/agents/${seg(agent.name)}`);
    });
  };

  const c = catalogues.data;
  return (
    <section aria-labelledby="section-title">
      <PageHead title="New agent" back={{ href: '#/agents', label: 'Agents' }} blurb="The first version becomes current; later edits add versions." />
      <ProblemNote error={catalogues.error} />
      <form className="panel form" aria-label="new agent" onSubmit={(e) => void submit(e)}>
        <div className="row">
          <Field label="Name" name="name" error={error} hint="lowercase letters, digits and -">
            <input required value={f.name} onChange={set('name')} />
          </Field>
          <Field label="Display name" name="display_name" error={error}>
            <input value={f.display_name} onChange={set('display_name')} />
          </Field>
        </div>
        <Field label="Description" name="description" error={error}>
          <input value={f.description} onChange={set('description')} />
        </Field>
        <Field label="System prompt" name="version.system_prompt" error={error}>
          <textarea required rows={8} value={f.system_prompt} onChange={set('system_prompt')} />
        </Field>
        <div className="row">
          <Field label="Model" name="version.model" error={error}>
            <select value={f.model} onChange={set('model')}>
              <option value="">(the template role's)</option>
              {c?.models.map((m) => (
                <option key={m.alias} value={m.alias}>
                  {m.alias} → {m.model}
                </option>
              ))}
            </select>
          </Field>
          <Field label="Environment" name="version.environment" error={error}>
            <select value={f.environment} onChange={set('environment')}>
              <option value="">(the template role's)</option>
              {c?.environments.map((m) => (
                <option key={m.name}>{m.name}</option>
              ))}
            </select>
          </Field>
          <Field label="Confirmation policy" name="version.confirmation_policy" error={error}>
            <select value={f.confirmation_policy} onChange={set('confirmation_policy')}>
              <option value="never_confirm">never confirm</option>
              <option value="confirm_risky">confirm risky tool calls</option>
            </select>
          </Field>
        </div>
        <Field label="Tools" name="version.tools" error={error} hint={c ? `comma-separated; available: ${c.tools.map((t) => t.name + (t.risky ? ' (risky)' : '')).join(', ')}` : 'comma-separated'}>
          <input value={f.tools} onChange={set('tools')} />
        </Field>
        <div className="row">
          <Field label="Egress" name="version.egress" error={error}>
            <select value={f.egress} onChange={set('egress')}>
              <option value="allow_all">allow all destinations</option>
              <option value="allowlist">only these destinations</option>
            </select>
          </Field>
          {f.egress === 'allowlist' && (
            <Field label="Destinations" name="version.egress.destinations" error={error} hint="comma-separated destination names">
              <input value={f.destinations} onChange={set('destinations')} />
            </Field>
          )}
        </div>
        <ProblemNote error={error} />
        <div className="row">
          <button type="submit" disabled={busy}>
            {busy ? 'Creating…' : 'Create agent'}
          </button>
          <a href="#/agents">Cancel</a>
        </div>
      </form>
    </section>
  );
}
