import { parentPort } from 'node:worker_threads';
import secureJson from 'secure-json-parse';
import type { ParseRequest, ParseResult } from './json-thread.js';
import { BodyTooWide, checkBodyShape } from './body-shape.js';
import { BodyTooDeep, holdsForbiddenKey, wellFormed } from './well-formed.js';
import { largeStrings, stringBytes } from '../json-bytes.js';

/*
 * The JSON thread (json-thread.ts): decodes and parses large request bodies, with the same
 * protection against `__proto__` and `constructor.prototype` keys as Fastify's own parser. The
 * parsed value goes back as a structured clone, which the coordinator's thread reads at the cost of
 * a copy, with the JSON bytes of its large strings (moved, not copied), which answers and event
 * frames reuse (json-bytes.ts).
 */

const port = parentPort!;
port.on('message', ({ id, body }: ParseRequest) => {
  let result: ParseResult;
  const transfer: ArrayBuffer[] = [];
  let text = '';
  try {
    // refused from its bytes before anything is built: a parsed body of 100,000 keys would be
    // walked here, then cloned to the coordinator's thread and read there at its own cost
    checkBodyShape(body);
    text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
    const value = wellFormed(secureJson.parse(text, null, { protoAction: 'error', constructorAction: 'error' }));
    // the large strings' JSON bytes too, made here rather than on the coordinator's thread
    const encoded = largeStrings(value).map((s) => {
      const bytes = stringBytes(s);
      if (bytes.byteOffset === 0 && bytes.buffer.byteLength === bytes.length) transfer.push(bytes.buffer as ArrayBuffer);
      return bytes;
    });
    result = { id, ok: true, value, encoded };
  } catch (err) {
    const refused =
      err instanceof BodyTooWide
        ? err.what === 'object' ? 'wide_object' : 'wide_array'
        : err instanceof BodyTooDeep
          ? 'too_deep'
          : holdsForbiddenKey(text)
            ? 'forbidden_key'
            : 'invalid';
    result = { id, ok: false, refused };
  }
  port.postMessage(result, transfer);
});
