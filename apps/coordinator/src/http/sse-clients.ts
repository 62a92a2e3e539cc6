import type { ServerResponse } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import { CoordinatorError } from '../core/errors.js';

export interface SseLimits {
  /** open streams (MAX_SSE_CLIENTS) */
  maxClients: number;
  /** bytes buffered for all streams together (SSE_MAX_BUFFERED_BYTES) */
  maxBufferedBytes: number;
  /** bytes one stream may leave unread */
  maxUnreadPerClient: number;
  retryAfterSeconds: number;
}

export type CutReason = 'client_unread' | 'total_buffered';

interface Client {
  readonly res: ServerResponse;
  readonly log: FastifyBaseLogger;
  readonly end: () => void;
}

/**
 * The open event streams and their memory. A client that stops reading (a sleeping laptop keeps
 * its TCP connection) makes the server buffer what it sends it; so the number of streams is
 * capped, each stream's unread bytes are capped, and so is the total across streams: past it the
 * clients with the most unread bytes (the slowest) are cut first. A cut client reconnects with
 * Last-Event-ID and gets the replay (or `stream.gap`).
 *
 * Events are serialised once for all clients (EventLog.framed): the frames a stalled client holds
 * are mostly the same Buffers every other client was sent, so the sum of unread bytes counted
 * here overstates the memory really held, never understates it.
 */
export class SseClients {
  readonly #clients = new Set<Client>();
  #checkScheduled = false;
  /** clients cut for not reading, by reason */
  readonly cut: Record<CutReason, number> = { client_unread: 0, total_buffered: 0 };
  refused = 0;

  constructor(readonly limits: SseLimits) {}

  get size(): number {
    return this.#clients.size;
  }

  /** Throw 503 `too_many_clients` when another stream would pass MAX_SSE_CLIENTS. */
  admit(): void {
    if (this.#clients.size < this.limits.maxClients) return;
    this.refused++;
    const { maxClients, retryAfterSeconds } = this.limits;
    throw new CoordinatorError(
      'too_many_clients',
      `${maxClients} event streams are open (MAX_SSE_CLIENTS); retry after ${retryAfterSeconds} s`,
      { max_sse_clients: maxClients, retry_after_seconds: retryAfterSeconds },
    );
  }

  /** Register an open stream. `end` closes it, and calls the `remove` returned here. */
  add(res: ServerResponse, log: FastifyBaseLogger, end: () => void): { send(data: string | Buffer): void; remove(): void } {
    const client: Client = { res, log, end };
    this.#clients.add(client);
    return { send: (text) => this.#send(client, text), remove: () => this.#clients.delete(client) };
  }

  /** End every stream (the server is closing). */
  endAll(): void {
    for (const c of [...this.#clients]) c.end();
  }

  #send(client: Client, data: string | Buffer): void {
    const { res } = client;
    if (res.destroyed) return;
    if (!res.write(data) && res.writableLength > this.limits.maxUnreadPerClient) {
      this.#cut(client, 'client_unread');
      return;
    }
    // the total is checked once per burst of writes (one event goes to every client in turn)
    if (!this.#checkScheduled && res.writableLength > 0) {
      this.#checkScheduled = true;
      setImmediate(() => this.#checkTotal());
    }
  }

  #checkTotal(): void {
    this.#checkScheduled = false;
    let total = 0;
    for (const c of this.#clients) total += c.res.writableLength;
    if (total <= this.limits.maxBufferedBytes) return;
    const slowest = [...this.#clients].sort((a, b) => b.res.writableLength - a.res.writableLength);
    for (const c of slowest) {
      if (total <= this.limits.maxBufferedBytes) break;
      total -= c.res.writableLength;
      this.#cut(c, 'total_buffered');
    }
  }

  #cut(client: Client, reason: CutReason): void {
    this.cut[reason]++;
    client.log.warn({ unread_bytes: client.res.writableLength, reason }, 'event stream client is not reading; disconnected');
    client.end();
    client.res.destroy(); // drop what is buffered: end() alone would keep it queued behind the client
  }
}
