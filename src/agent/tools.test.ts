import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Value } from 'typebox/value';
import { TOOL_CATALOG } from './tools/catalog.ts';
import { parseCall } from './tools/index.ts';

/** A value that fits `schema`, as far as the catalogue's schemas go (strings, numbers, booleans, literals, arrays, objects). */
function fill(schema: any): unknown {
  if (schema.const !== undefined) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if (Array.isArray(schema.anyOf)) return fill(schema.anyOf[0]);
  switch (schema.type) {
    case 'string':
      return ['x'.repeat(Math.max(1, schema.minLength ?? 1)), 'http://example.invalid/x'].find((v) => Value.Check(schema, v));
    case 'integer':
    case 'number':
      return Math.max(1, schema.minimum ?? 1);
    case 'boolean':
      return true;
    case 'array':
      return [fill(schema.items)];
    case 'object':
      return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, p]) => [k, fill(p)]));
    default:
      return null;
  }
}

const BAD = ['', 'x', 'not a uri', 0, -1, 1.5, 100_000, true, null, [], {}, [{ step: 1 }], 'x'.repeat(20_000)];

describe('the built-in tools\' argument checks', () => {
  it('give the verdict and the words the schema gives, for every tool, with arguments right, missing, of the wrong kind and extra', () => {
    const allowed = new Set(TOOL_CATALOG.map((t) => t.name));
    let checked = 0;
    let refused = 0;
    for (const tool of TOOL_CATALOG) {
      const good = fill(tool.parameters) as Record<string, unknown>;
      assert.ok(Value.Check(tool.parameters, good), `${tool.name}: the filled arguments do not fit (${JSON.stringify(good)})`);
      const cases: Array<Record<string, unknown>> = [good, {}, { ...good, unknown_argument: 1 }];
      for (const key of Object.keys(good)) {
        const { [key]: _dropped, ...without } = good;
        cases.push(without);
        for (const bad of BAD) cases.push({ ...good, [key]: bad });
      }
      for (const args of cases) {
        const parsed = parseCall(tool.name, JSON.stringify(args), allowed);
        if (Value.Check(tool.parameters, args)) {
          assert.ok(parsed.ok, `${tool.name} ${JSON.stringify(args).slice(0, 200)}: refused, but it fits the schema`);
          assert.deepEqual(parsed.args, args);
        } else {
          refused++;
          const problems = [...Value.Errors(tool.parameters, args)]
            .filter((e) => e.keyword !== 'boolean')
            .slice(0, 5)
            .map((e) => `${e.instancePath || '(arguments)'} ${e.message}`);
          assert.deepEqual(parsed, { ok: false, error: `the arguments of ${tool.name} do not fit its schema: ${problems.join('; ')}` }, `${tool.name} ${JSON.stringify(args).slice(0, 200)}`);
        }
        checked++;
      }
    }
    assert.ok(checked > 500 && refused > checked / 2, `${checked} cases, ${refused} refused`);
  });

  it('names arguments that are not JSON, not an object, or a tool the agent does not have', () => {
    const allowed = new Set(['shell']);
    assert.deepEqual(parseCall('shell', '{"command": ', allowed), { ok: false, error: 'the arguments of shell are not valid JSON: {"command": ' });
    assert.deepEqual(parseCall('shell', '[1]', allowed), { ok: false, error: 'the arguments of shell must be a JSON object' });
    assert.deepEqual(parseCall('read_file', '{}', allowed), { ok: false, error: 'there is no tool named "read_file" for this agent; the tools are: shell' });
    assert.deepEqual(parseCall('shell', '{"command":"ls"}', allowed), { ok: true, tool: TOOL_CATALOG.find((t) => t.name === 'shell'), args: { command: 'ls' } });
  });
});
