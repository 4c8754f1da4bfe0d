import { useState } from 'react';
import { call } from '../api.ts';
import { ConfirmButton, Loaded, PageHead, ProblemNote, useAction, useLoad } from '../ui.tsx';
import type { ImportPlan, PlanEntry } from '../types.ts';

const KIND: Record<PlanEntry['kind'], string> = { agent: 'Agent', template: 'Team template', policy: 'Policy (destination)', skill: 'Skill' };

const plan = (body: { dry_run: boolean; force: boolean; prune: boolean }) => call<ImportPlan>('POST', '/import', { body }).then((a) => a.body);

/** One line of a diff, coloured by what it does: removed, added, or context. */
function Diff({ text }: { text: string }) {
  return (
    <pre className="diff" aria-label="what changes">
      {text.split('\n').map((line, i) => (
        <span key={i} className={line.startsWith('+ ') ? 'added' : line.startsWith('- ') ? 'removed' : undefined}>
          {line}
          {'\n'}
        </span>
      ))}
    </pre>
  );
}

/**
 * The import from the configuration repository (admin): the plan of a dry run, entry by entry
 * with its diff, what the repository leaves alone and every problem with its file and line; Apply
 * writes that plan in one transaction.
 */
export function Import() {
  const [force, setForce] = useState(false);
  const [prune, setPrune] = useState(false);
  return (
    <section aria-labelledby="section-title">
      <PageHead title="Import" blurb="Agents, team templates, gateway policies and skills from the configuration repository. The plan below is a dry run: nothing is written until you apply it." />
      <form className="row filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          <input type="checkbox" checked={force} onChange={(e) => setForce(e.target.checked)} /> Overwrite skills edited in the console (force)
        </label>
        <label>
          <input type="checkbox" checked={prune} onChange={(e) => setPrune(e.target.checked)} /> Delete what the repository does not name (prune)
        </label>
      </form>
      {/* A new plan for each choice of options: the key remounts it. */}
      <Plan key={`${force}:${prune}`} force={force} prune={prune} />
    </section>
  );
}

function Plan({ force, prune }: { force: boolean; prune: boolean }) {
  const dry = useLoad(() => plan({ dry_run: true, force, prune }));
  const apply = useAction();
  const [applied, setApplied] = useState<ImportPlan | null>(null);
  return (
    <>
      <button type="button" className="secondary" onClick={() => void dry.reload()} disabled={dry.loading}>
        {dry.loading ? 'Reading the repository…' : 'Read the repository again'}
      </button>
      {applied && (
        <p className="notice" role="status">
          Imported from {applied.commit ? `commit ${applied.commit.slice(0, 12)}` : 'the configuration directory'}: {applied.entries.filter((e) => e.action !== 'unchanged' && e.action !== 'skip').length} change(s) written.
        </p>
      )}
      <Loaded data={dry.data} error={dry.error} loading={dry.loading}>
        {(p) => {
          const changes = p.entries.filter((e) => e.action !== 'unchanged' && e.action !== 'skip').length;
          return (
            <>
              <p>
                {p.commit ? (
                  <>
                    Commit <code>{p.commit}</code>
                  </>
                ) : (
                  'A directory that is not a git checkout'
                )}
                : {changes} change(s), {p.entries.filter((e) => e.action === 'unchanged').length} unchanged, {p.entries.filter((e) => e.action === 'skip').length} skipped.
              </p>
              {p.problems.length > 0 && (
                <div className="problem" role="alert">
                  <p>The repository has {p.problems.length} problem(s); nothing can be imported until they are fixed there:</p>
                  <ul>
                    {p.problems.map((x, i) => (
                      <li key={i}>
                        <code>
                          {x.file}
                          {x.line ? `:${x.line}` : ''}
                        </code>
                        {x.field ? ` ${x.field}` : ''}: {x.message}
                      </li>
                    ))}
                  </ul>
                </div>
              )}
              <table>
                <caption className="visually-hidden">the plan</caption>
                <thead>
                  <tr>
                    <th scope="col">Action</th>
                    <th scope="col">Kind</th>
                    <th scope="col">Name</th>
                    <th scope="col">File</th>
                    <th scope="col">What changes</th>
                  </tr>
                </thead>
                <tbody>
                  {p.entries.map((e) => (
                    <tr key={`${e.kind}:${e.name}`}>
                      <td>{e.action}</td>
                      <td>{KIND[e.kind]}</td>
                      <td>{e.name}</td>
                      <td>{e.file ? <code>{e.file}</code> : '—'}</td>
                      <td>
                        {e.reason && <p>{e.reason}</p>}
                        {e.diff && e.action !== 'unchanged' ? <Diff text={e.diff} /> : e.reason ? null : '—'}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
              {p.left_alone.length > 0 && (
                <p className="muted">
                  Left alone (the repository does not name them{prune ? '' : '; prune deletes them'}): {p.left_alone.map((l) => `${l.kind} ${l.name}`).join(', ')}
                </p>
              )}
              <ConfirmButton
                label="Apply"
                confirm={`Write ${changes} change(s) from ${p.commit ? `commit ${p.commit.slice(0, 12)}` : 'the directory'} in one transaction?`}
                disabled={apply.busy || p.problems.length > 0 || changes === 0}
                onConfirm={() =>
                  void apply.run(async () => {
                    setApplied(await plan({ dry_run: false, force, prune }));
                    await dry.reload();
                  })
                }
              />
              <ProblemNote error={apply.error} />
            </>
          );
        }}
      </Loaded>
    </>
  );
}
