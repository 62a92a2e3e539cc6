import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as protocol from '@agentq/protocol';
import { Type, type TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import { IdempotencyHeaders } from '../src/http/idempotency-key.js';
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
    for (const v of ['', ' 5', 'a', 'lnch_1', '10', '0', '-0', '-1', '+7', '1e3', '12.5', '.5', '0x10', '0b11', 'Infinity', 'NaN', 'true', 'false', 'TRUE', '1', 'prompt', 'x'.repeat(300), ['1', '2'], ['true', 'false'], ['idle']]) {
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
  schemas.push(['IdempotencyHeaders', IdempotencyHeaders]);
  for (const [name, schema] of schemas) {
    assert.notEqual(plainText(schema), undefined, `${name} takes the plain-text path`);
    for (const httpPart of ['querystring', 'params', 'headers']) {
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

test('a schema whose defaults Value.Default or Value.Convert would turn takes the general path', () => {
  const schemas = [
    Type.Object({ a: Type.Optional(Type.String({ default: 5 })) }),
    Type.Object({ a: Type.Optional(Type.String({ default: true })) }),
    Type.Object({ n: Type.Optional(Type.Integer({ default: 1.5 })) }),
    Type.Object({ n: Type.Optional(Type.Integer({ default: '5' })) }),
    Type.Object({ n: Type.Optional(Type.Number({ default: true })) }),
    // the default of one of a union's variants: Value.Default takes it when the union has none
    Type.Object({ s: Type.Optional(Type.Union([Type.Literal('a', { default: 'a' }), Type.Literal('b')])) }),
  ];
  for (const schema of schemas) {
    assert.equal(plainText(schema), undefined, JSON.stringify(schema));
    const validate = typeboxValidatorCompiler({ schema, httpPart: 'querystring', method: 'GET', url: '/' }) as (v: unknown) => { value?: unknown; error?: unknown };
    for (const input of [{}, ...inputs(schema)]) {
      const want = general(schema, input);
      const got = validate(input);
      if (want.failed) assert.ok(got.error, `${JSON.stringify(schema)} ${JSON.stringify(input)}: refused`);
      else assert.deepEqual(got.value, want.value, `${JSON.stringify(schema)} ${JSON.stringify(input)}`);
    }
  }
});
