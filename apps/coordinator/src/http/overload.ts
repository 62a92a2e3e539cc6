import { getHeapStatistics } from 'node:v8';
import underPressure from '@fastify/under-pressure';
import type { FastifyInstance } from 'fastify';
import type { CoordinatorConfig } from '../config.js';
import { CoordinatorError } from '../core/errors.js';
import { routeOf } from './route-of.js';

/**
 * Overload protection. Under load (event-loop delay or heap above their limits, measured every
 * sample interval by `@fastify/under-pressure`) every request is answered 503 `overloaded` with a
 * Retry-After at once, before its token is checked or its body read: clients back off instead of
 * piling more work onto a coordinator that is already late. Register before the auth hooks.
 *
 * All but `GET /health`, the liveness check: a busy coordinator is alive, and an orchestrator that
 * restarted it for being busy would lose its work and make the overload worse. It answers 200 and
 * says `overloaded: true`; `GET /ready` is refused like the rest, for load balancers. Nor the
 * dashboard's own files (routes with `config.servedWhenOverloaded`, see dashboard.ts): they cost a
 * file read, and a page refused with a JSON 503 stays an error page (nothing reloads it), whereas
 * the loaded dashboard waits out the Retry-After of its API reads and event stream by itself.
 * Returns whether the protection is refusing requests now.
 */
export async function installOverloadProtection(app: FastifyInstance, config: CoordinatorConfig): Promise<() => boolean> {
  const maxHeap = config.overloadMaxHeapBytes ?? Math.floor(getHeapStatistics().heap_size_limit * 0.9);
  const retryAfter = config.overloadRetryAfterSeconds;
  // Building the app (compiling every route's schemas) blocks the event loop for a while: the
  // samples taken until two intervals after it is ready say nothing about load, so they are not
  // acted on.
  let trustFrom = Infinity;
  app.addHook('onReady', async () => {
    trustFrom = Date.now() + 2 * config.overloadSampleIntervalMs;
  });
  await app.register(underPressure, {
    maxEventLoopDelay: config.overloadMaxEventLoopDelayMs,
    maxHeapUsedBytes: maxHeap,
    sampleInterval: config.overloadSampleIntervalMs,
    retryAfter,
    // async: under-pressure passes a rejection to Fastify's error handler (the standard shape)
    pressureHandler: async (req, reply, type, value) => {
      if (Date.now() < trustFrom) return;
      const route = routeOf(req);
      if (route.url === '/health' || route.config.servedWhenOverloaded === true) return;
      reply.header('retry-after', String(retryAfter));
      req.log.warn({ type, value }, 'overloaded: request refused with 503');
      throw new CoordinatorError('overloaded', `the coordinator is overloaded (${type}); retry after ${retryAfter} s`, {
        reason: type,
        retry_after_seconds: retryAfter,
      });
    },
  });
  return () => Date.now() >= trustFrom && app.isUnderPressure();
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** not refused by the overload protection (the dashboard's static files) */
    servedWhenOverloaded?: boolean;
  }
}
