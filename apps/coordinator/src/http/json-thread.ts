import { Worker } from 'node:worker_threads';

export interface ParseRequest {
  id: number;
  body: Uint8Array;
}

export type ParseResult = { id: number; ok: true; value: unknown } | { id: number; ok: false };

/**
 * A thread that parses large JSON bodies (json-parse-worker.ts). Decoding and parsing a prompt of a
 * megabyte takes milliseconds; here it runs beside the event loop instead of on it, and the
 * coordinator's thread only copies the body out and the parsed value in. Started on first use; `parse` rejects with
 * `InvalidJson` when the body is not JSON (or holds a forbidden key), and with any other error
 * when the thread is gone (the caller then parses on its own thread).
 */
export class JsonThread {
  #worker: Worker | undefined;
  #nextId = 1;
  readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void }>();
  #closed = false;

  parse(body: Buffer): Promise<unknown> {
    if (this.#closed) return Promise.reject(new Error('the JSON thread is closed'));
    const worker = (this.#worker ??= this.#start());
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      if (this.#pending.size === 1) worker.ref();
      // copied, not transferred (a memcpy): the caller keeps the body if the thread fails
      worker.postMessage({ id, body } satisfies ParseRequest);
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    const worker = this.#worker;
    this.#worker = undefined;
    if (worker) await worker.terminate();
  }

  #start(): Worker {
    const worker = new Worker(new URL('./json-parse-worker.js', import.meta.url));
    worker.unref();
    worker.on('message', (r: ParseResult) => {
      const p = this.#pending.get(r.id);
      if (!p) return;
      this.#pending.delete(r.id);
      if (this.#pending.size === 0) worker.unref();
      if (r.ok) p.resolve(r.value);
      else p.reject(new InvalidJson());
    });
    const fail = (err: Error) => {
      if (this.#worker === worker) this.#worker = undefined; // the next body starts a new one
      for (const p of this.#pending.values()) p.reject(err);
      this.#pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the JSON thread exited (${code})`)));
    return worker;
  }
}

/** The body is not valid JSON, or holds a forbidden key. */
export class InvalidJson extends Error {
  constructor() {
    super('invalid JSON body');
  }
}
