/**
 * One form for any request body the contract describes: a field per property with its label,
 * help text, limits and default, nested objects as groups, maps (a template's roles) as
 * entries that can be added and removed, the problems (the form's own checks and the server's
 * `errors[]`) right below their field, and the whole value as YAML for what the fields do not
 * cover.
 */
import { useEffect, useId, useMemo, useState, type ReactNode } from 'react';
import { ApiError, fieldErrors } from './api.ts';
import { isRecord, loadSchema, shapeOf, type Schema } from './schema.ts';
import { asYaml, heading, parseStructured, ProblemNote } from './ui.tsx';

/** A schema of the contract by name, loaded once. */
export function useSchema(name: string) {
  const [state, setState] = useState<{ schema: Schema | null; error: unknown }>({ schema: null, error: null });
  useEffect(() => {
    let live = true;
    loadSchema(name).then(
      (schema) => live && setState({ schema, error: null }),
      (error: unknown) => live && setState({ schema: null, error }),
    );
    return () => {
      live = false;
    };
  }, [name]);
  return state;
}

type Value = Record<string, unknown>;

export interface SchemaFormProps {
  schema: Schema;
  value: Value;
  onChange: (value: Value) => void;
  /** The last failed save: its field problems are shown at their fields. */
  error: unknown;
  /** The properties shown, in this order (default: all of the schema's). */
  fields?: string[];
  /** Properties never shown (set by the page, or not for people). */
  omit?: string[];
  /** Properties shown but not editable (a name in the path). */
  readOnly?: string[];
  /** Extra help beside a field, by property. */
  hints?: Record<string, ReactNode>;
  /** What the YAML view is called (`environment`). */
  label: string;
  /** Where the value sits in the request body, as errors name it (`settings.`). */
  prefix?: string;
  /** Fields of the body the page shows problems of itself (`secrets`). */
  shownElsewhere?: string[];
}

/** The form, with a switch to the YAML view of the same value. */
export function SchemaForm(props: SchemaFormProps) {
  const [yaml, setYaml] = useState<string | null>(null);
  const names = useMemo(() => {
    const all = Object.keys(props.schema.properties ?? {});
    return (props.fields ?? all).filter((k) => all.includes(k) && !(props.omit ?? []).includes(k));
  }, [props.schema, props.fields, props.omit]);
  const required = new Set(props.schema.required ?? []);
  const set = (k: string, v: unknown) => {
    const next = { ...props.value };
    if (v === undefined) delete next[k];
    else next[k] = v;
    props.onChange(next);
  };
  const yamlProblem = yaml === null ? null : parseStructured(yaml).error;
  return (
    <div className="schema-form">
      <div className="row view-switch">
        <button type="button" className={yaml === null ? 'small' : 'secondary small'} aria-pressed={yaml === null} onClick={() => setYaml(null)} disabled={yaml !== null && yamlProblem !== null}>
          Form
        </button>
        <button type="button" className={yaml !== null ? 'small' : 'secondary small'} aria-pressed={yaml !== null} onClick={() => setYaml(asYaml(props.value))}>
          YAML (advanced)
        </button>
      </div>
      {yaml === null ? (
        <div className="schema-fields">
          {names.map((k) => (
            <SchemaField
              key={k}
              name={k}
              path={`${props.prefix ?? ''}${k}`}
              schema={props.schema.properties![k]}
              value={props.value[k]}
              onChange={(v) => set(k, v)}
              error={props.error}
              required={required.has(k)}
              readOnly={(props.readOnly ?? []).includes(k)}
              hint={props.hints?.[k]}
            />
          ))}
        </div>
      ) : (
        <YamlView
          label={props.label}
          text={yaml}
          problem={yamlProblem}
          onChange={(text) => {
            setYaml(text);
            const parsed = parseStructured(text);
            if (!parsed.error && isRecord(parsed.value)) props.onChange(parsed.value);
          }}
        />
      )}
      <FormProblem error={props.error} shown={[...(yaml === null ? names.map((k) => `${props.prefix ?? ''}${k}`) : []), ...(props.shownElsewhere ?? [])]} />
    </div>
  );
}

