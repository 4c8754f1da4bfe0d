import { useCallback, useEffect, useRef, useState, type ReactNode } from 'react';
import { describe } from './api.ts';

/** A failed request, in words: the problem's detail and the fields it names. */
export function ProblemNote({ error }: { error: unknown }) {
  if (error === null || error === undefined) return null;
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

/** A field name as a heading: `last_login_at` → `Last login at`. */
export const heading = (key: string) => {
  const words = key.replace(/_/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
};

/** A plain table of records; `actions` adds a last column per row. */
export function DataTable<T extends Record<string, unknown>>(props: {
  rows: T[];
  columns?: string[];
  actions?: (row: T) => ReactNode;
  empty?: string;
  label?: string;
}) {
  const { rows, actions } = props;
  if (rows.length === 0) return <p className="muted">{props.empty ?? 'Nothing here yet.'}</p>;
  const columns = props.columns ?? columnsOf(rows);
  return (
    <div className="table-wrap">
      <table aria-label={props.label}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c}>{heading(c)}</th>
            ))}
            {actions && <th aria-label="actions" />}
          </tr>
        </thead>
        <tbody>
          {rows.map((row, i) => (
            <tr key={String(row.id ?? row.name ?? i)}>
              {columns.map((c) => {
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
      <button type="button" className="secondary small" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}
