import type { FastifyInstance, FastifyRequest } from 'fastify';

type RouteOptions = FastifyRequest['routeOptions'];

/*
 * Fastify's `request.routeOptions` is a getter that builds a new object at every read (a dozen
 * fields, and a look at the router's constraint strategies); the coordinator's hooks, its metrics
 * and its request log read it about nine times per request. routeOf reads it once per request and
 * keeps it on the request. What it answers is what the getter answers at that moment: a request
 * that moves to the 404 handler (`reply.callNotFound()`, as @fastify/static does for a file it does
 * not have) gets the 404 handler's options from then on, as the getter does (`request.is404` says
 * so without building anything).
 */

/** Give requests the slot routeOf keeps their route options in (before any hook that reads them). */
export function installRouteOf(app: FastifyInstance): void {
  // a primitive default (Fastify refuses shared objects); routeOf fills it on the first read
  app.decorateRequest('keptRouteOptions', null);
}

/** The request's route options (`request.routeOptions`), read once per request and its route. */
export function routeOf(req: FastifyRequest): RouteOptions {
  // undefined on a request of an app without installRouteOf (a test's own Fastify)
  const kept = req.keptRouteOptions as RouteOptions | null | undefined;
  // a route's options stay those of the request unless it was moved to the 404 handler since
  if (kept != null && (kept.url === undefined || !req.is404)) return kept;
  return (req.keptRouteOptions = req.routeOptions);
}

declare module 'fastify' {
  interface FastifyRequest {
    /** routeOf's copy of `routeOptions`: read it through routeOf */
    keptRouteOptions: FastifyRequest['routeOptions'] | null;
  }
}
