import { BodyTooDeep, MAX_BODY_DEPTH } from './well-formed.js';

/*
 * A look at a JSON body's shape before it is parsed. What a body costs to parse, make well formed
 * and validate grows with the values it holds, not with its bytes: 60 KiB written as one object of
 * 6,000 keys (`{"k0":1,"k1":1,...}`) took 25 ms of the event loop (V8 keeps such an object as a
 * dictionary; the walk, the schema's error for the unknown keys and the garbage all scale with it),
 * a prompt of 60 KiB a fraction of a millisecond; a client with a token could stall every request,
 * `/health` included, for seconds with a few hundred of them. No body of the API has an object
 * with more than a few dozen members (a job's labels: 32), or an array longer than a heartbeat's
 * `running_jobs` (10,000), or nests deeper than a few levels, so a body past any of those is
 * refused here, from its bytes, at the cost of one pass over them and before anything is built.
 *
 * The scan only refuses; it never accepts: a body it lets through is parsed (and refused, if it is
 * not JSON) as before, so a body it misreads because it is not JSON at all is still refused.
 */

/** Members an object of a request body may have. */
export const MAX_OBJECT_MEMBERS = 64;
/** Items an array of a request body may have (a heartbeat's `running_jobs`: 10,000). */
export const MAX_ARRAY_ITEMS = 10_000;

/** A body with an object or an array larger than any request of the API has: answered 400 bad_request. */
export class BodyTooWide extends Error {
  readonly statusCode = 400;
  readonly code = 'AGENTQ_BODY_TOO_WIDE';
  constructor(readonly what: 'object' | 'array') {
    super(
      what === 'object'
        ? `body: an object has more than ${MAX_OBJECT_MEMBERS} members`
        : `body: an array has more than ${MAX_ARRAY_ITEMS} items`,
    );
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

/**
 * Throw BodyTooDeep or BodyTooWide if the JSON text in `body` nests deeper than MAX_BODY_DEPTH or
 * has an object or array larger than the API allows. Commas are counted per container (outside
 * strings): a container of n members has n - 1 of them.
 */
export function checkBodyShape(body: Uint8Array): void {
  // commas seen in each open container, and whether it is an object
  const commas = new Int32Array(MAX_BODY_DEPTH + 1);
  const isObject = new Uint8Array(MAX_BODY_DEPTH + 1);
  let depth = 0;
  for (let i = 0; i < body.length; i++) {
    const b = body[i]!;
    switch (b) {
      case QUOTE:
        i = stringEnd(body, i);
        break;
      case OPEN_OBJECT:
      case OPEN_ARRAY:
        if (++depth > MAX_BODY_DEPTH) throw new BodyTooDeep();
        commas[depth] = 0;
        isObject[depth] = b === OPEN_OBJECT ? 1 : 0;
        break;
      case CLOSE_OBJECT:
      case CLOSE_ARRAY:
        // not JSON (more closed than opened): the parser says so
        if (depth === 0) return;
        depth--;
        break;
      case COMMA:
        if (depth === 0) return;
        if (++commas[depth]! >= (isObject[depth] ? MAX_OBJECT_MEMBERS : MAX_ARRAY_ITEMS)) {
          throw new BodyTooWide(isObject[depth] ? 'object' : 'array');
        }
        break;
    }
  }
}

/**
 * Where the string opened by the quote at `start` ends (its closing quote; the body's end if it
 * has none). A prompt is most of a body: its quotes are found by the native indexOf, and only
 * the backslashes just before one are looked at (an odd number escapes it).
 */
function stringEnd(body: Uint8Array, start: number): number {
  for (let at = start + 1; ; at++) {
    const quote = body.indexOf(QUOTE, at);
    if (quote < 0) return body.length;
    let backslashes = 0;
    while (body[quote - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote;
    at = quote;
  }
}
