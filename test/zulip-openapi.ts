// Checks a chat response against Zulip Server's own OpenAPI description (../shared/data/zulip.yaml
// beside the repository, or ZULIP_OPENAPI): the 200 schema of an operation, converted from
// OpenAPI 3.0 to JSON Schema the way Zulip's own test suite reads it (allOf parts merged into
// one object, `nullable` as a null type, examples dropped).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { parse as parseYaml } from 'yaml';

const here = path.dirname(fileURLToPath(import.meta.url));
const CANDIDATES = [process.env.ZULIP_OPENAPI, path.join(here, '../../shared/data/zulip.yaml')].filter(Boolean) as string[];

let spec: any = null;
function load(): any {
  if (spec) return spec;
  const file = CANDIDATES.find((f) => fs.existsSync(f));
  if (!file) throw new Error(`Zulip's OpenAPI description was not found (looked in ${CANDIDATES.join(', ')}); set ZULIP_OPENAPI to its path`);
  spec = parseYaml(fs.readFileSync(file, 'utf8'), { maxAliasCount: -1 });
  return spec;
}

/** Whether the description is on this machine (tests that need it skip without it). */
export const zulipOpenApiAvailable = CANDIDATES.some((f) => fs.existsSync(f));

function resolve(node: any): any {
  while (node && typeof node === 'object' && typeof node.$ref === 'string') {
    node = node.$ref.slice(2).split('/').reduce((o: any, k: string) => o[k], load());
  }
  return node;
}

function convert(node: any, depth = 0): any {
  if (depth > 60) return {};
  node = resolve(node);
  if (Array.isArray(node)) return node.map((n) => convert(n, depth + 1));
  if (!node || typeof node !== 'object') return node;
  if (node.allOf) return convert(mergeAll(node.allOf.map((p: any) => resolveDeep(p))), depth + 1);
  const out: any = {};
  for (const [k, v] of Object.entries(node)) {
    if (['example', 'examples', 'description', 'nullable', 'deprecated', 'x-curl-examples-parameters'].includes(k)) continue;
    if (k === 'properties') out.properties = Object.fromEntries(Object.entries(v as object).map(([pk, pv]) => [pk, convert(pv, depth + 1)]));
    else if (typeof v === 'object' && v !== null) out[k] = convert(v, depth + 1);
    else out[k] = v;
  }
  if (node.nullable) {
    if (out.type) out.type = [out.type, 'null'];
    else return { anyOf: [out, { type: 'null' }] };
    if (out.enum) out.enum = [...out.enum, null];
  }
  return out;
}

function resolveDeep(node: any): any {
  node = resolve(node);
  if (node?.allOf) return mergeAll(node.allOf.map((p: any) => resolveDeep(p)));
  return node;
}

/** Merges allOf parts: properties merged per name, required united, the strictest additionalProperties. */
function mergeAll(parts: any[]): any {
  const out: any = {};
  for (const p of parts) {
    for (const [k, v] of Object.entries(p)) {
      if (k === 'properties') {
        out.properties ??= {};
        for (const [pk, pv] of Object.entries(v as object)) out.properties[pk] = { ...(out.properties[pk] ?? {}), ...resolveDeep(pv) };
      } else if (k === 'required') out.required = [...new Set([...(out.required ?? []), ...(v as string[])])];
      else if (k === 'additionalProperties') out.additionalProperties = out.additionalProperties === false ? false : v;
      else if (k === 'enum' && out.enum) out.enum = out.enum.filter((e: unknown) => (v as unknown[]).includes(e));
      else out[k] = v;
    }
  }
  return out;
}

const ajv = new Ajv({ strict: false, allErrors: true });
const compiled = new Map<string, ReturnType<typeof ajv.compile>>();

/** The operation's 200 response schema as JSON Schema. */
export function responseSchema(method: string, apiPath: string): any {
  const op = load().paths[apiPath]?.[method.toLowerCase()];
  if (!op) throw new Error(`zulip.yaml has no ${method} ${apiPath}`);
  const res = resolve(op.responses['200']);
  return convert(res.content['application/json'].schema);
}

/** Throws, naming each mismatch, when `body` is not what zulip.yaml says `method apiPath` answers. */
export function assertZulipResponse(method: string, apiPath: string, body: unknown): void {
  const key = `${method} ${apiPath}`;
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile(responseSchema(method, apiPath));
    compiled.set(key, validate);
  }
  if (!validate(body)) {
    const errors = (validate.errors ?? []).slice(0, 8).map((e) => `${e.instancePath || '/'} ${e.message} ${e.params ? JSON.stringify(e.params) : ''}`);
    throw new Error(`${key}: the response does not match zulip.yaml:\n${errors.join('\n')}\n${JSON.stringify(body).slice(0, 1500)}`);
  }
}
