import { inspectJson, unstorableWords } from '../../db/json-values.ts';
import { chatErrors } from './errors.ts';

const INT = /^\s*-?\d{1,16}\s*$/;
// A list's items reach one statement as bind values, and a PostgreSQL statement takes at most
// 65,535 of them: longer lists are refused here by name, with room left for the statement's own.
const MAX_LIST = 50_000;

/**
 * A request's parameters as Zulip reads them: from the form-encoded (or multipart) body or the
 * query string, for every method, the body winning. Typed values are JSON-encoded and parsed
 * strictly, with Zulip's messages. Every read marks the name as supported; what was sent and
 * never read is `ignored_parameters_unsupported`.
 */
export class Params {
  private readonly values: Map<string, string>;
  private readonly read = new Set<string>();

  constructor(values: Map<string, string>) {
    this.values = values;
  }

  /** Names that were sent but never read by the endpoint, sorted. */
  ignored(): string[] {
    return [...this.values.keys()].filter((k) => !this.read.has(k)).sort();
  }

  has(name: string): boolean {
    this.read.add(name);
    return this.values.has(name);
  }

  private raw(name: string, required: boolean): string | undefined {
    this.read.add(name);
    const v = this.values.get(name);
    if (v === undefined && required) throw chatErrors.missing(name);
    if (v !== undefined && v.includes('\u0000')) throw chatErrors.bad(`${name} contains NULL (0x00) characters.`);
    return v;
  }

