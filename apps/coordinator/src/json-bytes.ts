import { randomUUID } from 'node:crypto';
import { eachContainer } from './http/well-formed.js';

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
 * bounded (CACHE_BYTES of strings and their bytes, least recently used out). It is not keyed by
 * the strings themselves: V8 hashes a string longer than 16,383 characters by its length alone,
 * so every prompt of the same length would share one bucket of a Map, and a lookup would compare
 * them one by one. The key is a fingerprint (the length, both ends, characters sampled between);
 * a hit is confirmed by comparing the whole string, and a fingerprint holds at most BUCKET strings
 * (strings made to share one are encoded each time instead of kept), so a lookup compares at most
 * BUCKET strings.
 */

/** Strings this long (UTF-16 units) or longer are encoded once and their bytes reused. */
export const BIG_STRING = 64 * 1024;
/** What the memo of encoded large strings may hold (the strings and their bytes). */
const CACHE_BYTES = 64 * 1024 * 1024;
/** Strings kept under one fingerprint at most. */
const BUCKET = 4;
/** Characters sampled across a string for its fingerprint, and taken from each end. */
const SAMPLES = 64;
const EDGE = 128;

/** Stands in for a large string while the rest is stringified: no client string can be it (random). */
const MARK = `\u0000agentq:${randomUUID()}`;
const MARK_JSON = JSON.stringify(MARK);

interface Entry {
  s: string;
  bytes: Buffer;
}
/** fingerprint → the strings under it; Map order is use order (least recently used first) */
const memo = new Map<string, Entry[]>();
let memoBytes = 0;

const sizeOf = (e: Entry) => e.bytes.length + e.s.length;

/**
 * The length, the first and last EDGE characters and SAMPLES characters spread across the string:
 * a short key that V8 hashes whole. Strings that differ only somewhere else share it (BUCKET).
 */
function fingerprint(s: string): string {
  const step = Math.floor(s.length / SAMPLES);
  // character by character: a slice would keep the whole string alive through the key
  let key = `${s.length}:`;
  for (let i = 0; i < EDGE; i++) key += s[i];
  for (let i = 0; i < SAMPLES; i++) key += s[i * step + (i % step)];
  for (let i = s.length - EDGE; i < s.length; i++) key += s[i];
  return key;
}

/** A string's JSON bytes (quoted, escaped, UTF-8): the one rule for this thread and the JSON thread. */
export const stringBytes = (s: string): Buffer => Buffer.from(JSON.stringify(s), 'utf8');

/**
 * The JSON bytes of a large string, from the memo or made now (and kept); `given`, when the JSON
 * thread made them already (it encodes the large strings of the bodies it parses: json-thread.ts).
 */
export function remember(s: string, given?: Buffer): Buffer {
  const key = fingerprint(s);
  const bucket = memo.get(key);
  const hit = bucket?.find((e) => e.s === s);
  if (bucket) {
    // most recently used last
    memo.delete(key);
    memo.set(key, bucket);
  }
  if (hit) return hit.bytes;
  const bytes = given ?? stringBytes(s);
  const entry = { s, bytes };
  if (sizeOf(entry) > CACHE_BYTES / 4 || (bucket && bucket.length >= BUCKET)) return bytes;
  if (bucket) bucket.push(entry);
  else memo.set(key, [entry]);
  memoBytes += sizeOf(entry);
  for (const [k, entries] of memo) {
    if (memoBytes <= CACHE_BYTES || k === key) break;
    memo.delete(k);
    for (const e of entries) memoBytes -= sizeOf(e);
  }
  return bytes;
}

/** The strings of BIG_STRING or more in a parsed body (values, not keys), in a fixed order (the same for its structured clone). */
export function largeStrings(value: unknown): string[] {
  const out: string[] = [];
  if (typeof value === 'string') {
    if (value.length >= BIG_STRING) out.push(value);
    return out;
  }
  eachContainer(value, (c) => {
    for (const v of Array.isArray(c) ? c : Object.values(c)) if (typeof v === 'string' && v.length >= BIG_STRING) out.push(v);
  });
  return out;
}

/** What the memo holds (tests). */
export function memoStats(): { strings: number; bytes: number } {
  let strings = 0;
  for (const entries of memo.values()) strings += entries.length;
  return { strings, bytes: memoBytes };
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
    if (i < large.length) out.push(remember(large[i]!));
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
