import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import type { FieldProblem } from '../errors/problems.ts';
import { PATTERN_WORDS } from './schemas.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

function makeAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({
    allErrors: true,
    removeAdditional: false,
    useDefaults: true,
    coerceTypes: coerce ? 'array' : false,
    strict: false,
    // Each error carries the schema it failed (`parentSchema`): a pattern's words are read from it.
    verbose: true,
  });
  addFormats(ajv);
  return ajv;
}

// Query strings, paths and headers arrive as text and are coerced to the schema's types;
// JSON bodies are taken exactly as sent, so `"5"` is not a number and unknown fields fail.
const textAjv = makeAjv(true);
const bodyAjv = makeAjv(false);
const cache = new WeakMap<object, ValidateFunction>();

export const validatorCompiler: FastifySchemaCompiler<any> = ({ schema, httpPart }) => {
  const ajv = httpPart === 'body' ? bodyAjv : textAjv;
  let fn = httpPart === 'body' ? cache.get(schema as object) : undefined;
  if (!fn) {
    fn = ajv.compile(schema as object);
    if (httpPart === 'body') cache.set(schema as object, fn);
  }
  return fn;
};

/** A JSON type in words, as a message says what a value must be. */
const TYPE_WORDS: Record<string, string> = {
  string: 'text',
  integer: 'a whole number',
  number: 'a number',
  boolean: 'true or false',
  array: 'a list',
  object: 'an object (names and values)',
  null: 'null',
};
const typeWords = (type: string) =>
  type
    .split(',')
    .map((t) => TYPE_WORDS[t] ?? t)
    .join(' or ');

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** What a format asks for, in words. */
const FORMAT_WORDS: Record<string, string> = {
  'date-time': 'a date and time such as 2026-11-22T20:00:00Z',
  date: 'a date such as 2026-11-22',
  email: 'an email address',
  uri: 'a URL',
  url: 'a URL',
  uuid: 'a UUID',
  hostname: 'a host name',
};

/**
 * One Ajv error as words a person reads: what is allowed, never a regular expression (a
 * pattern's words come from `x-pattern-description` beside it in the schema).
 */
