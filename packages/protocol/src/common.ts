import { FormatRegistry, Type, type Static, type TSchema } from '@sinclair/typebox';

/** A value that may be absent on the wire: always present as a key, `null` when unset. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** ISO 8601 UTC timestamp, e.g. `2025-12-10T10:00:00.000Z`. */
export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC timestamp' });

/**
 * TypeBox's `Value.Check` knows a `format` only once it is registered, and refuses every value of
 * an unknown one: call this once before checking values against these schemas yourself (the
 * coordinator's validator has its own). Registers `date-time` (ISO 8601 with a UTC offset).
 */
export function registerFormats(): void {
  if (!FormatRegistry.Has('date-time')) {
    FormatRegistry.Set('date-time', (v) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(v));
  }
}

export const JobId = Type.String({ pattern: '^job_[0-9a-f]{12}$', description: '`job_` + 12 hex chars' });
export const LauncherId = Type.String({ pattern: '^lnch_[0-9a-f]{12}$', description: '`lnch_` + 12 hex chars' });

/** Path ids are not pattern-checked: an id of the wrong shape is simply unknown (404). */
export const IdParam = Type.String({ minLength: 1, maxLength: 200 });

export const Ok = Type.Object({ ok: Type.Literal(true) });
export type Ok = Static<typeof Ok>;

/**
 * `text` as a number when it is written as a plain decimal (digits, maybe a fraction, maybe a
 * sign), else NaN: `Number()` would also take "0x10", "1e3", "0b1" and " 5". For numbers people
 * write in flags and environment variables (the launcher's and the coordinator's configuration).
 */
export function parseDecimal(text: string): number {
  return /^[+-]?\d+(\.\d+)?$/.test(text) ? Number(text) : NaN;
}

/** Querystring booleans arrive as text. */
export const BoolString = Type.Union([Type.Literal('true'), Type.Literal('false')]);

/** LabelKey's pattern in words, for messages that refuse a label name (coordinator and launcher). */
export const LABEL_KEY_RULE = 'must start with a letter or digit and use only letters, digits and _ . - / (at most 63)';

/**
 * Labels: short `key=value` pairs. Launchers carry them (`hostname`, `executor`, `os`, `arch`,
 * plus their own); a job's `requires` names the pairs a launcher must have to take it.
 */
export const LabelKey = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_.\\-/]{0,62}$', maxLength: 63 });
export const LabelValue = Type.String({ minLength: 1, maxLength: 128, pattern: '^[^\\u0000-\\u001f]+$' });
export const Labels = Type.Record(LabelKey, LabelValue, {
  maxProperties: 32,
  additionalProperties: false,
  description: 'key=value labels',
});
export type Labels = Static<typeof Labels>;

/** Token counts of one job (summed per session and per session tree). */
export const Usage = Type.Object({
  input_tokens: Type.Integer({ minimum: 0, maximum: 1e15 }),
  output_tokens: Type.Integer({ minimum: 0, maximum: 1e15 }),
  cache_read_input_tokens: Type.Integer({ minimum: 0, maximum: 1e15 }),
  cache_creation_input_tokens: Type.Integer({ minimum: 0, maximum: 1e15 }),
});
export type Usage = Static<typeof Usage>;

/** A cost in US dollars, as the executor reported it. */
export const CostUsd = Type.Number({ minimum: 0, maximum: 1e9 });

/** A token's role (see docs/operations.md for what each may do). */
export const Roles = ['admin', 'client', 'reader', 'launcher'] as const;
export const Role = Type.Union(Roles.map((r) => Type.Literal(r)));
export type Role = (typeof Roles)[number];
/** A token's name in AUTH_TOKENS_FILE (and what `agentq token create` accepts): 1-64 characters. */
export const TOKEN_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,63}$/;
