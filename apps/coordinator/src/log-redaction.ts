/**
 * What never reaches the coordinator's log: credentials, under any of these keys. Fastify's
 * request serializer logs no headers, and nothing logs a credential on purpose: this is the guard
 * for the line that would. Two parts:
 *
 * - `redactSecrets` (pino's `formatters.log`) censors them at the top of a line's object and
 *   inside its plain objects and arrays down to `REDACT_DEPTH` levels (`answer.launcher_token`,
 *   `{ req: { headers: { authorization } } }` as plain data). The caller's object is never
 *   changed: what holds a secret is copied. It runs before pino's serializers, so class
 *   instances (an error, a request) are left to them.
 * - pino's own `redact` (`PINO_REDACT_PATHS`) censors them after serialization at the top level
 *   (which covers a child logger's bindings), in an error under `err` (the serializer copies its
 *   own properties) and in the headers of a request under `req` (a raw request logged as the
 *   line's object is serialized there, headers and all).
 *
 * Not covered: secrets nested in a child logger's bindings or in an object interpolated into the
 * message (`%j`, `%o`); nothing in the coordinator logs either.
 *
 * Pino's `redact` with wildcard paths (`*.launcher_token`), which this replaces, sent every value
 * of every line through its redaction library (a copy and a parse of each path per value): a
 * fifth of the bytes the coordinator allocated per job in the throughput benchmark
 * (docs/benchmarks.md). Paths without a wildcard cost only on lines that have their first key.
 */
export const SECRET_KEYS: ReadonlySet<string> = new Set(['authorization', 'launcher_token', 'token', 'agent_tokens']);
export const CENSOR = '[redacted]';
export const REDACT_DEPTH = 3;

export const PINO_REDACT_PATHS: readonly string[] = [
  ...SECRET_KEYS,
  'req.headers.authorization',
  ...[...SECRET_KEYS].map((key) => `err.${key}`),
];

/** `value` with every secret inside it censored: the same object when it holds none. */
export function redactSecrets<T>(value: T, depth = REDACT_DEPTH): T {
  if (depth <= 0 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const clean = redactSecrets(value[i] as unknown, depth - 1);
      if (clean === value[i]) continue;
      copy ??= [...value];
      copy[i] = clean;
    }
    return (copy ?? value) as T;
  }
  // class instances (a request, an error, a buffer) are left to their serializers
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  const record = value as Record<string, unknown>;
  let copy: Record<string, unknown> | undefined;
  for (const key in record) {
    if (!Object.prototype.hasOwnProperty.call(record, key)) continue;
    const v = record[key];
    const clean = SECRET_KEYS.has(key) && v !== undefined ? CENSOR : redactSecrets(v, depth - 1);
    if (clean === v) continue;
    copy ??= { ...record };
    copy[key] = clean;
  }
  return (copy ?? value) as T;
}