  private json(name: string, required: boolean): { present: boolean; value: unknown; text: string } {
    const text = this.raw(name, required);
    if (text === undefined) return { present: false, value: undefined, text: '' };
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw chatErrors.bad(`${name} is not valid JSON`);
    }
    // An escape can say what the form's text cannot hold: "\u0000", or half of a surrogate pair.
    const found = inspectJson(value, { wellFormed: true });
    if (found) throw unstorableParam(name, found);
    return { present: true, value, text };
  }

  /** A plain string; `maxLength` counts code points, as Python's len does. */
  string(name: string, opts: { required: true; maxLength?: number; strip?: boolean }): string;
  string(name: string, opts?: { required?: false; maxLength?: number; strip?: boolean }): string | undefined;
  string(name: string, opts: { required?: boolean; maxLength?: number; strip?: boolean } = {}): string | undefined {
    let v = this.raw(name, opts.required ?? false);
    if (v === undefined) return undefined;
    if (opts.strip) v = v.trim();
    const limit = opts.maxLength ?? 100_000;
    if (codePoints(v) > limit) throw chatErrors.bad(`${name} is too long (limit: ${limit} characters)`);
    return v;
  }

  /** One of a fixed set of strings; anything else is `Invalid <name>`. */
  literal<T extends string>(name: string, allowed: readonly T[], required: true): T;
  literal<T extends string>(name: string, allowed: readonly T[], required?: false): T | undefined;
  literal<T extends string>(name: string, allowed: readonly T[], required = false): T | undefined {
    const v = this.raw(name, required);
    if (v === undefined) return undefined;
    if (!(allowed as readonly string[]).includes(v)) throw chatErrors.bad(`Invalid ${name}`);
    return v as T;
  }

  int(name: string, required: true): number;
  int(name: string, required?: false): number | undefined;
  int(name: string, required = false): number | undefined {
    const j = this.json(name, required);
    if (!j.present) return undefined;
    if (!INT.test(j.text)) throw chatErrors.bad(`${name} is not an integer`);
    return j.value as number;
  }

  /** An integer or JSON null (null is returned as null, absence as undefined). */
  intOrNull(name: string): number | null | undefined {
    const j = this.json(name, false);
    if (!j.present) return undefined;
    if (j.value === null) return null;
    if (!INT.test(j.text)) throw chatErrors.bad(`${name} is not an integer`);
    return j.value as number;
  }

  bool(name: string): boolean | undefined {
    const j = this.json(name, false);
    if (!j.present) return undefined;
    if (typeof j.value !== 'boolean') throw chatErrors.bad(`${name} is not a boolean`);
    return j.value;
  }

  intList(name: string, required: true): number[];
  intList(name: string, required?: false): number[] | undefined;
  intList(name: string, required = false): number[] | undefined {
    const j = this.json(name, required);
    if (!j.present) return undefined;
    const list = asList(name, j.value);
    list.forEach((x, i) => {
      if (typeof x !== 'number' || !Number.isSafeInteger(x)) throw chatErrors.bad(`${name}[${i}] is not an integer`);
    });
    return list as number[];
  }

  stringList(name: string, opts: { required?: boolean; maxLength?: number } = {}): string[] | undefined {
    const j = this.json(name, opts.required ?? false);
    if (!j.present) return undefined;
    const list = asList(name, j.value);
    list.forEach((x, i) => {
      if (typeof x !== 'string') throw chatErrors.bad(`${name}[${i}] is not a string`);
      if (opts.maxLength !== undefined && codePoints(x) > opts.maxLength) throw chatErrors.bad(`${name}[${i}] is too long (limit: ${opts.maxLength} characters)`);
    });
    return list as string[];
  }

  /** Zulip's Principals: a JSON list of user ids, or of emails (not both). */
  principals(name: string): Array<number | string> | undefined {
    const j = this.json(name, false);
    if (!j.present) return undefined;
    const list = asList(name, j.value);
    if (list.every((x) => typeof x === 'number' && Number.isSafeInteger(x)) || list.every((x) => typeof x === 'string' && !x.includes('\u0000') && codePoints(x) <= 254)) return list as Array<number | string>;
    throw chatErrors.bad(`${name} is not a list of user IDs or a list of emails`);
  }

  /** A JSON object of strings to strings. */
  stringDict(name: string, required: true): Record<string, string>;
  stringDict(name: string, required = true): Record<string, string> | undefined {
    const j = this.json(name, required);
    if (!j.present) return undefined;
    if (typeof j.value !== 'object' || j.value === null || Array.isArray(j.value)) throw chatErrors.bad(`${name} is not a dict`);
    for (const [k, v] of Object.entries(j.value)) {
      if (typeof v !== 'string') throw chatErrors.bad(`${name}["${k}"] is not a string`);
    }
    return j.value as Record<string, string>;
  }

  /** A JSON list of objects, each checked by `item` (which throws with the element's name). */
  objectList<T>(name: string, required: boolean, item: (value: Record<string, unknown>, label: string) => T): T[] | undefined {
    const j = this.json(name, required);
    if (!j.present) return undefined;
    return asList(name, j.value).map((x, i) => {
      if (typeof x !== 'object' || x === null || Array.isArray(x)) throw chatErrors.bad(`${name}[${i}] is not a dict`);
      return item(x as Record<string, unknown>, `${name}[${i}]`);
    });
  }
}

/**
 * A parameter whose JSON value the database would not keep as sent, named with the path in it:
 * a NUL character in Zulip's words, half of a surrogate pair (text with U+FFFD would be stored
 * instead, or jsonb refuses it naming nothing), nesting past MAX_JSON_DEPTH.
 */
function unstorableParam(name: string, found: NonNullable<ReturnType<typeof inspectJson>>) {
  const { field, message } = unstorableWords(found);
  const where = field ? `${name}.${field}` : name;
  if ('nul' in found) return chatErrors.bad(`${where} contains NULL (0x00) characters.`);
  return chatErrors.bad(`${where} ${message}${'illFormed' in found ? '; send the whole character or leave it out' : ''}`);
}

function asList(name: string, value: unknown): unknown[] {
  if (!Array.isArray(value)) throw chatErrors.bad(`${name} is not a list`);
  if (value.length > MAX_LIST) throw chatErrors.bad(`${name} is too long (limit: ${MAX_LIST} items)`);
  return value;
}

export function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** An id from a request as a database key: out of the int4 range it matches nothing. */
export function dbId(n: number): number {
  return Number.isSafeInteger(n) && n >= 1 && n <= 2_147_483_647 ? n : 0;
}
