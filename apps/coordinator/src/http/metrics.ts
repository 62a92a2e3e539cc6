import { Type } from '@sinclair/typebox';
import type { FastifyError, FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { CoordinatorMetrics } from '../metrics/metrics.js';
import { routeOf } from './route-of.js';

/** Routes whose duration is a connection's lifetime, not a request's: kept out of the histogram. */
const STREAMS = new Set(['/events']);
/** The `route` of a request that matched no route pattern. */
const UNMATCHED = 'unmatched';

/**
 * Time every request by its route pattern (`/jobs/:job_id`, or `unmatched` for a 404 that
 * matched no route). Installed on the root instance before the routes, so it sees them all; the
 * URLs the router refuses never reach it (timedFrameworkErrors).
 */
export function installRequestMetrics(app: FastifyInstance, metrics: CoordinatorMetrics): void {
  app.addHook('onResponse', (req, reply, done) => {
    const route = routeOf(req).url ?? UNMATCHED;
    if (!STREAMS.has(route)) metrics.observeRequest(req.method, route, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
}

type FrameworkErrors = (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => void;

/**
 * Fastify's `frameworkErrors` handler, timed: what its router refuses before any route is matched
 * (a path with a broken percent-encoding, a path segment too long) is answered there, and Fastify
 * runs no request hook for it (no onResponse; no start time either, so `reply.elapsedTime` is
 * NaN). Timed from the router's refusal to the answer's last byte, as `unmatched`.
 */
export function timedFrameworkErrors(metrics: CoordinatorMetrics, answer: FrameworkErrors): FrameworkErrors {
  return (err, req, reply) => {
    const started = performance.now();
    reply.raw.once('finish', () =>
      metrics.observeRequest(req.method, UNMATCHED, reply.statusCode, (performance.now() - started) / 1000),
    );
    answer(err, req, reply);
  };
}

/** `GET /metrics`: the Prometheus text exposition format. */
export const metricsRoutes: FastifyPluginAsync<{ metrics: CoordinatorMetrics }> = async (app, { metrics }) => {
  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'getMetrics',
        tags: ['operations'],
        summary: 'Prometheus metrics',
        description: 'The Prometheus text exposition format. See docs/operations.md for the list of metrics.',
        response: { 200: { description: 'Metrics', content: { 'text/plain': { schema: Type.String() } } } },
      },
    },
    async (_req, reply) => reply.type(metrics.contentType).send(await metrics.exposition()),
  );
};
