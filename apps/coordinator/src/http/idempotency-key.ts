import { Type } from '@sinclair/typebox';

/**
 * `Idempotency-Key`: a create or a stop sent again with the same key answers what the first one
 * answered, and does nothing more (creates.ts, stops.ts).
 */
export const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: '^[\\x21-\\x7e]+$' })),
});
