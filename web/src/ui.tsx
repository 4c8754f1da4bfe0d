import { cloneElement, createContext, isValidElement, useCallback, useContext, useEffect, useId, useMemo, useRef, useState, type ReactNode } from 'react';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { ApiError, describe, fieldErrors, get, type Page, type Role, type SessionUser } from './api.ts';

/**
 * The field names a page draws with `Field`: a problem line leaves the problems of those fields
 * to them, so each problem is said once.
 */
const DrawnFields = createContext<Set<string> | null>(null);

/** Keeps the names of the fields drawn on one page (the Shell gives each page one). */
export function FieldRegistry({ children }: { children: ReactNode }) {
  const [drawn] = useState(() => new Set<string>());
  return <DrawnFields.Provider value={drawn}>{children}</DrawnFields.Provider>;
}

/** A failed request, in words: the problem's detail and the fields it names (those not shown at a field of the page). */
export function ProblemNote({ error }: { error: unknown }) {
  const drawn = useContext(DrawnFields);
  if (error === null || error === undefined) return null;
  if (error instanceof ApiError && error.errors.length > 0 && drawn !== null && drawn.size > 0) {
    const atField = (f: string) => [...drawn].some((n) => f === n || f.startsWith(`${n}.`) || f.startsWith(`${n}[`) || f.startsWith(`${n}/`));
    const rest = error.errors.filter((e) => !atField(e.field));
    const marked = error.errors.length - rest.length;
    if (marked > 0)
      return (
        <p className="problem" role="alert">
          Not saved: {marked === 1 ? 'one field needs' : `${marked} fields need`} a change (marked in red).
          {rest.length > 0 && ` ${rest.map((e) => `${e.field}: ${e.message}`).join('; ')}.`}
        </p>
      );
  }
  return (
    <p className="problem" role="alert">
      {describe(error)}
    </p>
  );
}

/** Loads something once (and again on `reload`), keeping the last error. */
export function useLoad<T>(load: () => Promise<T>) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const current = useRef(load);
  current.current = load;
  const reload = useCallback(async () => {
    setLoading(true);
    try {
      setData(await current.current());
      setError(null);
    } catch (err) {
      setError(err);
    } finally {
      setLoading(false);
    }
  }, []);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { data, setData, error, loading, reload };
}

/** A list read page by page (`{items, next_cursor}`), with "load more". */
export function usePaged<T>(path: string) {
  const first = useLoad(() => get<Page<T>>(path));
  const [more, setMore] = useState<{ busy: boolean; error: unknown }>({ busy: false, error: null });
  const loadMore = async () => {
    const page = first.data;
    if (!page?.next_cursor) return;
    setMore({ busy: true, error: null });
    try {
      const sep = path.includes('?') ? '&' : '?';
      const next = await get<Page<T>>(`${path}${sep}cursor=${encodeURIComponent(page.next_cursor)}`);
      first.setData({ items: [...page.items, ...next.items], next_cursor: next.next_cursor });
      setMore({ busy: false, error: null });
    } catch (err) {
      setMore({ busy: false, error: err });
    }
  };
  return { ...first, more, loadMore };
}

/** The "load more" button of a paged list and its error. */
export function MoreButton({ paged }: { paged: { data: { next_cursor: string | null } | null; more: { busy: boolean; error: unknown }; loadMore: () => Promise<void> } }) {
  return (
    <>
      {paged.data?.next_cursor && (
        <button type="button" className="secondary" onClick={() => void paged.loadMore()} disabled={paged.more.busy}>
          {paged.more.busy ? 'Loading…' : 'Load more'}
        </button>
      )}
      <ProblemNote error={paged.more.error} />
    </>
  );
}

/**
 * A button's or form's request: `run(work)` marks it busy, clears the last error, and keeps the
 * error if the work throws. It answers whether the work succeeded.
 */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = useCallback(async (work: () => Promise<void>): Promise<boolean> => {
    setBusy(true);
    setError(null);
    try {
      await work();
      return true;
    } catch (err) {
      setError(err);
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, setError, run };
}

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)$/;

/** A table cell's text: scalars as they are, times in local time, anything nested as compact JSON. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '—';
  if (typeof value === 'string') return TIMESTAMP.test(value) ? new Date(value).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }) : value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  const json = JSON.stringify(value);
  return json.length > 160 ? `${json.slice(0, 157)}…` : json;
}

/** The columns of a list: every key of the rows, in the order they first appear. */
export function columnsOf(rows: Array<Record<string, unknown>>): string[] {
  const keys: string[] = [];
  for (const row of rows) for (const k of Object.keys(row)) if (!keys.includes(k)) keys.push(k);
  return keys;
}

