import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';

/**
 * A transport that knows which requests it has not answered yet, around the SDK's stdio one.
 *
 * Stdin's end is the client's last word, not a request to drop what it asked: a script that pipes
 * its calls in (`printf ... | agentq mcp`) closes stdin as soon as they are written. Stdout stays
 * open, so the calls still in flight can be answered; only then may the server close. The SDK's
 * server cannot say what it has in flight (and its `close()` aborts every handler and drops their
 * answers), so this counts them where every message passes: a request in, its response out.
 */
export class AnsweringTransport implements Transport {
  readonly #inner: Transport;
  /** requests taken and not answered yet (JSON-RPC ids; a client never reuses one in flight) */
  readonly #unanswered = new Set<RequestId>();
  #whenAnswered: Array<() => void> = [];

  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport['onmessage'];

  constructor(inner: Transport) {
    this.#inner = inner;
  }

  start(): Promise<void> {
    this.#inner.onclose = () => this.onclose?.();
    this.#inner.onerror = (error) => this.onerror?.(error);
    this.#inner.onmessage = (message, extra) => {
      if ('method' in message && 'id' in message) this.#unanswered.add(message.id);
      this.onmessage?.(message, extra);
      // a request the client cancelled gets no answer at all (the SDK drops it)
      if ('method' in message && message.method === 'notifications/cancelled') {
        const id = (message.params as { requestId?: RequestId } | undefined)?.requestId;
        if (id !== undefined && this.#unanswered.has(id)) this.#answered(id);
      }
    };
    return this.#inner.start();
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    try {
      await this.#inner.send(message, options);
    } finally {
      // a response (result or error) answers its request once it is written
      if (!('method' in message) && 'id' in message && message.id !== undefined) this.#answered(message.id);
    }
  }

  close(): Promise<void> {
    return this.#inner.close();
  }

  /** Resolves once every request taken so far has its response written (at once if none is in flight). */
  answered(): Promise<void> {
    if (this.#unanswered.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#whenAnswered.push(resolve));
  }

  #answered(id: RequestId): void {
    this.#unanswered.delete(id);
    if (this.#unanswered.size > 0) return;
    const waiting = this.#whenAnswered;
    this.#whenAnswered = [];
    for (const resolve of waiting) resolve();
  }
}
