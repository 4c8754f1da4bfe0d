import fastJsonStringify from 'fast-json-stringify';
import type { FastifySerializerCompiler } from 'fastify/types/schema.js';

/** Whether a value already is exactly what a schema says (then JSON.stringify writes what fast-json-stringify would). */
export type Check = (value: unknown) => boolean;

// Keywords that only describe or constrain input: they change nothing fast-json-stringify writes.
const INERT = new Set([
  'description', 'title', 'examples', 'example', 'default', 'deprecated', 'readOnly', 'writeOnly', '$comment', '$id', '$schema',
  'minLength', 'maxLength', 'pattern', 'format', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
  'minItems', 'maxItems', 'uniqueItems', 'minProperties', 'maxProperties', 'contentEncoding', 'contentMediaType',
]);
const KNOWN = new Set([...INERT, 'type', 'const', 'enum', 'anyOf', 'properties', 'required', 'additionalProperties', 'items']);

const PRIMITIVE: Record<string, (x: string) => string> = {
  string: (x) => `typeof ${x} === 'string'`,
  integer: (x) => `Number.isInteger(${x})`,
  number: (x) => `(typeof ${x} === 'number' && Number.isFinite(${x}))`,
  boolean: (x) => `typeof ${x} === 'boolean'`,
  null: (x) => `${x} === null`,
};
const literal = (v: unknown) => (v === null || typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v)) ? JSON.stringify(v) : null);

/** Generates the check as code (as Ajv and fast-json-stringify do): a walk of closures over a page of 50 cost as much as the serialising it saves. */
class CheckCode {
  readonly functions: string[] = [];
  readonly declared: Array<Set<string>> = [];

  /** An expression true when `x` is what `schema` says, or null when this cannot tell. */
  expr(schema: unknown, x: string): string | null {
    if (schema === true) return 'true';
    if (typeof schema !== 'object' || schema === null) return null;
    const s = schema as Record<string, any>;
    for (const k of Object.keys(s)) if (!KNOWN.has(k)) return null;
    const parts: string[] = [];
    if ('const' in s) {
      const c = literal(s.const);
      if (c === null) return null;
      parts.push(`${x} === ${c}`);
    }
    if (s.enum !== undefined) {
      const values = Array.isArray(s.enum) ? s.enum.map(literal) : [null];
      if (values.length === 0 || values.includes(null)) return null;
      parts.push(`(${values.map((v: string | null) => `${x} === ${v}`).join(' || ')})`);
    }
    if (s.anyOf !== undefined) {
      // fast-json-stringify picks an object or array branch by validation: such unions are left to it.
      if (!Array.isArray(s.anyOf) || s.anyOf.length === 0) return null;
      const branches: string[] = [];
      for (const b of s.anyOf) {
        const types = [b?.type].flat();
        if (b?.type === undefined || types.includes('object') || types.includes('array') || b.anyOf !== undefined) return null;
        const e = this.expr(b, x);
        if (e === null) return null;
        branches.push(e);
      }
      parts.push(`(${branches.join(' || ')})`);
    }
    if (s.type !== undefined) {
      const typed: string[] = [];
      for (const t of [s.type].flat()) {
        const e = t === 'object' ? this.object(s, x) : t === 'array' ? this.array(s, x) : PRIMITIVE[t]?.(x) ?? null;
        if (e === null) return null;
        typed.push(e);
      }
      parts.push(typed.length === 1 ? typed[0] : `(${typed.join(' || ')})`);
    } else if (s.properties !== undefined || s.items !== undefined || s.required !== undefined || s.additionalProperties !== undefined) {
      return null;
    }
    // No type and no values named: any value, which fast-json-stringify writes with JSON.stringify too.
    return parts.length === 0 ? 'true' : parts.join(' && ');
  }

  private object(s: Record<string, any>, x: string): string | null {
    const extra = s.additionalProperties;
    if (extra !== undefined && extra !== true && extra !== false) return null;
    const required = new Set<string>(Array.isArray(s.required) ? s.required : []);
    const props = Object.entries<unknown>(s.properties ?? {});
    for (const name of required) if (!props.some(([p]) => p === name)) return null;
    const id = this.functions.length;
    this.functions.push('');
    const lines = [
      `function f${id}(v) {`,
      `  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;`,
      `  const p = Object.getPrototypeOf(v);`,
      `  if (p !== Object.prototype && p !== null) return false;`,
      `  let n = 0, x;`,
    ];
    for (const [name, sub] of props) {
      const e = this.expr(sub, 'x');
      if (e === null) return null;
      lines.push(`  x = v[${JSON.stringify(name)}];`, `  if (x !== undefined) { n++; if (!(${e})) return false; }${required.has(name) ? ' else return false;' : ''}`);
    }
    if (extra !== true) {
      // Every field the answer has is declared (one left undefined is not written either way).
      const d = this.declared.length;
      this.declared.push(new Set(props.map(([name]) => name)));
      lines.push(`  let m = 0;`, `  for (const k in v) m++;`, `  if (m !== n) for (const k in v) if (v[k] !== undefined && !D[${d}].has(k)) return false;`);
    }
    lines.push('  return true;', '}');
    this.functions[id] = lines.join('\n');
    return `f${id}(${x})`;
  }

  private array(s: Record<string, any>, x: string): string | null {
    if (s.items === undefined || Array.isArray(s.items)) return null;
    const id = this.functions.length;
    this.functions.push('');
    const e = this.expr(s.items, 'x');
    if (e === null) return null;
    this.functions[id] = [
      `function f${id}(v) {`,
      `  if (!Array.isArray(v)) return false;`,
      `  for (let i = 0; i < v.length; i++) { const x = v[i]; if (!(${e})) return false; }`,
      '  return true;',
      '}',
    ].join('\n');
    return `f${id}(${x})`;
  }
}

/**
 * The check of a schema, or null when the schema says more than this knows to check
 * (`allOf`, `$ref`, `patternProperties`, an object or array inside `anyOf`, where
 * fast-json-stringify picks a branch by validation): answers of such a schema always go through it.
 */
export function checkOf(schema: unknown): Check | null {
  const code = new CheckCode();
  const e = code.expr(schema, 'value');
  if (e === null) return null;
  // Generated from the route's own schema only: names are quoted by JSON.stringify, values are literals.
  return new Function('D', `${code.functions.join('\n')}\nreturn function check(value) { return ${e}; };`)(code.declared) as Check;
}

/**
 * The console's answer serializer. fast-json-stringify drops fields a response schema does not
 * declare and coerces values to the declared types, but it is slower than V8's JSON.stringify
 * on answers that need neither (a page of 50 users: its string escaping in JavaScript, and a
 * string of many pieces that the socket write then has to flatten). An answer is checked
 * against its schema first: exactly what the schema says, and JSON.stringify writes it (the
 * same JSON, with the fields in the answer's order); anything else, or a schema the check does
 * not cover, goes through fast-json-stringify as before.
 */
export const serializerCompiler: FastifySerializerCompiler<unknown> = ({ schema }) => {
  const slow = fastJsonStringify(schema as Parameters<typeof fastJsonStringify>[0]);
  const check = checkOf(schema);
  if (!check) return slow;
  return (data: unknown) => (check(data) ? JSON.stringify(data) : slow(data));
};
