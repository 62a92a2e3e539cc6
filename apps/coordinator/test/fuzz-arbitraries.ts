import fc from 'fast-check';

/**
 * fast-check arbitraries for the fuzz test, made from the OpenAPI document (the routes' own
 * JSON Schemas): values that fit the schema, values that almost fit, and plain junk.
 */
export type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  patternProperties?: Record<string, JsonSchema>;
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  const?: unknown;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
};

/** Text that tends to break parsers and routers. */
const NASTY = [
  '',
  ' ',
  '%',
  '%zz',
  '%00',
  '%E0%A4%A',
  '%2F',
  '..',
  '../..',
  '\u0000',
  '\uD800',
  '💥',
  'null',
  'true',
  '-1',
  '1e309',
  '0x10',
  '9007199254740993',
  '__proto__',
  'constructor',
  '<script>',
  "'; drop table jobs; --",
];

export const junkString = (): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.string({ maxLength: 40 }) },
    { weight: 2, arbitrary: fc.constantFrom(...NASTY) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
    { weight: 1, arbitrary: fc.nat({ max: 3 }).map((n) => 'x'.repeat([201, 256, 1000, 5000][n]!)) },
  );

/** Any JSON value, small. */
export const junkJson = (): fc.Arbitrary<unknown> =>
  fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.constantFrom<unknown>(null, [], {}, 0, -1, 1e308, '', true),
    fc.dictionary(junkString(), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 5 }),
  );

/** A value that fits `schema` (most of the time: patterns and formats are not honoured). */
export function fitting(schema: JsonSchema, depth = 0): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  if (schema.anyOf) return fc.oneof(...schema.anyOf.map((s) => fitting(s, depth + 1)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return fc.integer({
        min: Math.max(Number.MIN_SAFE_INTEGER, schema.minimum ?? (schema.exclusiveMinimum ?? -1_000_000) + 1),
        max: Math.min(Number.MAX_SAFE_INTEGER, schema.maximum ?? 1_000_000),
      });
    case 'number':
      return fc.double({
        min: schema.minimum ?? schema.exclusiveMinimum ?? -1e6,
        max: schema.maximum ?? 1e6,
        noNaN: true,
        noDefaultInfinity: true,
      });
    case 'string':
      return fc.oneof(
        fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 30, 30) }),
        fc.constantFrom('job_000000000000', 'lnch_000000000000', 'main', 'a=b'),
      );
    case 'array':
      if (depth > 4 || !schema.items) return fc.constant([]);
      return fc.array(fitting(schema.items, depth + 1), { minLength: schema.minItems ?? 0, maxLength: Math.min(schema.maxItems ?? 3, 3) });
    case 'object': {
      if (depth > 4) return fc.constant({});
      const props = schema.properties ?? {};
      if (Object.keys(props).length === 0 && (schema.patternProperties || typeof schema.additionalProperties === 'object')) {
        // a record (labels): short key=value pairs
        return fc.dictionary(fc.stringMatching(/^[a-z][a-z0-9_]{0,8}$/), fc.string({ minLength: 1, maxLength: 10 }), { maxKeys: 3 });
      }
      const required = (schema.required ?? []).filter((k) => k in props);
      const shape: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [k, s] of Object.entries(props)) shape[k] = fitting(s, depth + 1);
      return fc.record(shape, { requiredKeys: required });
    }
    default:
      return junkJson();
  }
}

/** A value that fits, one field of it broken, or junk. */
export function fuzzValue(schema: JsonSchema | undefined): fc.Arbitrary<unknown> {
  if (!schema) return junkJson();
  return fc.oneof(
    { weight: 4, arbitrary: fitting(schema) },
    { weight: 3, arbitrary: broken(schema) },
    { weight: 1, arbitrary: junkJson() },
  );
}

/** An object that fits except for one property (wrong type, junk, or an unknown extra). */
function broken(schema: JsonSchema): fc.Arbitrary<unknown> {
  const props = Object.keys(schema.properties ?? {});
  if (props.length === 0) return junkJson();
  return fc
    .tuple(fitting(schema), fc.constantFrom(...props, '__extra__'), junkJson(), fc.boolean())
    .map(([value, key, junk, remove]) => {
      if (typeof value !== 'object' || value === null) return value;
      const copy = { ...(value as Record<string, unknown>) };
      if (remove && key !== '__extra__') delete copy[key];
      else copy[key] = junk;
      return copy;
    });
}