function YamlView({ label, text, problem, onChange }: { label: string; text: string; problem: string | null; onChange: (text: string) => void }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{heading(label)} as YAML</label>
      <textarea id={id} className="code" rows={16} spellCheck={false} value={text} onChange={(e) => onChange(e.target.value)} aria-invalid={problem !== null} />
      {problem ? (
        <span className="field-error" role="alert">
          Not valid YAML or JSON: {problem}
        </span>
      ) : (
        <span className="hint">Every field, including those the form does not show. YAML or JSON.</span>
      )}
    </div>
  );
}

/**
 * A failed save in one line, without repeating what is shown at the fields: the problems of
 * fields the form does not show are named here; the others only counted.
 */
export function FormProblem({ error, shown }: { error: unknown; shown: string[] }) {
  if (error === null || error === undefined) return null;
  if (!(error instanceof ApiError) || error.errors.length === 0) return <ProblemNote error={error} />;
  const isShown = (field: string) => shown.some((s) => field === s || field.startsWith(`${s}.`) || field.startsWith(`${s}[`));
  const elsewhere = error.errors.filter((e) => !isShown(e.field));
  const here = error.errors.length - elsewhere.length;
  return (
    <p className="problem" role="alert">
      {here > 0 ? `Not saved: ${here === 1 ? 'one field needs' : `${here} fields need`} a change (marked in red).` : 'Not saved.'}
      {elsewhere.length > 0 && ` ${elsewhere.map((e) => `${heading(e.field.replace(/\./g, ' '))}: ${e.message}`).join('; ')}.`}
    </p>
  );
}

/** The problems of one field, each once, right below it. */
function Problems({ error, path, exact }: { error: unknown; path: string; exact?: boolean }) {
  const all = error instanceof ApiError ? error.errors : [];
  // A problem of one item of a list names the item (`paths.1` → "item 2: …").
  const item = (field: string) => {
    const rest = field.slice(path.length + 1);
    return /^\d+$/.test(rest) ? `item ${Number(rest) + 1}: ` : rest ? `${rest.replace(/\./g, ' ')}: ` : '';
  };
  const named = exact ? all.filter((e) => e.field === path).map((e) => e.message) : fieldErrors(error, path).length > 0 ? all.filter((e) => e.field === path || e.field.startsWith(`${path}.`)).map((e) => `${item(e.field)}${e.message}`) : [];
  const messages = [...new Set(named)];
  return (
    <>
      {messages.map((m) => (
        <span key={m} className="field-error" role="alert">
          {m}
        </span>
      ))}
    </>
  );
}

