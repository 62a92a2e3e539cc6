import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as protocol from '@agentq/protocol';
import { Type, type TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import { plainText, typeboxValidatorCompiler } from '../src/http/validation.js';

/** What the validator did for every querystring and params before the plain-text path: Default, Convert, then the decimal numbers. */
function general(schema: TSchema, input: Record<string, unknown>): { value?: unknown; failed?: boolean } {
  const numbers = new Map<string, unknown>();
  for (const [key, prop] of Object.entries(schema.properties as Record<string, TSchema>)) {
    const v = input[key];
    const numeric = prop.type === 'integer' || prop.type === 'number';
    if (numeric && typeof v === 'string') numbers.set(key, /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(v) ? Number(v) : v);
  }
  const value = Value.Convert(schema, Value.Default(schema, { ...input })) as Record<string, unknown>;
  for (const [key, n] of numbers) value[key] = n;
  return TypeCompiler.Compile(schema).Check(value) ? { value } : { failed: true };
}

const inputs = (schema: TSchema): Record<string, unknown>[] => {
  const keys = Object.keys(schema.properties as object);
  const out: Record<string, unknown>[] = [{}, { unknown: 'x' }];
  for (const key of keys) {
    for (const v of ['', 'a', 'lnch_1', '10', '0', '-1', '1e3', '12.5', '0x10', 'true', 'false', 'x'.repeat(300), ['1', '2']]) {
      out.push({ [key]: v });
      // with every other property set too: the required ones are there
      out.push(Object.fromEntries(keys.map((k) => [k, k === key ? v : '5'])));
      out.push(Object.fromEntries(keys.map((k) => [k, k === key ? v : 'job_1'])));
    }
  }
  return out;
};

test('querystrings and params that take the plain-text path get what Default and Convert made of them', () => {
  const schemas = Object.entries(protocol).filter(([name]) => /(Query|Params)$/.test(name)) as [string, TSchema][];
  assert.ok(schemas.length >= 10, 'the protocol exports its querystring and params schemas');
  for (const [name, schema] of schemas) {
    assert.notEqual(plainText(schema), undefined, `${name} takes the plain-text path`);
    for (const httpPart of ['querystring', 'params']) {
      const validate = typeboxValidatorCompiler({ schema, httpPart, method: 'GET', url: '/' }) as (v: unknown) => { value?: unknown; error?: unknown };
      for (const input of inputs(schema)) {
        const got = validate(input);
        const want = general(schema, input);
        if (want.failed) assert.ok(got.error, `${name} ${JSON.stringify(input)}: refused`);
        else assert.deepEqual(got.value, want.value, `${name} ${JSON.stringify(input)}`);
      }
    }
  }
});

test('schemas whose text Convert would change (booleans, nested objects, object defaults) take the general path', () => {
  assert.equal(plainText(Type.Object({ on: Type.Boolean() })), undefined);
  assert.equal(plainText(Type.Object({ a: Type.Object({ b: Type.String() }) })), undefined);
  assert.equal(plainText(Type.Object({ a: Type.Array(Type.String()) })), undefined);
  assert.equal(plainText(Type.Object({ a: Type.String({ default: { x: 1 } }) })), undefined);
  assert.equal(plainText(Type.Object({ a: Type.String() }, { default: {} })), undefined);
  const validate = typeboxValidatorCompiler({ schema: Type.Object({ on: Type.Boolean() }), httpPart: 'querystring', method: 'GET', url: '/' }) as (
    v: unknown,
  ) => { value?: unknown };
  assert.deepEqual(validate({ on: 'true' }).value, { on: true });
});
