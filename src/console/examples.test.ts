import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { testApp, type TestApp } from '../../test/harness.ts';

const pointer = (...parts: string[]) => '#/' + parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

/** Every operation of the served contract has a summary and an example of each part that carries data, and every example fits its schema. */
describe('contract examples', () => {
  let t: TestApp;
  let doc: any;
  before(async () => {
    t = await testApp();
    const res = await t.request({ method: 'GET', url: '/api/v1/openapi.json', token: t.adminToken });
    assert.equal(res.status, 200);
    doc = res.body;
  });
  after(() => t.close());

  const resolve = (schema: any) => (schema?.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema);
  /** A media type's example: its own, or its schema's (a named shape's). Binary media (images) carry none. */
  const exampleOf = (type: string, media: any) => (type.startsWith('image/') ? 'binary' : (media.example ?? resolve(media.schema)?.examples?.[0]));

  it('every operation has a summary, and examples of its path parameters, body and answers', () => {
    const missing: string[] = [];
    let operations = 0;
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        operations++;
        const where = `${method.toUpperCase()} ${path} (${op.operationId})`;
        if (!op.summary?.trim()) missing.push(`${where}: summary`);
        for (const p of op.parameters ?? []) if (p.in === 'path' && p.example === undefined) missing.push(`${where}: path parameter ${p.name}`);
        for (const [type, media] of Object.entries<any>(op.requestBody?.content ?? {})) if (exampleOf(type, media) === undefined) missing.push(`${where}: ${type} body`);
        for (const [code, answer] of Object.entries<any>(op.responses)) {
          if (!/^2/.test(code)) continue;
          for (const [type, media] of Object.entries<any>(answer.content ?? {})) if (exampleOf(type, media) === undefined) missing.push(`${where}: ${code} ${type} answer`);
        }
      }
    }
    assert.ok(operations > 90, `${operations} operations`);
    assert.deepEqual(missing, [], 'add the examples beside the resource\'s schemas (src/console/<resource>/<resource>.examples.ts)');
  });

  it('every example fits its schema', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
    addFormats.default(ajv);
    ajv.addSchema({ ...doc, $id: 'https://crewhouse.test/contract.json' });
    const wrong: string[] = [];
    const check = (where: string, ref: string, value: unknown) => {
      const validate = ajv.compile({ $ref: `https://crewhouse.test/contract.json${ref}` });
      if (!validate(value)) wrong.push(`${where}: ${ajv.errorsText(validate.errors)}`);
    };
    for (const [name, schema] of Object.entries<any>(doc.components.schemas)) {
      if (schema.examples) check(`schema ${name}`, pointer('components', 'schemas', name), schema.examples[0]);
    }
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        for (const [type, media] of Object.entries<any>(op.requestBody?.content ?? {})) {
          if (media.example !== undefined) check(`${op.operationId} body`, pointer('paths', path, method, 'requestBody', 'content', type, 'schema'), media.example);
        }
        for (const [code, answer] of Object.entries<any>(op.responses)) {
          for (const [type, media] of Object.entries<any>(answer.content ?? {})) {
            if (media.example !== undefined) check(`${op.operationId} ${code}`, pointer('paths', path, method, 'responses', code, 'content', type, 'schema'), media.example);
          }
        }
        for (const [i, p] of (op.parameters ?? []).entries()) {
          if (p.example !== undefined) check(`${op.operationId} parameter ${p.name}`, pointer('paths', path, method, 'parameters', String(i), 'schema'), p.example);
        }
      }
    }
    assert.deepEqual(wrong, []);
  });
});
