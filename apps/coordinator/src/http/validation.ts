import type { TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import type { FastifySchemaCompiler } from 'fastify';
import { explain } from '../schema-errors.js';

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
  return (input: unknown) => {
    let value = input;
    if (convert && value !== null && typeof value === 'object') {
      value = Value.Convert(schema, Value.Default(schema, { ...(value as object) }));
    }
    if (checker.Check(value)) return { value };
    const first = checker.Errors(value).First();
    const explained = first ? explain(first) : { path: '', message: 'is invalid' };
    const issue: ValidationIssue = { instancePath: explained.path, message: explained.message };
    return { error: [issue] as unknown as Error };
  };
};

/** `"/a/0/b"` -> `"a[0].b"`; empty -> the request part's name. */
export function fieldName(instancePath: string, part: string | undefined): string {
  const segments = instancePath.split('/').filter(Boolean);
  if (segments.length === 0) return part === 'querystring' ? 'query' : (part ?? 'request');
  return segments.map((s, i) => (/^\d+$/.test(s) ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');
}
