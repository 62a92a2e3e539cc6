import { randomUUID } from 'node:crypto';

/*
 * JSON as bytes, with large strings encoded once.
 *
 * A job's prompt (up to MAX_PROMPT_BYTES) goes out many times: in the answer to its create, in
 * its hand-out to a launcher, in every event about it to event streams that ask for prompts
 * (`job.created`, `job.claimed`, `job.started`, `job.completed`), in reads and waits; its result
 * too. Each time, JSON.stringify escaped it and the answer encoded it to UTF-8: two passes over a
 * megabyte, milliseconds of the only event loop, again and again for the same string. Here a
 * string of BIG_STRING characters or more is encoded once (quoted, escaped, UTF-8) and its bytes
 * are put in place of it in every later answer and event frame.
 *
 * The memo is shared by the process (it is a cache of a pure function: a string's JSON bytes) and
 * bounded (CACHE_BYTES, least recently used out); it holds the strings it has bytes for.
 */

/** Strings this long (UTF-16 units) or longer are encoded once and their bytes reused. */
export const BIG_STRING = 64 * 1024;
/** What the memo of encoded large strings may hold. */
const CACHE_BYTES = 64 * 1024 * 1024;

/** Stands in for a large string while the rest is stringified: no client string can be it (random). */
const MARK = `\u0000agentq:${randomUUID()}`;
const MARK_JSON = JSON.stringify(MARK);

const memo = new Map<string, Buffer>();
let memoBytes = 0;

/** The JSON bytes of a large string, from the memo or made now (and kept). */
function encoded(s: string): Buffer {
  let bytes = memo.get(s);
  if (bytes) {
    // most recently used last
    memo.delete(s);
    memo.set(s, bytes);
    return bytes;
  }
  bytes = Buffer.from(JSON.stringify(s), 'utf8');
  memo.set(s, bytes);
  memoBytes += bytes.length;
  for (const [k, v] of memo) {
    if (memoBytes <= CACHE_BYTES || k === s) break;
    memo.delete(k);
    memoBytes -= v.length;
  }
  return bytes;
}

/** `JSON.stringify(data)` as UTF-8 bytes; large strings in it come from the memo. */
export function jsonBytes(data: unknown): Buffer {
  if (!mayHoldLarge(data)) return Buffer.from(JSON.stringify(data), 'utf8');
  const large: string[] = [];
  const text = JSON.stringify(data, (_key, value: unknown) => {
    if (typeof value !== 'string' || value.length < BIG_STRING) return value;
    large.push(value);
    return MARK;
  });
  if (large.length === 0) return Buffer.from(text, 'utf8');
  const parts = text.split(MARK_JSON);
  const out: Buffer[] = [];
  for (let i = 0; i < parts.length; i++) {
    out.push(Buffer.from(parts[i]!, 'utf8'));
    if (i < large.length) out.push(encoded(large[i]!));
  }
  return Buffer.concat(out);
}

/** Fields of the wire objects that may hold a large string. */
const LARGE_FIELDS = ['prompt', 'result', 'error', 'last_result', 'last_error', 'data'] as const;

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object';

function holdsLarge(o: Record<string, unknown>): boolean {
  for (const f of LARGE_FIELDS) {
    const v = o[f];
    if (typeof v === 'string' && v.length >= BIG_STRING) return true;
  }
  return false;
}

/**
 * A cheap look at the shapes that carry large strings (a job, a session, a list of jobs, an
 * event), so that the common small answer is plain JSON.stringify. A large string it misses is
 * still serialised right, only not from the memo.
 */
function mayHoldLarge(d: unknown): boolean {
  if (typeof d === 'string') return d.length >= BIG_STRING;
  if (!isObject(d)) return false;
  // events made lazily from rows know the size of their large strings (lazy-events.ts)
  if (typeof d.heldBytes === 'number') return d.heldBytes >= BIG_STRING;
  if (holdsLarge(d)) return true;
  if (isObject(d.job) && holdsLarge(d.job)) return true;
  if (isObject(d.session) && holdsLarge(d.session)) return true;
  if (Array.isArray(d.jobs)) for (const j of d.jobs) if (isObject(j) && holdsLarge(j)) return true;
  return false;
}
