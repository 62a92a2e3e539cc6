import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { CoordinatorError } from '../core/errors.js';
import { routeOf } from './route-of.js';

export interface ConnectionLimits {
  /** connections served normally (MAX_CONNECTIONS) */
  max: number;
  /** connections beyond `max` kept for reserved routes (CONNECTION_RESERVE) */
  reserve: number;
  /** connections per client address; 0 = no limit (MAX_CONNECTIONS_PER_ADDRESS) */
  perAddress: number;
  retryAfterSeconds: number;
}

/** What operators and launchers need while the coordinator is flooded with connections. */
const RESERVED = (url: string) => url === '/health' || url === '/ready' || url === '/metrics' || url.startsWith('/launcher/');

interface Conn {
  readonly socket: Socket;
  readonly address: string;
  /** requests on it not yet answered */
  inflight: number;
  /** accepted past `max`: it may call the reserved routes only */
  readonly reservedOnly: boolean;
}

/**
 * Connection limits (docs/operations.md, "Limits and timeouts"). Every connection costs a file
 * descriptor: thousands of idle ones would exhaust them, and then nothing gets in, not even
 * `/health`. So:
 *
 * - up to `max` connections are served normally;
 * - the next `reserve` are accepted, but serve only `/health`, `/metrics` and the launcher routes
 *   (anything else is 503 `too_many_clients`, and the connection is closed);
 * - past `max + reserve`, a new connection takes the place of the oldest idle one (no request in
 *   flight: never sent one, or kept alive between requests), so a flood of idle connections
 *   cannot lock health checks out; with none idle, the new one is refused;
 * - with `perAddress`, one address cannot hold more than that many.
 *
 * Connections are counted at TCP level (before TLS), keyed by their remote address and port.
 */
export class ConnectionGuard {
  readonly #conns = new Map<string, Conn>();
  readonly #perAddress = new Map<string, number>();
  /** connections refused (closed at once) and evicted (idle ones closed to make room) */
  refused = 0;
  evicted = 0;
  /** requests refused on reserved-only connections */
  requestsRefused = 0;
  /** reserved-only connections open: while there is none, no request is refused (refuses) */
  #reservedOpen = 0;
  /**
   * Each request's connection by the socket it came on, found by address and port on its first
   * request (a TLS socket is not the TCP socket the connection was counted by): the next requests
   * of a kept-alive connection make no key.
   */
  readonly #bySocket = new WeakMap<Socket, Conn>();

  constructor(
    readonly limits: ConnectionLimits,
    private readonly log: Logger,
  ) {}

  get open(): number {
    return this.#conns.size;
  }

  /** Count connections on `server` and refuse what is over the limits (call before listen). */
  attach(server: Server): void {
    server.on('connection', (socket: Socket) => this.#accept(socket));
    // a request (TLS: on the TLS socket; same remote address and port) keeps its connection busy
    server.on('request', (req: { socket: Socket }, res: { once(e: 'close', f: () => void): void }) => {
      const conn = this.#connOf(req.socket);
      if (!conn) return;
      conn.inflight++;
      res.once('close', () => conn.inflight--);
    });
  }

  /** Whether the request's connection may call only the reserved routes, and `url` is not one. */
  refuses(socket: Socket, url: string): boolean {
    if (this.#reservedOpen === 0) return false;
    const conn = this.#connOf(socket);
    return conn !== undefined && conn.reservedOnly && !RESERVED(url);
  }

  #connOf(socket: Socket): Conn | undefined {
    let conn = this.#bySocket.get(socket);
    if (conn === undefined) {
      conn = this.#conns.get(keyOf(socket));
      if (conn !== undefined) this.#bySocket.set(socket, conn);
    }
    return conn;
  }

  #accept(socket: Socket): void {
    const key = keyOf(socket);
    const address = socket.remoteAddress ?? '';
    const { max, reserve, perAddress } = this.limits;
    if (perAddress > 0 && (this.#perAddress.get(address) ?? 0) >= perAddress) {
      return this.#refuse(socket, `more than ${perAddress} connections from ${address}`);
    }
    if (this.#conns.size >= max + reserve && !this.#evictIdle()) {
      return this.#refuse(socket, `${this.#conns.size} connections open, none idle`);
    }
    const conn: Conn = { socket, address, inflight: 0, reservedOnly: this.#conns.size >= max };
    this.#conns.set(key, conn);
    this.#perAddress.set(address, (this.#perAddress.get(address) ?? 0) + 1);
    if (conn.reservedOnly) this.#reservedOpen++;
    socket.once('close', () => {
      if (conn.reservedOnly) this.#reservedOpen--;
      if (this.#conns.get(key) === conn) this.#conns.delete(key);
      const n = (this.#perAddress.get(address) ?? 1) - 1;
      if (n > 0) this.#perAddress.set(address, n);
      else this.#perAddress.delete(address);
    });
  }

  /** Close the oldest connection with no request in flight; false when there is none. */
  #evictIdle(): boolean {
    for (const [key, conn] of this.#conns) {
      if (conn.inflight > 0) continue;
      this.#conns.delete(key); // at once: its close event comes later
      conn.socket.destroy();
      this.evicted++;
      return true;
    }
    return false;
  }

  #refuse(socket: Socket, why: string): void {
    if (this.refused++ % 1000 === 0) this.log.warn({ refused: this.refused, why }, 'connection refused (connection limit)');
    socket.destroy();
  }
}

/** 503 `too_many_clients` for requests a reserved-only connection may not make (an onRequest hook). */
export function installConnectionGuard(app: FastifyInstance, guard: ConnectionGuard): void {
  guard.attach(app.server as Server);
  app.addHook('onRequest', (req, reply, done) => {
    if (!guard.refuses(req.raw.socket, routeOf(req).url ?? req.url)) return done();
    guard.requestsRefused++;
    // the client comes back on a new connection, which may be a normal one by then
    reply.header('connection', 'close');
    throw new CoordinatorError(
      'too_many_clients',
      `the coordinator has more than ${guard.limits.max} connections open; retry after ${guard.limits.retryAfterSeconds} s`,
      { max_connections: guard.limits.max, retry_after_seconds: guard.limits.retryAfterSeconds },
    );
  });
}

function keyOf(socket: Socket): string {
  return `${socket.remoteAddress ?? ''}|${socket.remotePort ?? ''}`;
}