/** The help text of a field: its description, its limits and its default. */
function helpOf(s: Schema, nullable: boolean): string {
  const parts: string[] = [];
  const words = s['x-pattern-description'];
  const firstWords = (t: string) => t.split(/[ ,;]+/).slice(0, 2).join(' ');
  // A description that only says the pattern again gives way to the pattern's words.
  // Help is for people: a route named in a description ("(GET /models)") is left out.
  const description = s.description?.replace(/`/g, '').replace(/\s*\((?:see |from )?(?:GET|PUT|POST|PATCH|DELETE) \/[^)]*\)/g, '').replace(/\s+(?:from|see|in) (?:GET|PUT|POST|PATCH|DELETE) \/\S+/g, '');
  if (description && !(words && firstWords(description) === firstWords(words))) parts.push(description);
  if (words) parts.push(words);
  if (s.minimum !== undefined && s.maximum !== undefined) parts.push(`${s.minimum} to ${s.maximum}`);
  else if (s.maximum !== undefined) parts.push(`at most ${s.maximum}`);
  if (s.maxLength !== undefined && s.maxLength < 300 && !s['x-pattern-description']) parts.push(`at most ${s.maxLength} characters`);
  if (s.default !== undefined && s.default !== null) parts.push(`default ${String(s.default)}`);
  if (nullable) parts.push('may be left empty');
  return parts.join('; ');
}

const isListOfText = (s: Schema) => s.type === 'array' && s.items !== undefined && (s.items.type === 'string' || shapeOf(s.items).choices !== null);
const isMap = (s: Schema) => s.type === 'object' && !s.properties && typeof s.additionalProperties === 'object';

interface FieldProps {
  name: string;
  /** The label as it is (a map entry's own name), instead of one made from `name`. */
  title?: string;
  path: string;
  schema: Schema;
  value: unknown;
  onChange: (value: unknown) => void;
  error: unknown;
  required?: boolean;
  readOnly?: boolean;
  hint?: ReactNode;
}

/** One property: its control chosen by its schema, with label, help and problems. */
export function SchemaField(props: FieldProps) {
  const { schema, nullable, choices } = shapeOf(props.schema);
  const id = useId();
  const label = `${props.title ?? heading(props.name)}${props.required ? '' : ' (optional)'}`;
  const help = helpOf(schema, nullable && !props.required);
  const invalid = fieldErrors(props.error, props.path).length > 0;
  const wrap = (control: ReactNode, opts: { labelFor?: boolean } = {}) => (
    <div className={invalid ? 'field invalid' : 'field'} data-field={props.path}>
      {opts.labelFor === false ? <span className="label">{label}</span> : <label htmlFor={id}>{label}</label>}
      {control}
      {help && <span className="hint">{help}</span>}
      {props.hint && <span className="hint">{props.hint}</span>}
      <Problems error={props.error} path={props.path} />
    </div>
  );
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  const empty = (v: string) => (v === '' ? (nullable && props.required ? null : undefined) : v);

  if (choices) {
    return wrap(
      <select id={id} value={props.value === undefined || props.value === null ? '' : JSON.stringify(props.value)} disabled={props.readOnly} onChange={(e) => props.onChange(e.target.value === '' ? (nullable && props.required ? null : undefined) : JSON.parse(e.target.value))} aria-invalid={invalid}>
        {(!props.required || nullable || props.value === undefined) && <option value="">{props.required && !nullable ? 'choose one' : '(none)'}</option>}
        {choices.map((c) => (
          <option key={JSON.stringify(c)} value={JSON.stringify(c)}>
            {String(c)}
          </option>
        ))}
      </select>,
    );
  }
  if (type === 'boolean' && !props.required && schema.default === undefined) {
    // Left out, it takes a default the schema does not state: "as default" is a choice of its own.
    return wrap(
      <select id={id} value={props.value === true ? 'yes' : props.value === false ? 'no' : ''} disabled={props.readOnly} onChange={(e) => props.onChange(e.target.value === '' ? undefined : e.target.value === 'yes')} aria-invalid={invalid}>
        <option value="">(default)</option>
        <option value="yes">yes</option>
        <option value="no">no</option>
      </select>,
    );
  }
  if (type === 'boolean') {
    return (
      <div className={invalid ? 'field invalid' : 'field'} data-field={props.path}>
        <label className="check">
          <input type="checkbox" checked={props.value === undefined ? schema.default === true : props.value === true} disabled={props.readOnly} onChange={(e) => props.onChange(e.target.checked)} />
          {heading(props.name)}
        </label>
        {help && <span className="hint">{help}</span>}
        {props.hint && <span className="hint">{props.hint}</span>}
        <Problems error={props.error} path={props.path} />
      </div>
    );
  }
  if (type === 'integer' || type === 'number') {
    return wrap(
      <NumberInput id={id} value={props.value} integer={type === 'integer'} readOnly={props.readOnly} invalid={invalid} min={schema.minimum} max={schema.maximum} placeholder={schema.default !== undefined ? String(schema.default) : undefined} onChange={(v) => props.onChange(v === undefined ? empty('') : v)} />,
    );
  }
  if (type === 'string') {
    const value = typeof props.value === 'string' ? props.value : props.value === undefined || props.value === null ? '' : String(props.value);
    const long = (schema.maxLength ?? 0) > 2000;
    return wrap(
      long ? (
        <textarea id={id} rows={8} value={value} readOnly={props.readOnly} onChange={(e) => props.onChange(empty(e.target.value))} aria-invalid={invalid} />
      ) : (
        <input id={id} type={schema.format === 'uri' ? 'url' : 'text'} value={value} readOnly={props.readOnly} maxLength={schema.maxLength} onChange={(e) => props.onChange(empty(e.target.value))} aria-invalid={invalid} autoComplete="off" />
      ),
    );
  }
  if (isListOfText(schema)) {
    const items = shapeOf(schema.items!);
    const list = Array.isArray(props.value) ? props.value.map(String) : [];
    if (items.choices) {
      return wrap(
        <span className="choices" role="group" aria-label={heading(props.name)}>
          {items.choices.map((c) => (
            <label key={String(c)} className="check">
              <input type="checkbox" checked={list.includes(String(c))} disabled={props.readOnly} onChange={(e) => props.onChange(e.target.checked ? [...list, String(c)] : list.filter((x) => x !== String(c)))} />
              {String(c)}
            </label>
          ))}
        </span>,
        { labelFor: false },
      );
    }
    return wrap(<LinesInput id={id} value={list} readOnly={props.readOnly} invalid={invalid} onChange={(v) => props.onChange(v.length === 0 && nullable ? undefined : v)} />, {});
  }
  if (type === 'object' && schema.properties) {
    const obj = isRecord(props.value) ? props.value : {};
    const req = new Set(schema.required ?? []);
    return (
      <fieldset className="schema-group" data-field={props.path}>
        <legend>{label}</legend>
        {help && <p className="hint">{help}</p>}
        {Object.entries(schema.properties).map(([k, s]) => (
          <SchemaField
            key={k}
            name={k}
            path={`${props.path}.${k}`}
            schema={s}
            value={obj[k]}
            error={props.error}
            required={req.has(k)}
            readOnly={props.readOnly}
            onChange={(v) => {
              const next = { ...obj };
              if (v === undefined) delete next[k];
              else next[k] = v;
              props.onChange(Object.keys(next).length === 0 && !props.required ? undefined : next);
            }}
          />
        ))}
        <Problems error={props.error} path={props.path} exact />
      </fieldset>
    );
  }
  if (isMap(schema)) return <MapField {...props} schema={schema} label={label} help={help} />;
  return wrap(<YamlInput id={id} value={props.value} readOnly={props.readOnly} invalid={invalid} onChange={props.onChange} />);
}

/** A number typed as text, so that a half-typed value stays as typed; empty is "not given". */
function NumberInput(p: { id: string; value: unknown; integer: boolean; readOnly?: boolean; invalid: boolean; min?: number; max?: number; placeholder?: string; onChange: (v: number | undefined) => void }) {
  const [text, setText] = useState(p.value === undefined || p.value === null ? '' : String(p.value));
  useEffect(() => {
    if (p.value === undefined || p.value === null) setText((t) => (t.trim() === '' ? t : ''));
    else if (Number(text) !== p.value) setText(String(p.value));
    // Only an outside change of the value re-writes the text.
  }, [p.value]);
  return (
    <input
      id={p.id}
      inputMode={p.integer ? 'numeric' : 'decimal'}
      value={text}
      readOnly={p.readOnly}
      placeholder={p.placeholder}
      aria-invalid={p.invalid}
      onChange={(e) => {
        setText(e.target.value);
        const t = e.target.value.trim();
        // Text that is not a number is sent as it is, so the form's check names it.
        p.onChange(t === '' ? undefined : Number.isFinite(Number(t)) ? Number(t) : (t as unknown as number));
      }}
    />
  );
}

/** A list of short texts, one per line. */
function LinesInput(p: { id: string; value: string[]; readOnly?: boolean; invalid: boolean; onChange: (v: string[]) => void }) {
  const [text, setText] = useState(p.value.join('\n'));
  useEffect(() => {
    const lines = text.split('\n').map((s) => s.trim()).filter(Boolean);
    if (lines.join('\n') !== p.value.join('\n')) setText(p.value.join('\n'));
  }, [p.value.join('\n')]);
  return (
    <>
      <textarea
        id={p.id}
        rows={Math.min(6, Math.max(2, p.value.length + 1))}
        value={text}
        readOnly={p.readOnly}
        aria-invalid={p.invalid}
        onChange={(e) => {
          setText(e.target.value);
          p.onChange(
            e.target.value
              .split('\n')
              .map((s) => s.trim())
              .filter(Boolean),
          );
        }}
      />
      <span className="hint">One per line.</span>
    </>
  );
}

/** A value the form has no control for (a list of objects), as a small YAML box. */
function YamlInput(p: { id: string; value: unknown; readOnly?: boolean; invalid: boolean; onChange: (v: unknown) => void }) {
  const [text, setText] = useState(p.value === undefined ? '' : asYaml(p.value));
  const parsed = parseStructured(text);
  return (
    <>
      <textarea
        id={p.id}
        className="code"
        rows={4}
        spellCheck={false}
        value={text}
        readOnly={p.readOnly}
        aria-invalid={p.invalid || parsed.error !== null}
        onChange={(e) => {
          setText(e.target.value);
          const next = parseStructured(e.target.value);
          if (!next.error) p.onChange(e.target.value.trim() === '' ? undefined : next.value);
        }}
      />
      {parsed.error ? (
        <span className="field-error" role="alert">
          Not valid YAML: {parsed.error}
        </span>
      ) : (
        <span className="hint">YAML</span>
      )}
    </>
  );
}

/** A map of names to values (a template's roles): each entry with its name, added and removed. */
function MapField(props: FieldProps & { label: string; help: string }) {
  const entries = isRecord(props.value) ? Object.entries(props.value) : [];
  const inner = props.schema.additionalProperties as Schema;
  const [adding, setAdding] = useState('');
  const put = (next: Array<[string, unknown]>) => props.onChange(next.length === 0 && !props.required ? undefined : Object.fromEntries(next));
  const fresh = () => (shapeOf(inner).schema.type === 'object' ? {} : '');
  return (
    <fieldset className="schema-group" data-field={props.path}>
      <legend>{props.label}</legend>
      {props.help && <p className="hint">{props.help}</p>}
      {entries.map(([k, v], i) => (
        <div key={k} className="map-entry">
          <div className="row map-entry-head">
            {!props.readOnly && (
              <button type="button" className="secondary small" onClick={() => put(entries.filter((_, j) => j !== i))}>
                Remove {k}
              </button>
            )}
          </div>
          <SchemaField
            name={k}
            title={k}
            path={`${props.path}.${k}`}
            schema={inner}
            value={v}
            error={props.error}
            required
            readOnly={props.readOnly}
            onChange={(nv) => put(entries.map(([ek, ev]) => (ek === k ? [ek, nv] : [ek, ev])))}
          />
        </div>
      ))}
      {!props.readOnly && (
        <div className="row">
          <input aria-label={`new ${heading(props.name).toLowerCase()} name`} value={adding} onChange={(e) => setAdding(e.target.value)} placeholder="name" />
          <button
            type="button"
            className="secondary small"
            disabled={adding.trim() === '' || entries.some(([k]) => k === adding.trim())}
            onClick={() => {
              put([...entries, [adding.trim(), fresh()]]);
              setAdding('');
            }}
          >
            Add
          </button>
        </div>
      )}
      <Problems error={props.error} path={props.path} exact />
    </fieldset>
  );
}
