import { useCallback, useEffect, useRef, useState, type FormEvent } from 'react';
import { call, type SessionUser } from '../../api.ts';
import { useSeqStream } from '../../sse.ts';
import { cellText, ConfirmButton, ProblemNote, useAction } from '../../ui.tsx';
import { RunBadge } from './RunBadge.tsx';
import './runs.css';
import { mayWrite } from './RunsList.tsx';
import { TraceView } from './TraceView.tsx';
import { ENDED, POST_KINDS, usd, type Post, type Run } from './types.ts';

// Posts drive most changes; this catches the rest (a cancel from elsewhere, cost settling).
const RUN_REFRESH_MS = 10_000;

/** One run: its state, the waiting question or confirmation, tasks, delivery, the live conversation and the trace. */
export function RunPage({ id, user }: { id: string; user: SessionUser }) {
  const [run, setRun] = useState<Run | null>(null);
  const [error, setError] = useState<unknown>(null);
  const loading = useRef(false);
  const again = useRef(false);

  // One read at a time; a post arriving meanwhile asks for one more read after it.
  const reload = useCallback(async () => {
    if (loading.current) {
      again.current = true;
      return;
    }
    loading.current = true;
    try {
      do {
        again.current = false;
        try {
          setRun((await call<Run>('GET', `/runs/${encodeURIComponent(id)}`)).body);
          setError(null);
        } catch (err) {
          setError(err);
        }
      } while (again.current);
    } finally {
      loading.current = false;
    }
  }, [id]);

  useEffect(() => {
    void reload();
    const timer = setInterval(() => void reload(), RUN_REFRESH_MS);
    return () => clearInterval(timer);
  }, [reload]);

  const stream = useSeqStream<Post>(`/runs/${encodeURIComponent(id)}/posts`, POST_KINDS, () => void reload());

  if (run === null)
    return (
      <section>
        <p>
          <a href="#/runs">← Runs</a>
        </p>
        <h1>Run {id}</h1>
        {error === null ? <p className="muted">Loading…</p> : <ProblemNote error={error} />}
      </section>
    );

  // A run on a chat surface is answered and cancelled in its chat room; one from the console, the code host or a tracker here.
  const onChat = run.surface === 'chat_a' || run.surface === 'chat_b';
  const writer = mayWrite(user) && !onChat;
  const live = !ENDED.has(run.state);
  return (
    <section aria-labelledby="section-title" className="run-page">
      <p>
        <a href="#/runs">← Runs</a>
      </p>
      <div className="section-head">
        <div>
          <h1 id="section-title">
            Run {run.id} <RunBadge run={run} />
          </h1>
          <p className="muted">
            Team <a href={`#/runs?team=${encodeURIComponent(run.team)}`}>{run.team}</a> · given by {run.created_by} · {cellText(run.created_at)}
            {run.finished_at && <> · ended {cellText(run.finished_at)}</>}
          </p>
        </div>
        {writer && live && <CancelButton run={run} onDone={setRun} />}
      </div>
      <ProblemNote error={error} />
      <blockquote className="run-task">{run.text}</blockquote>

      {run.state === 'failed' && run.failure_reason && (
        <p className="problem" role="alert">
          <strong>Failed:</strong> {run.failure_reason}
        </p>
      )}
      {run.open_question && run.waiting_for && <Waiting run={run} writer={writer} options={optionsOf(stream.items, run.open_question.seq)} onAnswered={() => void reload()} />}
      {onChat && <p className="notice">This run lives on a chat surface ({run.surface}): answer and cancel it in its {run.surface} thread.</p>}

      <dl className="fields run-facts">
        <div>
          <dt>Cost</dt>
          <dd>{usd(run.cost_usd)}</dd>
        </div>
        <div>
          <dt>Lead</dt>
          <dd>{run.lead}</dd>
        </div>
        <div>
          <dt>Agent versions</dt>
          <dd>
            {Object.entries(run.agent_versions).length === 0
              ? '—'
              : Object.entries(run.agent_versions)
                  .map(([role, v]) => `${role}: v${v}`)
                  .join(', ')}
          </dd>
        </div>
        <div>
          <dt>Delivery</dt>
          <dd>
            <Delivery run={run} />
          </dd>
        </div>
        {run.chat_thread_url && (
          <div>
            <dt>Chat thread</dt>
            <dd>
              <a href={run.chat_thread_url} rel="noreferrer" target="_blank">
                open
              </a>
            </dd>
          </div>
        )}
      </dl>

      <div className="part">
        <h2>Tasks</h2>
        <Tasks run={run} />
      </div>

      <div className="part">
        <div className="row run-posts-head">
          <h2>Conversation</h2>
          {live ? (
            <span className={`stream stream-${stream.status}`} role="status">
              {stream.status === 'live' ? 'live' : stream.status === 'connecting' ? 'connecting…' : stream.status === 'reconnecting' ? 'reconnecting…' : 'not live'}
            </span>
          ) : (
            <span className="stream stream-ended" role="status">
              run ended
            </span>
          )}
        </div>
        <ProblemNote error={stream.error} />
        <Posts posts={stream.items} />
        {writer && !live && <FollowUp run={run} onSent={() => void reload()} />}
      </div>

      <div className="part">
        <h2>Trace</h2>
        <TraceView id={run.id} jaegerUrl={run.jaeger_url} refreshKey={`${run.state}|${run.updated_at}`} />
      </div>
    </section>
  );
}