/** Units and abbreviations a field name ends with, as a heading says them. */
const UNITS: Array<[string, string]> = [
  ['_usd_per_day', ' (USD per day)'],
  ['_mib', ' (MiB)'],
  ['_gib', ' (GiB)'],
  ['_kib', ' (KiB)'],
  ['_bytes', ' (bytes)'],
  ['_seconds', ' (seconds)'],
  ['_ms', ' (ms)'],
  ['_usd', ' (USD)'],
];
const WORDS: Record<string, string> = { vcpus: 'vCPUs', id: 'ID', ids: 'IDs', url: 'URL', urls: 'URLs', mcp: 'MCP', api: 'API', http: 'HTTP', ssh: 'SSH', rpm: 'RPM', tpm: 'TPM', llm: 'LLM', ip: 'IP', ui: 'UI', sha256: 'SHA-256', github: 'GitHub' };

/** A field name as a heading: `last_login_at` → `Last login at`, `memory_mib` → `Memory (MiB)`. */
export const heading = (key: string) => {
  let unit = '';
  let base = key;
  for (const [suffix, words] of UNITS) {
    if (key.endsWith(suffix) && key.length > suffix.length) {
      unit = words;
      base = key.slice(0, -suffix.length);
      break;
    }
  }
  const parts = base.split('_');
  const words = parts.map((w) => WORDS[w] ?? w).join(' ');
  // An abbreviation keeps its own case (vCPUs).
  return (WORDS[parts[0]] ? words : words.charAt(0).toUpperCase() + words.slice(1)) + unit;
};

/** What a table draws besides its rows. */
interface TableProps<T extends Record<string, unknown>> {
  columns?: string[];
  actions?: (row: T) => ReactNode;
  /** Cells drawn by the page (a link, a badge) instead of as text. */
  cells?: Partial<Record<string, (row: T) => ReactNode>>;
  empty?: ReactNode;
  label?: string;
  /** `compact`: tighter cells and headers that wrap, for a wide table. */
  variant?: 'compact';
  /** Headings of columns the page names itself. */
  headings?: Partial<Record<string, string>>;
}

