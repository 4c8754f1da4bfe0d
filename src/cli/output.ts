/** What a command prints with: its streams, and whether scripts asked for JSON. */
export interface Out {
  json: boolean;
  stdout: (s: string) => void;
  /** Progress and prompts: stderr, so stdout stays the answer; silent under --json. */
  progress: (s: string) => void;
}

const show = (v: unknown): string => {
  if (v === null || v === undefined) return '-';
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && v.every((x) => typeof x !== 'object' || x === null)) return v.length ? v.join(', ') : '-';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
};

/** One line of a cell: tables stay one row per item. */
const cell = (v: unknown): string => show(v).replace(/\s*\n\s*/g, ' ');

export type Column<T> = [header: string, value: (row: T) => unknown];

/** An aligned table with a header row; "(none)" for an empty list. */
export function table<T>(rows: T[], columns: Array<Column<T>>): string {
  if (rows.length === 0) return '(none)\n';
  const cells = [columns.map(([h]) => h), ...rows.map((r) => columns.map(([, f]) => cell(f(r))))];
  const widths = columns.map((_, i) => Math.max(...cells.map((row) => row[i].length)));
  return cells.map((row) => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd()).join('\n') + '\n';
}

/** A key-value block of an object's fields (or of those named, in that order). */
export function block(obj: Record<string, unknown>, fields?: string[]): string {
  const keys = fields ?? Object.keys(obj);
  const width = Math.max(...keys.map((k) => k.length));
  return keys.map((k) => {
    const v = show(obj[k]);
    // A multi-line value (a prompt, a skill body) starts under its key, indented.
    return v.includes('\n') ? `${k}:\n${v.replace(/^/gm, '  ')}` : `${`${k}:`.padEnd(width + 1)} ${v}`;
  }).join('\n') + '\n';
}

/** Prints the API's JSON under --json, otherwise what `human` renders. */
export function emit(out: Out, data: unknown, human: () => string): void {
  out.stdout(out.json ? JSON.stringify(data, null, 2) + '\n' : human());
}
