import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyRequest, onSendHookHandler, preHandlerHookHandler } from 'fastify';
import type { CoordinatorConfig } from '../config.js';
import { clientErrorHandler } from './errors.js';
import { routeOf } from './route-of.js';

/*
 * HTTP timeouts (docs/operations.md, "Limits and timeouts"). Without them a client that sends
 * headers, then one byte, then nothing holds its connection (and its buffers) for ever.
 *
 *   HTTP_HEADERS_TIMEOUT_MS   the request line and headers must arrive within this
 *   HTTP_REQUEST_TIMEOUT_MS   a request's body must arrive within this of its headers (less
 *                             up to a tenth, spread at random: requestTimeoutMs)
 *   HTTP_IDLE_TIMEOUT_MS      a connection silent this long is closed: one that never sends a
 *                             request, or one whose request gets nothing back
 *   HTTP_KEEP_ALIVE_TIMEOUT_MS a kept-alive connection waits this long for its next request
 *
 * The first two end with 408 `request_timeout` (clientErrorHandler); they count only until the
 * request has arrived, so they never cut an answer that takes long. Requests that wait by design
 * send nothing while they wait: each gets the idle timeout on top of its own hold, which is
 * bounded and known (below). Event streams send a keepalive comment well within the idle timeout.
 */

/** Extra time past a wait's hold before its connection counts as idle. */
const WAIT_MARGIN_MS = 10_000;

type Hold = (req: FastifyRequest, config: CoordinatorConfig) => number;

/** The longest a waiting route may stay silent, by route: from the request or the config. */
const HOLDS: Readonly<Record<string, Hold>> = {
  'GET /launcher/jobs': (_req, config) => config.pollTimeoutSeconds * 1000,
  'POST /launcher/sync': (_req, config) => config.pollTimeoutSeconds * 1000,
  'GET /jobs/:job_id/wait': (req) => (req.query as { timeout_ms?: number }).timeout_ms ?? 30_000,
  'POST /jobs/wait': (req) => (req.body as { timeout_ms?: number } | undefined)?.timeout_ms ?? 30_000,
  'GET /jobs/:job_id/output': (req) => (req.query as { wait_ms?: number }).wait_ms ?? 0,
};

/** HOLDS by route pattern, then method: a request finds its hold without making a string. */
const HOLDS_BY_URL: ReadonlyMap<string, ReadonlyMap<string, Hold>> = (() => {
  const byUrl = new Map<string, Map<string, Hold>>();
  for (const [route, hold] of Object.entries(HOLDS)) {
    const [method, url] = route.split(' ') as [string, string];
    if (!byUrl.has(url)) byUrl.set(url, new Map());
    byUrl.get(url)!.set(method, hold);
  }
  return byUrl;
})();

/** The keepalive interval of event streams: well inside the idle timeout. */
export function sseKeepaliveMs(config: Pick<CoordinatorConfig, 'httpIdleTimeoutMs'>): number {
  return Math.max(10, Math.min(15_000, Math.floor(config.httpIdleTimeoutMs / 3)));
}

/**
 * A request's body must have arrived within HTTP_REQUEST_TIMEOUT_MS of its headers, less up to a
 * tenth, at random. Node checks its own request timeout for every connection at once, so two
 * thousand slow bodies sent together expired in one check and their 408s, closes and the
 * reconnections that followed held the event loop for a third of a second; spread over the last
 * tenth of the timeout they are a trickle.
 */
export function requestTimeoutMs(timeoutMs: number, random: () => number = Math.random): number {
  return Math.max(1, Math.round(timeoutMs * (1 - 0.1 * random())));
}

/** Set the server's timeouts, and give waiting requests their hold on top of the idle timeout. */
export function installTimeouts(app: FastifyInstance, config: CoordinatorConfig): void {
  const server = app.server as Server;
  server.headersTimeout = config.httpHeadersTimeoutMs;
  // Node's own request timeout is off: ours is spread (requestTimeoutMs)
  server.requestTimeout = 0;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    // a request without a body has all of it once its headers are in
    if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) return;
    const timer = setTimeout(() => {
      if (req.complete || req.socket.destroyed) return;
      // answered already (a 401 before the body came): a second answer would be unasked for
      if (res.headersSent) return void req.socket.destroy();
      clientErrorHandler(Object.assign(new Error('request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), req.socket);
    }, requestTimeoutMs(config.httpRequestTimeoutMs));
    // not on the answer: a request answered before its body came (401, 413, 503) still owes it,
    // and Node goes on reading it from the connection. Cleared once the body has all come (the
    // request's 'close', right after its 'end') or the connection is gone: the request's 'close'
    // does not say that for a request already answered (Node destroys only those it is still
    // reading for the answer), so the socket's is listened to as well.
    const socket = req.socket;
    const clear = () => {
      clearTimeout(timer);
      req.off('close', clear);
      socket.off('close', clear);
    };
    req.once('close', clear);
    socket.once('close', clear);
  });
  server.keepAliveTimeout = config.httpKeepAliveTimeoutMs;
  server.setTimeout(config.httpIdleTimeoutMs);
  // Node checks the headers timeout every connectionsCheckingInterval (30 s by default, read at
  // listen): check often enough that it holds to within a quarter of it.
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = Math.max(
    50,
    Math.min(1000, Math.floor(config.httpHeadersTimeoutMs / 4)),
  );

  // Only the routes that hold get these hooks (the others would find no hold, on every request).
  // preHandler: the query and body are validated, so a hold read from them is within its bounds
  const extended = new WeakSet<FastifyRequest>();
  const extend: preHandlerHookHandler = (req, _reply, done) => {
    const hold = holdOf(routeOf(req).url, req.method);
    const ms = hold ? hold(req, config) : 0;
    if (ms > 0) {
      req.raw.socket.setTimeout(config.httpIdleTimeoutMs + ms + WAIT_MARGIN_MS);
      extended.add(req);
    }
    done();
  };
  // the wait is over once its answer goes out: a client that does not read it (or sends nothing
  // more) has the idle timeout again, not the hold it asked for
  // (a callback hook, as it runs on every answer of these routes: no promise per request)
  const restore: onSendHookHandler = (req, _reply, payload, done) => {
    if (extended.delete(req) && !req.raw.socket.destroyed) req.raw.socket.setTimeout(config.httpIdleTimeoutMs);
    done(null, payload);
  };
  app.addHook('onRoute', (route) => {
    if (![route.method].flat().some((method) => holdOf(route.url, method))) return;
    route.preHandler = withHook(route.preHandler, extend);
    route.onSend = withHook(route.onSend, restore);
  });
}

/** The hold of a route pattern and method; HEAD runs the GET route's handler, hold included. */
function holdOf(url: string | undefined, method: string): Hold | undefined {
  return HOLDS_BY_URL.get(url ?? '')?.get(method === 'HEAD' ? 'GET' : method);
}

/** A route's hooks of one kind with `hook` added last (once: a HEAD route may come with its GET's). */
function withHook<H>(hooks: H | H[] | undefined, hook: H): H[] {
  const list = hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks];
  return list.includes(hook) ? list : [...list, hook];
}