/** A plain table of records; `actions` adds a last column per row. */
export function DataTable<T extends Record<string, unknown>>(props: TableProps<T> & { rows: T[] }) {
  const { rows, actions } = props;
  if (rows.length === 0) return typeof props.empty === 'string' || props.empty === undefined ? <p className="muted">{props.empty ?? 'Nothing here yet.'}</p> : <>{props.empty}</>;
  const columns = props.columns ?? columnsOf(rows);
  return (
    <div className={props.variant ? `table-wrap ${props.variant}` : 'table-wrap'}>
      <table aria-label={props.label}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c}>{props.headings?.[c] ?? heading(c)}</th>
            ))}
            {actions && <th aria-label="actions" />}
          </tr>
        </thead>
        <tbody>
          {rows.map((row, i) => (
            <tr key={String(row.id ?? row.name ?? i)}>
              {columns.map((c) => {
                const draw = props.cells?.[c];
                if (draw) return <td key={c}>{draw(row)}</td>;
                const text = cellText(row[c]);
                return (
                  <td key={c} title={text.length > 40 ? text : undefined}>
                    {text}
                  </td>
                );
              })}
              {actions && <td className="actions">{actions(row)}</td>}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/**
 * The list of a list page: a paged read (`usePaged`, which the page keeps to reload or change
 * it) as a table, while loading, its problem, and "load more".
 */
export function PagedTable<T extends Record<string, unknown>>({ list, ...table }: TableProps<T> & { list: ReturnType<typeof usePaged<T>> }) {
  return (
    <>
      <ProblemNote error={list.error} />
      {list.loading && !list.data && <p className="muted">Loading…</p>}
      {list.data && <DataTable rows={list.data.items} {...table} />}
      <MoreButton paged={list} />
    </>
  );
}

/** A value the server shows only once (a token, a setup link): selectable, copyable, with a warning. */
export function OnceBox({ label, value, children, onClose }: { label: string; value: string; children?: ReactNode; onClose: () => void }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };
  return (
    <div className="once" role="status">
      <div className="once-head">
        <strong>{label}</strong>
        <span className="muted">shown only now; copy it before you close this</span>
      </div>
      <pre className="once-value" aria-label={label}>
        {value}
      </pre>
      {children}
      <div className="row">
        <button type="button" onClick={() => void copy()}>
          {copied ? 'Copied' : 'Copy'}
        </button>
        <button type="button" className="secondary" onClick={onClose}>
          Done
        </button>
      </div>
    </div>
  );
}

/** A form's submit button (its words while busy) and Cancel. */
export function SaveButtons({ busy, label, busyLabel = 'Saving…', onCancel }: { busy: boolean; label: string; busyLabel?: string; onCancel: () => void }) {
  return (
    <div className="row">
      <button type="submit" disabled={busy}>
        {busy ? busyLabel : label}
      </button>
      <button type="button" className="secondary" onClick={onCancel}>
        Cancel
      </button>
    </div>
  );
}

/** A button that asks once more before a destructive action. */
export function ConfirmButton({ label, confirm, onConfirm, disabled }: { label: string; confirm: string; onConfirm: () => void; disabled?: boolean }) {
  const [asking, setAsking] = useState(false);
  if (!asking)
    return (
      <button type="button" className="secondary small" disabled={disabled} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  return (
    <span className="confirm">
      <button
        type="button"
        className="danger small"
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirm}
      </button>
      {/* Focus lands on the safe choice, so a keyboard user's next Enter does not destroy anything. */}
      <button type="button" className="secondary small" autoFocus onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

/** The signed-in user, for pages that show or hide controls by role. */
export const UserContext = createContext<SessionUser | null>(null);

const RANK: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };

/** Whether the signed-in user holds at least `role` (write controls are hidden otherwise). */
export function useCan(role: Role): boolean {
  const user = useContext(UserContext);
  return user !== null && RANK[user.role] >= RANK[role];
}

/** A page's title row: heading, a line about it, and its actions on the right. */
export function PageHead({ title, blurb, back, children }: { title: ReactNode; blurb?: ReactNode; back?: { href: string; label: string }; children?: ReactNode }) {
  return (
    <div className="section-head">
      <div>
        {back && (
          <a className="back" href={back.href}>
            ← {back.label}
          </a>
        )}
        <h1 id="section-title">{title}</h1>
        {blurb && <p className="muted">{blurb}</p>}
      </div>
      {children && <div className="row">{children}</div>}
    </div>
  );
}

/** Loading and error states of a read; renders `children` once there is data. */
export function Loaded<T>({ data, error, loading, children }: { data: T | null; error: unknown; loading: boolean; children: (data: T) => ReactNode }) {
  if (error !== null && error !== undefined) return <ProblemNote error={error} />;
  if (data === null) return loading ? <p className="muted">Loading…</p> : null;
  return <>{children(data)}</>;
}

/** A labelled input with the field problems the server named for it right below. */
export function Field({ label, name, error, hint, children }: { label: string; name: string; error: unknown; hint?: ReactNode; children: ReactNode }) {
  const messages = fieldErrors(error, name);
  useContext(DrawnFields)?.add(name);
  const id = useId();
  // The label points at the control by id, so the control's name is the label's words alone.
  const control = isValidElement<{ id?: string }>(children) ? cloneElement(children, { id: children.props.id ?? id }) : children;
  return (
    <div className={messages.length > 0 ? 'field invalid' : 'field'}>
      <label htmlFor={isValidElement<{ id?: string }>(children) ? (children.props.id ?? id) : undefined}>{label}</label>
      {control}
      {hint && <span className="hint">{hint}</span>}
      {messages.map((m) => (
        <span key={m} className="field-error" role="alert">
          {name}: {m}
        </span>
      ))}
    </div>
  );
}

/** Parses the text of a JSON or YAML editor; YAML is a superset of JSON, so one parser reads both. */
export function parseStructured(text: string): { value: unknown; error: string | null } {
  try {
    return { value: parseYaml(text) as unknown, error: null };
  } catch (err) {
    return { value: undefined, error: err instanceof Error ? err.message.split('\n')[0] : String(err) };
  }
}

export const asYaml = (value: unknown) => toYaml(value, { lineWidth: 0 });

/** A YAML (or JSON) text area that says at once when the text does not parse. */
export function StructuredEditor({ label, value, onChange, rows = 14, error, name }: { label: string; value: string; onChange: (text: string) => void; rows?: number; error?: unknown; name?: string }) {
  const parsed = useMemo(() => parseStructured(value), [value]);
  const id = useId();
  const server = name !== undefined && error !== undefined ? fieldProblemsAll(error) : [];
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <textarea id={id} className="code" rows={rows} spellCheck={false} value={value} onChange={(e) => onChange(e.target.value)} aria-invalid={parsed.error !== null} />
      {parsed.error ? (
        <span className="field-error" role="alert">
          Not valid YAML or JSON: {parsed.error}
        </span>
      ) : (
        <span className="hint">YAML or JSON</span>
      )}
      {server.map((m) => (
        <span key={m} className="field-error" role="alert">
          {m}
        </span>
      ))}
    </div>
  );
}

function fieldProblemsAll(error: unknown): string[] {
  const e = error as { errors?: Array<{ field: string; message: string }> } | null;
  return Array.isArray(e?.errors) ? e.errors.map((x) => `${x.field}: ${x.message}`) : [];
}

/** Copies a value to the clipboard, saying so. */
export function CopyButton({ value, label = 'Copy' }: { value: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      className="secondary small"
      onClick={() => {
        void navigator.clipboard.writeText(value).then(
          () => setCopied(true),
          () => setCopied(false),
        );
      }}
    >
      {copied ? 'Copied' : label}
    </button>
  );
}

/** A hand-off chain: each step and an arrow to the next. */
export function Chain({ steps, label }: { steps: string[]; label: string }) {
  return (
    <ol className="chain" aria-label={label}>
      {steps.map((s, i) => (
        <li key={`${s}-${i}`}>
          <span className="chain-step">{s}</span>
          {i < steps.length - 1 && (
            <span className="chain-arrow" aria-hidden="true">
              →
            </span>
          )}
        </li>
      ))}
    </ol>
  );
}

type DiffRow = { left: string | null; right: string | null; kind: 'same' | 'removed' | 'added' | 'changed' };

/** A line diff (longest common subsequence), paired up for two columns. */
export function diffLines(a: string[], b: string[]): DiffRow[] {
  const n = a.length;
  const m = b.length;
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const rows: DiffRow[] = [];
  let i = 0;
  let j = 0;
  let removed: string[] = [];
  let added: string[] = [];
  const flush = () => {
    const k = Math.max(removed.length, added.length);
    for (let x = 0; x < k; x++) {
      const l = removed[x] ?? null;
      const r = added[x] ?? null;
      rows.push({ left: l, right: r, kind: l !== null && r !== null ? 'changed' : l !== null ? 'removed' : 'added' });
    }
    removed = [];
    added = [];
  };
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      flush();
      rows.push({ left: a[i], right: b[j], kind: 'same' });
      i++;
      j++;
    } else if (j < m && (i === n || lcs[i][j + 1] >= lcs[i + 1][j])) {
      added.push(b[j++]);
    } else {
      removed.push(a[i++]);
    }
  }
  flush();
  return rows;
}