function Delivery({ run }: { run: Run }) {
  const d = run.delivery;
  if (!d || (!d.branch && !d.commit && !d.pull_request)) return <>{ENDED.has(run.state) ? 'nothing delivered' : 'not yet'}</>;
  return (
    <span className="delivery">
      {d.branch && (
        <>
          branch <code>{d.branch}</code>
        </>
      )}
      {d.commit && (
        <>
          {' '}
          at <code title={d.commit}>{d.commit.slice(0, 12)}</code>
        </>
      )}
      {d.pull_request && (
        <>
          {' · '}
          <a href={d.pull_request.url} rel="noreferrer" target="_blank">
            pull request{d.pull_request.number !== null ? ` #${d.pull_request.number}` : ''}
          </a>
          {d.pull_request.state ? ` (${d.pull_request.state})` : ''}
        </>
      )}
    </span>
  );
}

function Tasks({ run }: { run: Run }) {
  if (run.tasks.length === 0) return <p className="muted">No role has started yet.</p>;
  return (
    <div className="table-wrap">
      <table aria-label="tasks">
        <thead>
          <tr>
            <th>Role</th>
            <th>State</th>
            <th>Agent version</th>
            <th>Iterations</th>
            <th>Cost</th>
            <th>Started</th>
            <th>Finished</th>
          </tr>
        </thead>
        <tbody>
          {run.tasks.map((t) => (
            <tr key={t.id}>
              <td>{t.role}</td>
              <td>
                <TaskState run={run} state={t.state} />
              </td>
              <td>{t.agent_version === null ? '—' : `v${t.agent_version}`}</td>
              <td>{t.iterations}</td>
              <td>{usd(t.cost_usd)}</td>
              <td>{cellText(t.started_at)}</td>
              <td>{cellText(t.finished_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/**
 * A task's state in words. When a run fails, the engine stops its other tasks, which are then
 * stored as cancelled: they are shown as stopped by the failure, since nobody cancelled them.
 */
function TaskState({ run, state }: { run: Run; state: string }) {
  if (run.state === 'failed' && (state === 'cancelled' || state === 'canceled'))
    return (
      <span className="task-state task-state-failed" title="stopped when the run failed">
        stopped: the run failed
      </span>
    );
  return <span className={`task-state task-state-${state}`}>{state}</span>;
}

/** The options a question offered, from its post (the agent's `ask` may give some). */
function optionsOf(posts: Post[], seq: number): string[] {
  const post = posts.find((p) => p.seq === seq);
  const options = post?.data.options;
  return Array.isArray(options) ? options.filter((o): o is string => typeof o === 'string' && o.trim() !== '') : [];
}

/** What a tool post worked on: the first line of its output (which file, which command), when the text does not say. */
function workedOn(p: Post): string | null {
  if (p.kind !== 'working' || typeof p.data.tool !== 'string' || typeof p.data.output !== 'string') return null;
  const first = p.data.output.split('\n').find((l) => l.trim() !== '');
  if (!first || p.text.includes(first.trim())) return null;
  return first.trim().length > 200 ? `${first.trim().slice(0, 197)}…` : first.trim();
}

const KIND_LABEL: Partial<Record<Post['kind'], string>> = {
  task: 'task',
  reply: 'follow-up',
  question: 'question',
  answer: 'answer',
  completed: 'completed',
  failed: 'failed',
  canceled: 'cancelled',
  working: 'working',
  notice: 'notice',
  artifact: 'artifact',
  command_result: 'command result',
};

function Posts({ posts }: { posts: Post[] }) {
  if (posts.length === 0) return <p className="muted">No posts yet.</p>;
  return (
    <ol className="posts" aria-label="conversation">
      {posts.map((p) => (
        <li key={p.seq} className={`post post-${p.kind}`} data-seq={p.seq}>
          <div className="post-head">
            <span className="post-kind">{KIND_LABEL[p.kind] ?? p.kind}</span>
            <span className="post-role">{p.role ?? (typeof p.data.by === 'string' ? p.data.by : 'crewhouse')}</span>
            <span className="muted post-time">
              #{p.seq} · {cellText(p.created_at)}
            </span>
          </div>
          <div className="post-text">{p.text}</div>
          {workedOn(p) && <div className="post-detail">{workedOn(p)}</div>}
          {p.kind === 'working' && typeof p.data.output === 'string' && p.data.output.includes('\n') && (
            <details className="post-output">
              <summary>output</summary>
              <pre>{p.data.output}</pre>
            </details>
          )}
        </li>
      ))}
    </ol>
  );
}

/** The open question (a reply box) or risky-action confirmation (Approve and Refuse). */
function Waiting({ run, writer, options, onAnswered }: { run: Run; writer: boolean; options: string[]; onAnswered: () => void }) {
  const q = run.open_question!;
  const confirmation = run.waiting_for!.kind === 'confirmation';
  const [text, setText] = useState('');
  const { busy, error, run: act } = useAction();

  const send = async (body: { text: string; in_reply_to: number; approve?: boolean }) => {
    const ok = await act(async () => {
      await call('POST', `/runs/${encodeURIComponent(run.id)}/replies`, { body });
    });
    if (ok) {
      setText('');
      onAnswered();
    }
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    void send({ text: text.trim(), in_reply_to: q.seq });
  };

  return (
    <div className="panel waiting" role="region" aria-label={confirmation ? 'confirmation' : 'question'}>
      <h2>{confirmation ? `${q.role} asks to do something risky` : `${q.role} asks`}</h2>
      <p className="waiting-text">{q.text}</p>
      <p className="muted">waiting since {cellText(run.waiting_for!.since)}</p>
      {!writer ? (
        <p className="muted">An operator answers this.</p>
      ) : confirmation ? (
        <>
          <label>
            Note (optional)
            <input value={text} maxLength={16_000} onChange={(e) => setText(e.target.value)} />
          </label>
          <div className="row">
            <button type="button" disabled={busy} onClick={() => void send({ text: text.trim() || 'approve', in_reply_to: q.seq, approve: true })}>
              Approve
            </button>
            <button type="button" className="danger" disabled={busy} onClick={() => void send({ text: text.trim() || 'refuse', in_reply_to: q.seq, approve: false })}>
              Refuse
            </button>
          </div>
        </>
      ) : (
        <form onSubmit={submit} aria-label="answer the question">
          {options.length > 0 && (
            <div className="row options" role="group" aria-label="options">
              {options.map((o) => (
                <button key={o} type="button" className="secondary" disabled={busy} onClick={() => void send({ text: o, in_reply_to: q.seq })}>
                  {o}
                </button>
              ))}
            </div>
          )}
          <label>
            {options.length > 0 ? 'Or answer in your own words' : 'Your answer'}
            <textarea required rows={3} maxLength={16_000} value={text} onChange={(e) => setText(e.target.value)} />
          </label>
          <div className="row">
            <button type="submit" disabled={busy || text.trim() === ''}>
              {busy ? 'Sending…' : 'Send answer'}
            </button>
          </div>
        </form>
      )}
      <ProblemNote error={error} />
    </div>
  );
}

function CancelButton({ run, onDone }: { run: Run; onDone: (r: Run) => void }) {
  const { busy, error, run: act } = useAction();
  return (
    <div>
      <ConfirmButton
        label="Cancel run"
        confirm="Cancel it now"
        disabled={busy}
        onConfirm={() =>
          void act(async () => {
            onDone((await call<Run>('POST', `/runs/${encodeURIComponent(run.id)}/cancel`)).body);
          })
        }
      />
      <ProblemNote error={error} />
    </div>
  );
}

/** A finished run takes a follow-up task in the same run (it reopens). */
function FollowUp({ run, onSent }: { run: Run; onSent: () => void }) {
  const [text, setText] = useState('');
  const { busy, error, run: act } = useAction();
  if (run.state === 'cancelled') return null;
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await act(async () => {
      await call('POST', `/runs/${encodeURIComponent(run.id)}/replies`, { body: { text: text.trim() } });
    });
    if (ok) {
      setText('');
      onSent();
    }
  };
  return (
    <form className="panel" aria-label="follow-up" onSubmit={(e) => void submit(e)}>
      <label>
        Follow-up task (reopens the run)
        <textarea rows={2} maxLength={16_000} value={text} onChange={(e) => setText(e.target.value)} />
      </label>
      <div className="row">
        <button type="submit" className="secondary" disabled={busy || text.trim() === ''}>
          {busy ? 'Sending…' : 'Send follow-up'}
        </button>
      </div>
      <ProblemNote error={error} />
    </form>
  );
}
