/**
 * What never reaches the coordinator's log: credentials, under any of these keys, at the top of a
 * line's object or inside its plain objects and arrays down to `REDACT_DEPTH` levels (so
 * `launcher_token`, `answer.launcher_token` and `req.headers.authorization` alike). Fastify's
 * request serializer logs no headers, and nothing logs a credential on purpose: this is the guard
 * for the line that would.
 *
 * It is pino's `formatters.log` (a child logger's bindings are redacted by pino's own `redact`,
 * with these keys as top-level paths). Pino's `redact` with wildcard paths (`*.launcher_token`),
 * which this replaces, sent every value of every line through its redaction library: a copy and
 * a parse of each path per value, a quarter of the bytes the coordinator allocated per job in
 * the throughput benchmark (docs/benchmarks.md). Here a line is walked only where it holds plain
 * objects or arrays, and copied only where a secret is found; the caller's object is never
 * changed.
 */
export const SECRET_KEYS: ReadonlySet<string> = new Set(['authorization', 'launcher_token', 'token', 'agent_tokens']);
export const CENSOR = '[redacted]';
export const REDACT_DEPTH = 3;

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