export function errorWords(e: ErrorObject): string {
  const p = e.params as Record<string, any>;
  switch (e.keyword) {
    case 'type':
      return `must be ${typeWords(String(p.type))}`;
    case 'const':
      return `must be one of ${JSON.stringify(p.allowedValue)}`;
    case 'enum':
      return `must be one of ${((p.allowedValues as unknown[]) ?? []).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'pattern': {
      const words = (e.parentSchema as Record<string, unknown> | undefined)?.[PATTERN_WORDS];
      return typeof words === 'string' ? `must be ${words}` : 'is not in the form this field takes';
    }
    case 'format':
      return `must be ${FORMAT_WORDS[String(p.format)] ?? `in the ${String(p.format)} format`}`;
    case 'minLength':
      return p.limit === 1 ? 'must not be empty' : `must be at least ${plural(p.limit, 'character')} long`;
    case 'maxLength':
      return `must be at most ${plural(p.limit, 'character')} long`;
    case 'minimum':
      return `must be at least ${p.limit}`;
    case 'maximum':
      return `must be at most ${p.limit}`;
    case 'exclusiveMinimum':
      return `must be more than ${p.limit}`;
    case 'exclusiveMaximum':
      return `must be less than ${p.limit}`;
    case 'multipleOf':
      return `must be a multiple of ${p.multipleOf}`;
    case 'minItems':
      return p.limit === 1 ? 'must not be empty' : `must hold at least ${plural(p.limit, 'item')}`;
    case 'maxItems':
      return `must hold at most ${plural(p.limit, 'item')}`;
    case 'uniqueItems':
      return `must not repeat an item (items ${p.i + 1} and ${p.j + 1} are the same)`;
    case 'minProperties':
      return p.limit === 1 ? 'must not be empty' : `must hold at least ${plural(p.limit, 'entry', 'entries')}`;
    case 'maxProperties':
      return `must hold at most ${plural(p.limit, 'entry', 'entries')}`;
    case 'propertyNames':
      return `has a name that is not allowed: ${JSON.stringify(p.propertyName)}`;
    case 'anyOf':
    case 'oneOf':
      return 'must match a schema in anyOf';
    default:
      return 'is not valid';
  }
}

/** Where a validation failed, in words ("the path" for Fastify's `params`): how an error names the part of the request that is wrong. */
export function validationPlace(part: string | undefined): string {
  return ({ body: 'the body', params: 'the path', querystring: 'the query string', headers: 'a header' } as Record<string, string>)[part ?? ''] ?? 'the request';
}

/** Turns Ajv errors into field problems: one per field, naming it by its JSON path. */
export function fieldProblems(errors: ErrorObject[], part: string | undefined): FieldProblem[] {
  const out: FieldProblem[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    if (e.keyword === 'if' || e.keyword === 'propertyNames') continue;
    let field = e.instancePath.replace(/^\//, '').replace(/\//g, '.').replace(/~1/g, '/').replace(/~0/g, '~');
    let message = errorWords(e);
    // A query parameter sent twice arrives as a list: "must be a whole number" would hide why.
    if (part === 'querystring' && e.keyword === 'type' && Array.isArray(e.data) && !String((e.params as { type: string }).type).includes('array')) message = 'is given more than once: give it once';
    if (e.keyword === 'required') {
      const missing = (e.params as { missingProperty: string }).missingProperty;
      field = field ? `${field}.${missing}` : missing;
      message = 'is required';
    } else if (e.keyword === 'additionalProperties') {
      const extra = (e.params as { additionalProperty: string }).additionalProperty;
      field = field ? `${field}.${extra}` : extra;
      message = 'is not a known field';
    }
    if (!field) field = part === 'body' ? '(body)' : `(${part ?? 'request'})`;
    const key = `${field}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ field, message });
  }
  // A union that failed reports each branch: one message per field, from the branches together
  // ("must be text or null", "must be one of ..."), else the first specific one.
  const byField = new Map<string, FieldProblem[]>();
  for (const p of out) byField.set(p.field, [...(byField.get(p.field) ?? []), p]);
  const typeOnly = (m: string) => m.startsWith('must be ') && Object.values(TYPE_WORDS).some((w) => m === `must be ${w}`);
  return [...byField.entries()].map(([field, list]) => {
    const p = mergeBranches(field, list, typeOnly);
    // One allowed value is said as it is.
    return p.message.startsWith('must be one of ') && !p.message.includes(', ') ? { field, message: `must be ${p.message.slice('must be one of '.length)}` } : p;
  });
}

/** The one message of a field that several errors (a union's branches) name. */
function mergeBranches(field: string, list: FieldProblem[], typeOnly: (m: string) => boolean): FieldProblem {
  const specific = list.filter((p) => p.message !== 'must match a schema in anyOf');
  if (specific.length === 0) return { field, message: 'has the wrong type or value' };
  if (specific.length === 1 || list.length === specific.length) return specific[0];
  const allowed = specific.filter((p) => p.message.startsWith('must be one of ')).map((p) => p.message.slice('must be one of '.length));
  if (allowed.length === specific.length) return { field, message: `must be one of ${allowed.join(', ')}` };
  // Values beside types (`"never_confirm"`, `"confirm_risky"` or null): every branch is said, else the first value would read as the only one allowed.
  const types = specific.filter((p) => !p.message.startsWith('must be one of '));
  if (allowed.length && types.every((p) => typeOnly(p.message))) return { field, message: `must be one of ${allowed.join(', ')} or ${types.map((p) => p.message.slice('must be '.length)).join(' or ')}` };
  const other = specific.find((p) => !typeOnly(p.message));
  if (other) return other;
  return { field, message: `must be ${specific.map((p) => p.message.slice('must be '.length)).join(' or ')}` };
}
