import { parentPort } from 'node:worker_threads';
import secureJson from 'secure-json-parse';
import type { ParseRequest, ParseResult } from './json-thread.js';
import { wellFormed } from './well-formed.js';

/*
 * The JSON thread (json-thread.ts): decodes and parses large request bodies, with the same
 * protection against `__proto__` and `constructor.prototype` keys as Fastify's own parser. The
 * parsed value goes back as a structured clone, which the coordinator's thread reads at the cost of
 * a copy.
 */

const port = parentPort!;
port.on('message', ({ id, body }: ParseRequest) => {
  let result: ParseResult;
  try {
    const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
    result = { id, ok: true, value: wellFormed(secureJson.parse(text, null, { protoAction: 'error', constructorAction: 'error' })) };
  } catch {
    result = { id, ok: false };
  }
  port.postMessage(result);
});
