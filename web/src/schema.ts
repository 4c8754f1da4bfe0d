/**
 * The request schemas of the Console API, read from the contract the server serves
 * (`/api/v1/openapi.json`), so that forms are built from the same schemas the server validates
 * with: fields, limits, help text and, beside each pattern, what it allows in words.
 */
import { ApiError, get } from './api.ts';

/** The subset of JSON Schema the forms read. */
export interface Schema {
  type?: string | string[];
  title?: string;
  description?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: Schema | boolean;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  default?: unknown;
  examples?: unknown[];
  pattern?: string;
  'x-pattern-description'?: string;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  maxItems?: number;
  minProperties?: number;
  uniqueItems?: boolean;
  $ref?: string;
}

/** A problem with one field, as the server's `errors[]` names it (`roles.lead.model`). */
export interface FieldProblem {
  field: string;
  message: string;
}

let contract: Promise<{ components?: { schemas?: Record<string, Schema> } }> | null = null;

/** The named schema of the contract with every `$ref` resolved (once per page load). */
export async function loadSchema(name: string): Promise<Schema> {
  contract ??= get<{ components?: { schemas?: Record<string, Schema> } }>('/openapi.json').catch((err: unknown) => {
    contract = null;
    throw err;
  });
  const all = (await contract).components?.schemas ?? {};
  if (!all[name]) throw new ApiError(0, `the server's contract has no ${name} form; the page cannot show its fields`);
  return resolve(all[name], all, 0);
}

function resolve(s: Schema, all: Record<string, Schema>, depth: number): Schema {
  if (depth > 20) return {};
  if (s.$ref) {
    const target = all[s.$ref.replace('#/components/schemas/', '')];
    const { $ref: _ref, ...rest } = s;
    return resolve({ ...target, ...rest }, all, depth + 1);
  }
  const out: Schema = { ...s };
  if (s.properties) out.properties = Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, resolve(v, all, depth + 1)]));
  if (s.items) out.items = resolve(s.items, all, depth + 1);
  if (s.anyOf) out.anyOf = s.anyOf.map((b) => resolve(b, all, depth + 1));
  if (typeof s.additionalProperties === 'object') out.additionalProperties = resolve(s.additionalProperties, all, depth + 1);
  return out;
}

/** What a field is, for drawing it: a union with null is the other branch, allowed to be empty. */
export function shapeOf(s: Schema): { schema: Schema; nullable: boolean; choices: unknown[] | null } {
  let schema = s;
  let nullable = false;
  if (s.anyOf) {
    const rest = s.anyOf.filter((b) => b.type !== 'null');
    nullable = rest.length < s.anyOf.length;
    if (rest.length === 1) schema = { ...rest[0], description: rest[0].description ?? s.description };
    else schema = { ...s, anyOf: rest };
  }
  const choices = choicesOf(schema);
  return { schema, nullable, choices };
}

/** The values a field may take when it is a closed list (an enum, or a union of them), else null. */
function choicesOf(s: Schema): unknown[] | null {
  if (s.enum) return s.enum;
  if (s.const !== undefined) return [s.const];
  if (s.anyOf) {
    const all: unknown[] = [];
    for (const b of s.anyOf) {
      const c = choicesOf(b);
      if (!c) return null;
      all.push(...c);
    }
    return all;
  }
  return null;
}

const typeOf = (s: Schema) => (Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type);

/** Whether a value is a plain object. */
export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

/**
 * What is wrong with a value against its schema, field by field and in the words the server
 * uses, so a person sees it next to the field before sending. The server checks again (and
 * more: names that must exist, rules between fields).
 */
export function problemsOf(s: Schema, value: unknown, path = ''): FieldProblem[] {
  const out: FieldProblem[] = [];
  const here = (message: string) => out.push({ field: path || '(body)', message });
  const { schema, nullable, choices } = shapeOf(s);
  if (value === undefined) return out;
  if (value === null) {
    if (!nullable && typeOf(schema) !== 'null') here('must not be empty');
    return out;
  }
  if (choices) {
    if (!choices.some((c) => c === value)) here(`must be one of ${choices.map((c) => JSON.stringify(c)).join(', ')}`);
    return out;
  }
  const type = typeOf(schema);
  if (type === 'string') {
    if (typeof value !== 'string') return [{ field: path, message: 'must be text' }];
    if (schema.minLength !== undefined && value.length < schema.minLength) here(schema.minLength === 1 ? 'must not be empty' : `must be at least ${plural(schema.minLength, 'character')} long`);
    else if (schema.maxLength !== undefined && value.length > schema.maxLength) here(`must be at most ${plural(schema.maxLength, 'character')} long`);
    else if (schema.pattern && !safeTest(schema.pattern, value)) here(schema['x-pattern-description'] ? `must be ${schema['x-pattern-description']}` : 'is not in the form this field takes');
  } else if (type === 'integer' || type === 'number') {
    if (typeof value !== 'number' || Number.isNaN(value)) return [{ field: path, message: type === 'integer' ? 'must be a whole number' : 'must be a number' }];
    if (type === 'integer' && !Number.isInteger(value)) here('must be a whole number');
    else if (schema.minimum !== undefined && value < schema.minimum) here(`must be at least ${schema.minimum}`);
    else if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) here(`must be more than ${schema.exclusiveMinimum}`);
    else if (schema.maximum !== undefined && value > schema.maximum) here(`must be at most ${schema.maximum}`);
  } else if (type === 'boolean') {
    if (typeof value !== 'boolean') here('must be true or false');
  } else if (type === 'array') {
    if (!Array.isArray(value)) return [{ field: path, message: 'must be a list' }];
    if (schema.maxItems !== undefined && value.length > schema.maxItems) here(`must hold at most ${plural(schema.maxItems, 'item')}`);
    if (schema.items) value.forEach((v, i) => out.push(...problemsOf(schema.items!, v, `${path ? `${path}.` : ''}${i}`)));
  } else if (type === 'object') {
    if (!isRecord(value)) return [{ field: path, message: 'must be an object (names and values)' }];
    const at = (k: string) => (path ? `${path}.${k}` : k);
    for (const r of schema.required ?? []) if (value[r] === undefined || value[r] === '') out.push({ field: at(r), message: 'is required' });
    for (const [k, v] of Object.entries(value)) {
      const p = schema.properties?.[k] ?? (typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined);
      if (p) out.push(...problemsOf(p, v, at(k)));
    }
  }
  return out;
}

/** Tests a pattern of the contract; one this browser cannot compile is left to the server. */
function safeTest(pattern: string, value: string): boolean {
  try {
    return new RegExp(pattern, 'u').test(value);
  } catch {
    return true;
  }
}

/** A form that did not pass its own checks: shown like the server's answer, each problem at its field. */
export class FormProblems extends ApiError {
  constructor(errors: FieldProblem[]) {
    super(400, errors.length === 1 ? 'One field needs a change before this can be saved.' : `${errors.length} fields need a change before this can be saved.`, errors);
  }
}

/** Throws FormProblems when the value breaks its schema; returns it otherwise. */
export function checked<T>(schema: Schema, value: T): T {
  const errors = problemsOf(schema, value);
  if (errors.length > 0) throw new FormProblems(errors);
  return value;
}

/** The value a new form starts from: the contract's first example, else empty, without the fields left out. */
export function startingValue(schema: Schema, omit: string[] = []): Record<string, unknown> {
  const example = isRecord(schema.examples?.[0]) ? schema.examples[0] : {};
  return Object.fromEntries(Object.entries(example).filter(([k]) => !omit.includes(k) && schema.properties?.[k] !== undefined));
}
