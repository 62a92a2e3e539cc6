import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { CoordinatorMetrics } from '../metrics/metrics.js';

/** Routes whose duration is a connection's lifetime, not a request's: kept out of the histogram. */
const STREAMS = new Set(['/events']);

/**
 * Time every request by its route pattern (`/jobs/:job_id`, or `unmatched` for a 404 that
 * matched no route). Installed on the root instance before the routes, so it sees them all.
 */
export function installRequestMetrics(app: FastifyInstance, metrics: CoordinatorMetrics): void {
  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    if (STREAMS.has(route)) return;
    metrics.observeRequest(req.method, route, reply.statusCode, reply.elapsedTime / 1000);
  });
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
