import type { TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import type { FastifySchemaCompiler } from 'fastify';
import { explain, pointerSegment } from '../schema-errors.js';

/** One failed check, in the shape Fastify puts on `error.validation`. */
export interface ValidationIssue {
  instancePath: string;
  message: string;
}

/**
 * Validates with TypeBox's compiler, the same schemas the types come from. Bodies are checked
 * strictly (no type coercion, unknown fields rejected); querystrings and params arrive as text,
 * so they are converted (`"10"` -> 10) and get their defaults first.
 */
export const typeboxValidatorCompiler: FastifySchemaCompiler<TSchema> = ({ schema, httpPart }) => {
  const checker = TypeCompiler.Compile(schema);
  const convert = httpPart !== 'body';
  const numeric = convert ? numericKeys(schema) : new Set<string>();
  // most querystrings and params need nothing of TypeBox's Default and Convert but their
  // top-level defaults (a walk of the schema per request: a few percent of the coordinator's CPU
  // with one job per request, docs/benchmarks.md); the others take the general path
  const plain = convert ? plainText(schema) : undefined;
  return (input: unknown) => {
    let value = input;
    if (convert && value !== null && typeof value === 'object') {
      // numbers are read whole and in decimal only: TypeBox's own conversion reads "1e300" or
      // "12.5" as an integer by its leading digits or truncates (1, 12), which would slip past
      // every bound, and reads "0x10" as 16 and "0b11", "0o7" or "" as 0; any other text stays
      // text, which the check then refuses as not a number
      const numbers = new Map<string, number | string>();
      for (const key of numeric) {
        const v = (value as Record<string, unknown>)[key];
        if (typeof v === 'string') numbers.set(key, NUMBER.test(v) ? Number(v) : v);
      }
      const converted = (
        plain ? withDefaults({ ...(value as object) }, plain) : Value.Convert(schema, Value.Default(schema, { ...(value as object) }))
      ) as Record<string, unknown>;
      for (const [key, n] of numbers) converted[key] = n;
      value = converted;
    }
    if (checker.Check(value)) return { value };
    const first = checker.Errors(value).First();
    const explained = first ? explain(first) : { path: '', message: 'is invalid' };
    const issue: ValidationIssue = { instancePath: explained.path, message: explained.message };
    return { error: [issue] as unknown as Error };
  };
};

type Primitive = string | number;

/**
 * The top-level defaults of a flat object schema whose properties Value.Convert leaves as they
 * are (text, or text literals) or the validator reads itself (numbers: numericKeys), with
 * defaults of the property's own type (a default Convert would turn, `{ type: 'string', default: 5 }`
 * or an integer's 1.5, is left to it); undefined for any other schema. For such a schema,
 * `Value.Convert(schema, Value.Default(schema, v))` is `v` with these defaults in place of the
 * missing properties.
 */
export function plainText(schema: TSchema): [string, Primitive][] | undefined {
  if (schema.type !== 'object' || 'default' in schema || typeof schema.properties !== 'object') return undefined;
  if (schema.additionalProperties !== undefined && typeof schema.additionalProperties !== 'boolean') return undefined;
  const isText = (s: TSchema): boolean =>
    s.type === 'string' ||
    (s.type === undefined && typeof s.const === 'string') ||
    // a variant's own default is one Value.Default would use: the general path
    (s.type === undefined && Array.isArray(s.anyOf) && (s.anyOf as TSchema[]).every((v) => typeof v.const === 'string' && !('default' in v)));
  const defaults: [string, Primitive][] = [];
  for (const [key, prop] of Object.entries(schema.properties as Record<string, TSchema>)) {
    const text = isText(prop);
    if (!text && prop.type !== 'integer' && prop.type !== 'number') return undefined;
    if (!('default' in prop)) continue;
    const d: unknown = prop.default;
    if (text ? typeof d !== 'string' : typeof d !== 'number' || (prop.type === 'integer' && !Number.isInteger(d))) return undefined;
    defaults.push([key, d as Primitive]);
  }
  return defaults;
}

function withDefaults(value: Record<string, unknown>, defaults: [string, Primitive][]): Record<string, unknown> {
  for (const [key, d] of defaults) if (value[key] === undefined) value[key] = d;
  return value;
}

const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** The properties of an object schema that are numbers (querystrings and params are flat). */
function numericKeys(schema: TSchema): Set<string> {
  const out = new Set<string>();
  const isNumber = (s: TSchema | undefined): boolean =>
    s !== undefined && (s.type === 'integer' || s.type === 'number' || (Array.isArray(s.anyOf) && (s.anyOf as TSchema[]).some(isNumber)));
  for (const [key, prop] of Object.entries((schema.properties ?? {}) as Record<string, TSchema>)) if (isNumber(prop)) out.add(key);
  return out;
}

/** `"/a/0/b"` -> `"a[0].b"`; empty -> the request part's name. A segment is unescaped (RFC 6901: a label key `a/b` is `a~1b` in the pointer). */
export function fieldName(instancePath: string, part: string | undefined): string {
  const segments = instancePath.split('/').filter(Boolean).map(pointerSegment);
  if (segments.length === 0) return part === 'querystring' ? 'query' : (part ?? 'request');
  return segments.map((s, i) => (/^\d+$/.test(s) ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');
}
