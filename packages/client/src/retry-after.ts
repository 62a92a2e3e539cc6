/*
 * No imports: the dashboard's browser bundle uses this too (`@agentq/client/retry-after`).
 */

/** Retry-After: delay-seconds or an HTTP date (RFC 9110 10.2.3), in milliseconds from now. */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (value === undefined || value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // a date names its day or month: without a letter it is no HTTP date, but Date.parse would
  // still read '1.5' or '-1' as one in 2001 (a wait of 0: sent again at once)
  if (!/[a-z]/i.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
