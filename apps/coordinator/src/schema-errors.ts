import { Kind, type TSchema } from '@sinclair/typebox';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';
import { LABEL_KEY_RULE, LabelKey } from '@agentq/protocol';

/**
 * Readable sentences for TypeBox errors, shared by request validation and config loading.
 * TypeBox says only "Expected union value" for an enum or a nullable field; a person needs to
 * know what would have been accepted, so unions list their choices, and a union with exactly one
 * choice of the value's own kind (`{...}` for an object-or-null) reports that choice's error.
 */
export interface Explained {
  /** JSON pointer of the failing value, e.g. `/type` or `/jobs/0/prompt` */
  path: string;
  message: string;
}

const MAX_LISTED = 20;

export function explain(error: ValueError): Explained {
  switch (error.type) {
    case ValueErrorType.Union: {
      const variants = ((error.schema as { anyOf?: TSchema[] }).anyOf ?? []) as TSchema[];
      const tagged = byTag(variants, error);
      if (tagged) return tagged;
      const sameKind = variants.flatMap((s, i) => (sameKindAs(s, error.value) && s[Kind] !== 'Literal' ? [i] : []));
      if (sameKind.length === 1) {
        const inner = error.errors[sameKind[0]!]?.First();
        if (inner) return explain(inner);
      }
      return { path: error.path, message: `Expected ${describeChoices(variants)}` };
    }
    case ValueErrorType.ObjectRequiredProperty:
      return { path: error.path, message: 'is required' };
    case ValueErrorType.ObjectAdditionalProperties: {
      if (error.schema[Kind] === 'Record') return recordKey(error);
      const known = Object.keys((error.schema as { properties?: object }).properties ?? {});
      return { path: error.path, message: `is not a known field${known.length ? ` (known: ${known.join(', ')})` : ''}` };
    }
    default:
      return { path: error.path, message: error.message };
  }
}

/** A JSON pointer segment as the key it names (RFC 6901: `a~1b` is `a/b`, `~0` is `~`). */
export function pointerSegment(segment: string): string {
  return segment.replace(/~1/g, '/').replace(/~0/g, '~');
}

/**
 * A key a record's key pattern refuses (a label name in `requires` or `labels`): said of the record,
 * the field a person wrote, with the key quoted: the key is no field (`{"": "x"}` has no name to
 * show), and "not a known field" would read as if the record itself were unknown.
 */
function recordKey(error: ValueError): Explained {
  const cut = error.path.lastIndexOf('/');
  // the key as written: TypeBox escapes it into the path as a JSON pointer segment
  const key = pointerSegment(error.path.slice(cut + 1));
  const pattern = Object.keys((error.schema as { patternProperties?: object }).patternProperties ?? {})[0];
  const rule = pattern === LabelKey.pattern ? `label key ${JSON.stringify(key)} ${LABEL_KEY_RULE}` : `key ${JSON.stringify(key)} does not match ${pattern}`;
  return { path: error.path.slice(0, cut), message: rule };
}

/**
 * A union of objects told apart by a field every one of them fixes (`kind` of a report): the
 * error of the variant the value names, or of the field itself when it names none.
 */
function byTag(variants: readonly TSchema[], error: ValueError): Explained | undefined {
  const value = error.value as Record<string, unknown> | null;
  if (variants.length < 2 || typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const literalOf = (v: TSchema, key: string): unknown => {
    const prop = (v.properties as Record<string, TSchema> | undefined)?.[key];
    return prop?.[Kind] === 'Literal' ? (prop as unknown as { const: unknown }).const : undefined;
  };
  if (!variants.every((v) => v[Kind] === 'Object')) return undefined;
  const tag = Object.keys((variants[0]!.properties ?? {}) as object).find((key) => variants.every((v) => literalOf(v, key) !== undefined));
  if (tag === undefined) return undefined;
  const i = variants.findIndex((v) => literalOf(v, tag) === value[tag]);
  if (i < 0) {
    const choices = variants.map((v) => String(literalOf(v, tag))).join(', ');
    return { path: `${error.path}/${tag}`, message: value[tag] === undefined ? `is required (one of ${choices})` : `Expected one of ${choices}` };
  }
  const inner = error.errors[i]?.First();
  return inner ? explain(inner) : undefined;
}

/** `one of a, b, c` for enums; `an integer or null` for mixed unions. */
export function describeChoices(variants: readonly TSchema[]): string {
  if (variants.length > 0 && variants.every((v) => v[Kind] === 'Literal')) {
    const values = variants.map((v) => String((v as unknown as { const: unknown }).const));
    const shown = values.slice(0, MAX_LISTED).join(', ');
    return `one of ${shown}${values.length > MAX_LISTED ? ', ...' : ''}`;
  }
  const parts = variants.map(describe);
  return parts.length <= 1 ? (parts[0] ?? 'a valid value') : `${parts.slice(0, -1).join(', ')} or ${parts.at(-1)}`;
}

function describe(s: TSchema): string {
  switch (s[Kind]) {
    case 'Literal':
      return JSON.stringify((s as unknown as { const: unknown }).const);
    case 'Null':
      return 'null';
    case 'Integer':
      return `an integer${bounds(s)}`;
    case 'Number':
      return `a number${bounds(s)}`;
    case 'String':
      return 'a string';
    case 'Boolean':
      return 'true or false';
    case 'Array':
      return 'an array';
    case 'Object':
    case 'Record':
      return 'an object';
    case 'Union':
      return describeChoices((s as unknown as { anyOf: TSchema[] }).anyOf);
    default:
      return 'a valid value';
  }
}

function bounds(s: TSchema): string {
  const parts: string[] = [];
  if (typeof s.minimum === 'number') parts.push(`>= ${s.minimum}`);
  if (typeof s.exclusiveMinimum === 'number') parts.push(`> ${s.exclusiveMinimum}`);
  if (typeof s.maximum === 'number') parts.push(`<= ${s.maximum}`);
  if (typeof s.exclusiveMaximum === 'number') parts.push(`< ${s.exclusiveMaximum}`);
  return parts.length ? ` ${parts.join(' and ')}` : '';
}

function sameKindAs(s: TSchema, value: unknown): boolean {
  switch (s[Kind]) {
    case 'Object':
    case 'Record':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    case 'Array':
      return Array.isArray(value);
    case 'String':
      return typeof value === 'string';
    case 'Integer':
    case 'Number':
      return typeof value === 'number';
    case 'Boolean':
      return typeof value === 'boolean';
    case 'Null':
      return value === null;
    default:
      return false;
  }
}
