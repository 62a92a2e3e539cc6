import type { IncomingMessage, Server, ServerOptions, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { CoordinatorError } from '../core/errors.js';

/*
 * Two requests Node's HTTP server answers itself, with an empty body and before Fastify sees
 * them: an HTTP/1.1 request without `Host` (400) and one whose `Expect` is not 100-continue
 * (417). Clients branch on the error code, so both come here instead and leave through the one
 * error handler, in the standard shape (and in the request log and metrics, like any other).
 * A request without `Host` that sends `Expect: 100-continue` is not asked for its body: it gets
 * the 400 alone, as Node's own refusal did, not a 100 Continue first.
 */

/** Options of Node's server (given to Fastify as `http`, or with the `https` options). */
export const NODE_SERVER_OPTIONS = {
  // answered 400 by the hook below, in the standard shape (requireHostHeader: Node 20.0+)
  requireHostHeader: false,
} as const satisfies ServerOptions;

/** Requests whose `Expect` Node could not meet: handed to Fastify only to be refused. */
const unmetExpectations = new WeakSet<IncomingMessage>();

export function installHeaderRefusals(app: FastifyInstance): void {
  const server = app.server as Server;
  // Node answers 417 with no body unless the server listens for this; with a listener it is
  // up to us: the request goes to Fastify (and the other 'request' listeners: body timeout,
  // connection guard) as any other, and the hook refuses it
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    unmetExpectations.add(req);
    server.emit('request', req, res);
  });
  // Node sends 100 Continue itself unless the server listens for this: then it is up to us, and
  // a request the hook below refuses for its Host is answered without inviting its body
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (!missesHost(req)) res.writeContinue();
    server.emit('request', req, res);
  });
  app.addHook('onRequest', (req, reply, done) => {
    const raw = req.raw;
    if (missesHost(raw)) {
      // as Node did: a client that omits Host is not one to keep talking to on this connection
      reply.header('connection', 'close');
      return done(
        new CoordinatorError('bad_request', 'host: is missing (an HTTP/1.1 request must send a Host header)', {
          field: 'host',
          in: 'headers',
        }),
      );
    }
    if (unmetExpectations.has(raw)) {
      return done(
        new CoordinatorError('expectation_failed', `expect: ${JSON.stringify(raw.headers.expect)} cannot be met; only 100-continue is supported`, {
          field: 'expect',
          in: 'headers',
        }),
      );
    }
    done();
  });
}

/** An HTTP/1.1 request without `Host`, as Node checks it: HTTP/1.0 has no Host requirement (RFC 9112, 3.2). */
function missesHost(req: IncomingMessage): boolean {
  return req.httpVersionMajor === 1 && req.httpVersionMinor === 1 && req.headers.host === undefined;
}
