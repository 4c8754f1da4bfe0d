import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fastJsonStringify from 'fast-json-stringify';
import { Type } from 'typebox';
import { User } from '../console/users/users.schemas.ts';
import { Page } from './pagination.ts';
import { checkOf, serializerCompiler } from './serializer.ts';

const serializerOf = (schema: unknown) => serializerCompiler({ schema, method: 'GET', url: '/x', httpStatus: '200' } as never) as (data: unknown) => string;
const user = (i: number) => ({ id: i, name: `u-${i}`, email: null, role: 'viewer', disabled: false, password_set: true, last_login_at: null, created_at: '2026-11-22T23:14:48.918Z', updated_at: '2026-11-22T23:14:48.918Z' });

describe('the answer serializer', () => {
  const page = Page(User);
  const ours = serializerOf(page);
  const theirs = fastJsonStringify(page as never);

  test('an answer exactly as its schema says is written by JSON.stringify, in its own field order', () => {
    const data = { next_cursor: 'abc', items: [user(1), { ...user(2), email: 'a"b\\c\u2028\ud800@x', role: 'admin' }] };
    assert.equal(ours(data), JSON.stringify(data));
    assert.deepEqual(JSON.parse(ours(data)), JSON.parse(theirs(data)));
  });

  test('anything else goes through fast-json-stringify: undeclared fields dropped, values coerced, a missing field refused', () => {
    const leaky = { items: [{ ...user(1), password_hash: 'scrypt$secret' }], next_cursor: null };
    assert.ok(!ours(leaky).includes('secret'));
    assert.equal(ours(leaky), theirs(leaky));
    const coerced = { items: [{ ...user(1), id: '7', disabled: 0 }], next_cursor: null };
    assert.equal(ours(coerced), theirs(coerced));
    assert.equal(JSON.parse(ours(coerced)).items[0].id, 7);
    const date = { items: [{ ...user(1), created_at: new Date('2026-01-02T03:04:05.006Z') }], next_cursor: null };
    assert.equal(ours(date), theirs(date));
    const fractional = { items: [{ ...user(1), id: 1.5 }], next_cursor: null };
    assert.equal(ours(fractional), theirs(fractional));
    const { email: _email, ...missing } = user(1);
    assert.throws(() => ours({ items: [missing], next_cursor: null }), /email/);
    class Row {
      id = 1;
    }
    const instance = Type.Object({ id: Type.Integer() });
    assert.equal(serializerOf(instance)(new Row()), fastJsonStringify(instance as never)(new Row()));
  });

  test('a field left undefined is written by neither; additionalProperties: true keeps the rest', () => {
    const loose = Type.Object({ a: Type.Optional(Type.String()) }, { additionalProperties: true });
    assert.equal(serializerOf(loose)({ a: undefined, b: [1, { c: 2 }] }), JSON.stringify({ b: [1, { c: 2 }] }));
    const strict = Type.Object({ a: Type.Optional(Type.String()) });
    assert.equal(serializerOf(strict)({ a: undefined, b: undefined }), '{}');
    assert.equal(serializerOf(strict)({ a: 'x', b: 1 }), '{"a":"x"}');
  });

  test('schemas the check does not cover are left to fast-json-stringify', () => {
    assert.equal(checkOf(Type.Union([Type.Object({ a: Type.String() }), Type.Object({ b: Type.String() })])), null);
    assert.equal(checkOf({ allOf: [{ type: 'object' }] }), null);
    assert.equal(checkOf({ $ref: '#/x' }), null);
    assert.equal(checkOf(Type.Record(Type.String(), Type.Integer())), null);
    assert.equal(checkOf({ type: 'object', properties: { 'a"); throw 1; ("': { type: 'string' } } })!({ 'a"); throw 1; ("': 'x' }), true);
    assert.ok(checkOf(Type.Object({ r: Type.Union([Type.Literal('a'), Type.Literal(1), Type.Null()]), any: Type.Unknown() })));
  });

});
