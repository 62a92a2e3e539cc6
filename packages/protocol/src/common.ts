import { Type, type Static, type TSchema } from '@sinclair/typebox';

/** A value that may be absent on the wire: always present as a key, `null` when unset. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** ISO 8601 UTC timestamp, e.g. `2025-12-10T10:00:00.000Z`. */
export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC timestamp' });

export const JobId = Type.String({ pattern: '^job_[0-9a-f]{12}$', description: '`job_` + 12 hex chars' });
export const LauncherId = Type.String({ pattern: '^lnch_[0-9a-f]{12}$', description: '`lnch_` + 12 hex chars' });

/** Path ids are not pattern-checked: an id of the wrong shape is simply unknown (404). */
export const IdParam = Type.String({ minLength: 1, maxLength: 200 });

export const Ok = Type.Object({ ok: Type.Literal(true) });
export type Ok = Static<typeof Ok>;

/** Querystring booleans arrive as text. */
export const BoolString = Type.Union([Type.Literal('true'), Type.Literal('false')]);
