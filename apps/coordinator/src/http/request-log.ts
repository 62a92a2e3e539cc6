import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

/**
 * Requests that wait by design: launcher long-polls, job waits, event streams, and output reads
 * that wait for new bytes (`wait_ms`). A fleet makes several of them a minute per launcher or
 * client, so their lines go to `debug` and `info` stays readable. (`POST /launcher/sync` is the
 * report-and-poll endpoint to come.)
 */
const WAITING_ROUTES = new Set([
  'GET /launcher/jobs',
  'POST /launcher/sync',
  'GET /jobs/:job_id/wait',
  'POST /jobs/wait',
  'GET /events',
]);

function isWaiting(req: FastifyRequest): boolean {
  const route = `${req.method} ${req.routeOptions.url ?? ''}`;
  if (WAITING_ROUTES.has(route)) return true;
  // following a job's output (`agentq output --follow`) is a series of waits for new bytes
  return route === 'GET /jobs/:job_id/output' && (req.query as { wait_ms?: unknown } | undefined)?.wait_ms !== undefined;
}

/**
 * Fastify's request log lines, one per request: the completion line (method, URL, status,
 * response time) at `info`, or at `debug` for waiting routes. The "incoming request" line adds
 * nothing the completion line lacks, so it goes to `debug` for every route.
 */
export class RequestLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    if (this.isLogDisabled(request)) return;
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    const line = { req: request, res: reply, responseTime: reply.elapsedTime };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else if (isWaiting(request)) reply.log.debug(line, 'request completed');
    else reply.log.info(line, 'request completed');
  }
}
