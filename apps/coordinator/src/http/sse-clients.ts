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
  /** frames held back for a later turn of the event loop (TURN_WRITE_BYTES), in order */
  readonly queue: (string | Buffer)[];
  queued: number;
}

/**
 * Bytes written per turn of the event loop to streams whose sockets take them at once. Such a
 * write copies the frame into the kernel, and a stream that does not read takes megabytes before
 * its socket is full (the loopback buffers grow to several MiB): 300 new streams sent one event
 * with a 1 MiB prompt each held the event loop for 0.6 s. Past this budget, frames wait for the
 * next turn, in order. A write to a stream whose socket is backed up (`writableNeedDrain`) and
 * not corked only queues in Node, and costs nothing here. Any other write is counted (`copies`):
 * Node writes it at once, or at the end of the tick (a response's first write in a tick corks its
 * socket until then, and the writes after it go out together).
 */
export const TURN_WRITE_BYTES = 4 * 1024 * 1024;

/** a frame's size for the budget (a string's length stands for its bytes) */
const sizeOf = (data: string | Buffer) => data.length;

/** Would a write to `res` now be copied into the kernel in this turn (TURN_WRITE_BYTES)? */
export const copies = (res: ServerResponse): boolean => !res.writableNeedDrain || (res.socket?.writableCorked ?? 0) > 0;

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
  /** clients with frames held back, in the order they began to wait */
  readonly #waiting = new Set<Client>();
  #turnBytes = 0;
  #turnScheduled = false;
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
    const client: Client = { res, log, end, queue: [], queued: 0 };
    this.#clients.add(client);
    const remove = () => {
      this.#clients.delete(client);
      this.#waiting.delete(client);
      client.queue.length = 0;
      client.queued = 0;
    };
    return { send: (text) => this.#send(client, text), remove };
  }

  /** End every stream (the server is closing). */
  endAll(): void {
    for (const c of [...this.#clients]) c.end();
  }

  #send(client: Client, data: string | Buffer): void {
    if (client.res.destroyed) return;
    if (client.queue.length > 0 || this.#overBudget(client, data)) {
      client.queue.push(data);
      client.queued += sizeOf(data);
      this.#waiting.add(client);
      this.#scheduleTurn();
    } else {
      this.#write(client, data);
    }
    if (this.#unread(client) > this.limits.maxUnreadPerClient) {
      this.#cut(client, 'client_unread');
      return;
    }
    // the total is checked once per burst of writes (one event goes to every client in turn)
    if (!this.#checkScheduled && this.#unread(client) > 0) {
      this.#checkScheduled = true;
      setImmediate(() => this.#checkTotal());
    }
  }

  /** A write that would copy into the kernel, past this turn's budget (one frame per turn always goes). */
  #overBudget(client: Client, data: string | Buffer): boolean {
    return copies(client.res) && this.#turnBytes > 0 && this.#turnBytes + sizeOf(data) > TURN_WRITE_BYTES;
  }

  #write(client: Client, data: string | Buffer): void {
    if (copies(client.res)) {
      this.#turnBytes += sizeOf(data);
      this.#scheduleTurn();
    }
    client.res.write(data);
  }

  /** The next turn: a fresh budget, and the frames held back written until it is spent. */
  #scheduleTurn(): void {
    if (this.#turnScheduled) return;
    this.#turnScheduled = true;
    setImmediate(() => {
      this.#turnScheduled = false;
      this.#turnBytes = 0;
      for (const client of this.#waiting) {
        while (client.queue.length > 0) {
          if (client.res.destroyed) {
            client.queue.length = 0;
            break;
          }
          if (this.#overBudget(client, client.queue[0]!)) return this.#scheduleTurn();
          const data = client.queue.shift()!;
          client.queued -= sizeOf(data);
          this.#write(client, data);
        }
        client.queued = 0;
        this.#waiting.delete(client);
      }
    });
  }

  /** What a stream has not taken yet: buffered by its socket, and held back here. */
  #unread(client: Client): number {
    return client.res.writableLength + client.queued;
  }

  #checkTotal(): void {
    this.#checkScheduled = false;
    let total = 0;
    for (const c of this.#clients) total += this.#unread(c);
    if (total <= this.limits.maxBufferedBytes) return;
    const slowest = [...this.#clients].sort((a, b) => this.#unread(b) - this.#unread(a));
    for (const c of slowest) {
      if (total <= this.limits.maxBufferedBytes) break;
      total -= this.#unread(c);
      this.#cut(c, 'total_buffered');
    }
  }

  #cut(client: Client, reason: CutReason): void {
    this.cut[reason]++;
    client.log.warn({ unread_bytes: this.#unread(client), reason }, 'event stream client is not reading; disconnected');
    client.end();
    client.res.destroy(); // drop what is buffered: end() alone would keep it queued behind the client
  }
}
