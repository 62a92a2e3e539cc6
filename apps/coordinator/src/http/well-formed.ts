import { isUtf8 } from 'node:buffer';
/*
 * Request bodies hold Unicode text. JSON can spell a lone surrogate (`"\ud800"` without its pair),
 * which no UTF-8 store can hold: SQLite and PostgreSQL would give back U+FFFD in its place, so a
 * prompt read back from the database (after a restart, or from a list) would differ from the one
 * the create answered. Every string of a parsed body is made well formed at once instead (each lone
 * surrogate becomes U+FFFD), so every store keeps, and every answer shows, the same text.
 *
 * The walk is iterative and bounded in depth: JSON.parse takes any nesting a body's size allows
 * (tens of thousands of levels in 64 KiB), which a recursive walk, or the structured clone that
 * brings a parsed body back from the JSON thread, would overflow the stack on. No body of the API
 * nests deeper than a few levels.
 */

/** Deeper bodies are refused (400). */
export const MAX_BODY_DEPTH = 32;

/** A body nesting deeper than MAX_BODY_DEPTH: answered 400 bad_request. */
export class BodyTooDeep extends Error {
  readonly statusCode = 400;
  readonly code = 'AGENTQ_BODY_TOO_DEEP';
  constructor() {
    super(`body: nests deeper than ${MAX_BODY_DEPTH} levels`);
  }
}

/**
 * A body that is valid JSON but holds a `__proto__` key, or a `constructor` object with a
 * `prototype` key: refused (as secure-json-parse, Fastify's parser, does) because merging such an
 * object into another can change the prototype every object shares. No field of the API has
 * either name. Answered 400 bad_request, saying so rather than that the JSON is not valid.
 */
export class ForbiddenKey extends Error {
  readonly statusCode = 400;
  readonly code = 'AGENTQ_BODY_FORBIDDEN_KEY';
  constructor() {
    super('body: a "__proto__" key, or a "constructor" object with a "prototype" key, is not accepted (it could change the prototype of objects)');
  }
}

/**
 * Why secure-json-parse refused `text`: it is not JSON at all (InvalidJson's case), or it is, and
 * holds a forbidden key. Parsing again costs only a refused body's time, and does not depend on
 * the wording of secure-json-parse's errors.
 */
export function holdsForbiddenKey(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** A body that is not UTF-8 (JSON's only encoding here), or says it is in another charset. */
export class NotUtf8 extends Error {
  readonly statusCode: 400 | 415;
  readonly code: 'AGENTQ_BODY_NOT_UTF8' | 'AGENTQ_UNSUPPORTED_CHARSET';
  constructor(charset?: string) {
    super(
      charset === undefined
        ? 'body: is not valid UTF-8 (send JSON encoded as UTF-8)'
        : `content-type: charset ${JSON.stringify(charset)} is not supported: send JSON encoded as UTF-8`,
    );
    this.statusCode = charset === undefined ? 400 : 415;
    this.code = charset === undefined ? 'AGENTQ_BODY_NOT_UTF8' : 'AGENTQ_UNSUPPORTED_CHARSET';
  }
}

/** A body sent compressed (`Content-Encoding: gzip`, ...): answered 415 unsupported_media_type. */
export class UnsupportedEncoding extends Error {
  readonly statusCode = 415;
  readonly code = 'AGENTQ_UNSUPPORTED_ENCODING';
  constructor(encoding: string) {
    super(`content-encoding: ${JSON.stringify(encoding)} is not supported: send the body uncompressed (identity)`);
  }
}

/**
 * Refuse a body in any content-encoding but identity: the coordinator does not decompress bodies,
 * and would otherwise read gzip's bytes as JSON (a confusing 400, or worse, a body taken for what
 * it is not). A request without a body (as Fastify tells one: no transfer-encoding, no or a zero
 * content-length) may say what it likes.
 */
export function checkEncoding(headers: Record<string, string | string[] | undefined>): void {
  const encoding = headers['content-encoding'];
  if (encoding === undefined) return;
  const hasBody = headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');
  if (!hasBody) return;
  const text = [encoding].flat().join(', ');
  // a list of codings, each applied in turn: only identity (or nothing) leaves the body as it is
  if (text.split(',').every((coding) => /^\s*(identity)?\s*$/i.test(coding))) return;
  throw new UnsupportedEncoding(text);
}

/**
 * Refuse a body that a decoder would change: bytes that are not UTF-8 would become U+FFFD, and so
 * would the text of another charset (Latin-1 `é`, say), without a word to the client.
 */
export function checkUtf8(contentType: string | undefined, body: Buffer): void {
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)"?/i.exec(contentType ?? '')?.[1];
  // US-ASCII is UTF-8's first 128 characters: a body that is ASCII is UTF-8 as it stands
  if (charset !== undefined && !/^(utf-?8|us-ascii)$/i.test(charset)) throw new NotUtf8(charset);
  if (!isUtf8(body)) throw new NotUtf8();
}

type WellFormedString = string & { isWellFormed(): boolean; toWellFormed(): string };

const fix = (s: string): string => ((s as WellFormedString).isWellFormed() ? s : (s as WellFormedString).toWellFormed());

type Container = unknown[] | Record<string, unknown>;

/**
 * Visit every object and array of `value`, parents before children, each with its depth; throws
 * BodyTooDeep past MAX_BODY_DEPTH. The order is the same for a value and its structured clone.
 */
export function eachContainer(value: unknown, visit: (c: Container) => void): void {
  if (value === null || typeof value !== 'object') return;
  const stack: [Container, number][] = [[value as Container, 1]];
  while (stack.length > 0) {
    const [c, depth] = stack.pop()!;
    if (depth > MAX_BODY_DEPTH) throw new BodyTooDeep();
    visit(c);
    const children = Array.isArray(c) ? c : Object.values(c);
    // pushed in reverse, so that they are visited in order
    for (let i = children.length - 1; i >= 0; i--) {
      const v = children[i];
      if (v !== null && typeof v === 'object') stack.push([v as Container, depth + 1]);
    }
  }
}

/** `value` with every string (keys too) well formed; objects are changed in place. */
export function wellFormed(value: unknown): unknown {
  if (typeof value === 'string') return fix(value);
  eachContainer(value, (c) => {
    if (Array.isArray(c)) {
      for (let i = 0; i < c.length; i++) if (typeof c[i] === 'string') c[i] = fix(c[i] as string);
      return;
    }
    for (const key of Object.keys(c)) {
      const v = c[key];
      const fixedKey = fix(key);
      const fixed = typeof v === 'string' ? fix(v) : v;
      if (fixedKey !== key) {
        delete c[key];
        c[fixedKey] = fixed;
      } else if (fixed !== v) c[key] = fixed;
    }
  });
  return value;
}
