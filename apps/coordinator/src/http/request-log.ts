import { LogController, type FastifyError, type FastifyReply, type FastifyRequest } from 'fastify';
import { routeOf } from './route-of.js';

/**
 * Requests that wait by design: launcher long-polls, job waits, event streams, and output reads
 * that wait for new bytes (`wait_ms`). A fleet makes several of them a minute per launcher or
 * client, so their lines go to `debug` and `info` stays readable (`POST /launcher/sync` is a
 * long-poll when it carries no reports, and a batch of reports otherwise).
 */
const WAITING_ROUTES = new Set([
  'GET /launcher/jobs',
  'POST /launcher/sync',
  'GET /jobs/:job_id/wait',
  'POST /jobs/wait',
  'GET /events',
]);

/**
 * The launcher protocol's reports and heartbeats: many a minute per running job (output every
 * 200 ms) and per launcher. Their completion lines go to `debug` too; what a report changed is
 * logged at `info` by the core (job started, completed, failed, ...), and refusals as errors.
 */
const LAUNCHER_REPORTS = new Set([
  'POST /launcher/heartbeat',
  ...['started', 'completed', 'failed', 'stopped', 'output'].map((kind) => `POST /launcher/jobs/:job_id/${kind}`),
]);

/** Whether a request's completion line goes to `debug`: a waiting route, or a launcher report. */
function isQuiet(req: FastifyRequest): boolean {
  const route = `${req.method} ${routeOf(req).url ?? ''}`;
  if (WAITING_ROUTES.has(route) || LAUNCHER_REPORTS.has(route)) return true;
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
    else if (isQuiet(request)) reply.log.debug(line, 'request completed');
    else reply.log.info(line, 'request completed');
  }
}

type FrameworkErrors = (err: FastifyError, req: FastifyRequest, reply: FastifyReply) => void;

/**
 * Fastify's `frameworkErrors` handler, logged: what the router refuses before any route matches
 * (a broken percent-encoding, a path segment too long) skips the request hooks, so it would get
 * no completion line at all. It gets one at `info`, as any other refused request does.
 */
export function loggedFrameworkErrors(answer: FrameworkErrors): FrameworkErrors {
  return (err, req, reply) => {
    const started = performance.now();
    reply.raw.once('finish', () =>
      req.log.info({ req, res: reply, responseTime: performance.now() - started }, 'request completed'),
    );
    answer(err, req, reply);
  };
}