/** Two versions side by side, as YAML, with changed lines marked. */
export function VersionDiff({ left, right, leftLabel, rightLabel }: { left: unknown; right: unknown; leftLabel: string; rightLabel: string }) {
  const rows = useMemo(() => diffLines(asYaml(left).trimEnd().split('\n'), asYaml(right).trimEnd().split('\n')), [left, right]);
  const changes = rows.filter((r) => r.kind !== 'same').length;
  return (
    <div className="diff-wrap">
      <p className="muted">{changes === 0 ? 'The two versions are the same.' : `${changes} line${changes === 1 ? '' : 's'} differ.`}</p>
      <table className="diff" aria-label={`${leftLabel} against ${rightLabel}`}>
        <thead>
          <tr>
            <th>{leftLabel}</th>
            <th>{rightLabel}</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <tr key={i} className={`diff-${r.kind}`}>
              <td>
                <pre>{r.left ?? ''}</pre>
              </td>
              <td>
                <pre>{r.right ?? ''}</pre>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Words for a list that is empty, with the next step as a link. */
export function Empty({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>;
}

/** Splits a comma- or newline-separated list typed into an input. */
export const listOf = (text: string) =>
  text
    .split(/[,\n]/)
    .map((s) => s.trim())
    .filter(Boolean);

/** A page of the console: its heading and what is on it. */
export function Page({ title, blurb, children }: { title: string; blurb?: ReactNode; children: ReactNode }) {
  return (
    <section aria-labelledby="section-title">
      <PageHead title={title} blurb={blurb} />
      {children}
    </section>
  );
}
