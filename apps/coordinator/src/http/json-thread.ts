import { Worker } from 'node:worker_threads';
import { largeStrings, remember } from '../json-bytes.js';
import { BodyTooWide } from './body-shape.js';
import { BodyTooDeep, ForbiddenKey } from './well-formed.js';

export interface ParseRequest {
  id: number;
  body: Uint8Array;
}

/** `encoded`: the JSON bytes of the value's large strings, in `largeStrings` order (json-bytes.ts) */
export type ParseResult =
  | { id: number; ok: true; value: unknown; encoded: Uint8Array[] }
  /** `refused`: why: not JSON, or JSON refused for its shape (body-shape.ts) or a forbidden key */
  | { id: number; ok: false; refused: 'invalid' | 'too_deep' | 'wide_object' | 'wide_array' | 'forbidden_key' };

/**
 * A thread that parses large JSON bodies (json-parse-worker.ts). Decoding and parsing a prompt of a
 * megabyte takes milliseconds; here it runs beside the event loop instead of on it, and the
 * coordinator's thread only copies the body out and the parsed value in. Started on first use; `parse` rejects with
 * `InvalidJson` when the body is not JSON, `ForbiddenKey`, `BodyTooDeep` or `BodyTooWide` when it
 * is but is refused (body-shape.ts), and with any other error when the thread is gone (the caller
 * then parses on its own thread).
 */
export class JsonThread {
  #thread: Thread | undefined;
  #nextId = 1;
  #closed = false;

  parse(body: Buffer): Promise<unknown> {
    if (this.#closed) return Promise.reject(new Error('the JSON thread is closed'));
    const { worker, pending } = (this.#thread ??= this.#start());
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      if (pending.size === 1) worker.ref();
      // copied, not transferred (a memcpy): the caller keeps the body if the thread fails
      worker.postMessage({ id, body } satisfies ParseRequest);
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    const thread = this.#thread;
    this.#thread = undefined;
    if (thread) await thread.worker.terminate();
  }

  /** A worker and the requests it has; a worker that fails fails only its own requests. */
  #start(): Thread {
    const worker = new Worker(new URL('./json-parse-worker.js', import.meta.url));
    const thread: Thread = { worker, pending: new Map() };
    const { pending } = thread;
    worker.unref();
    worker.on('message', (r: ParseResult) => {
      const p = pending.get(r.id);
      if (!p) return;
      pending.delete(r.id);
      if (pending.size === 0) worker.unref();
      if (!r.ok) {
        const refusals = {
          invalid: () => new InvalidJson(),
          too_deep: () => new BodyTooDeep(),
          wide_object: () => new BodyTooWide('object'),
          wide_array: () => new BodyTooWide('array'),
          forbidden_key: () => new ForbiddenKey(),
        } as const;
        return p.reject(refusals[r.refused]());
      }
      try {
        const strings = largeStrings(r.value);
        if (strings.length === r.encoded.length) {
          strings.forEach((s, i) => remember(s, Buffer.from(r.encoded[i]!.buffer, r.encoded[i]!.byteOffset, r.encoded[i]!.byteLength)));
        }
      } catch {
        // the memo is only a cache: the answer encodes the strings itself
      }
      p.resolve(r.value);
    });
    // a message that could not be read back here (the thread checks nesting, so it should not
    // happen): which request it answered is unknown, so the thread's requests are parsed here instead
    worker.on('messageerror', (err) => fail(err));
    const fail = (err: Error) => {
      if (this.#thread === thread) this.#thread = undefined; // the next body starts a new one
      for (const p of pending.values()) p.reject(err);
      pending.clear();
      worker.unref();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the JSON thread exited (${code})`)));
    return thread;
  }
}

interface Thread {
  worker: Worker;
  pending: Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void }>;
}

/** The body is not valid JSON. */
export class InvalidJson extends Error {
  constructor() {
    super('invalid JSON body');
  }
}
