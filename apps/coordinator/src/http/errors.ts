import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import { ErrorCodes, type ErrorBody } from '@agentq/protocol';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CoordinatorError } from '../core/errors.js';
import { routeOf } from './route-of.js';
import { fieldName, type ValidationIssue } from './validation.js';

function body(code: string, message: string, details?: Record<string, unknown>): ErrorBody {
  return { error: details ? { code, message, details } : { code, message } };
}

/** A body refused by the JSON parser for a reason its error says (not UTF-8, nested too deep, too wide, a `__proto__` key). */
const badBody = (err: FastifyError) => ({ status: 400, code: 'bad_request', message: err.message, details: { field: 'body', in: 'body' } });
/** A body refused for a header that says how it is sent (its charset, its encoding): 415, naming the header. */
const unsupportedBy = (header: 'content-type' | 'content-encoding') => (err: FastifyError) => ({
  status: 415,
  code: 'unsupported_media_type',
  message: err.message,
  details: { field: header, in: 'headers' },
});

/**
 * Fastify's own errors (raised before a handler runs), by code: the answer each gets. Anything
 * else with a 4xx status is a `bad_request`; the rest is a 500 with the cause in the log.
 */
const FRAMEWORK: Record<
  string,
  (err: FastifyError, req: FastifyRequest) => { status: number; code: string; message: string; details?: Record<string, unknown> }
> = {
  FST_ERR_CTP_BODY_TOO_LARGE: (_err, req) => {
    const limit = routeOf(req).bodyLimit;
    return {
      status: 413,
      code: 'payload_too_large',
      message: `body: is larger than the server accepts${limit === undefined ? '' : ` (${String(limit)} bytes)`}`,
      details: { field: 'body', in: 'body', ...(limit === undefined ? {} : { max_bytes: limit }) },
    };
  },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () => ({
    status: 415,
    code: 'unsupported_media_type',
    message: 'content-type: send JSON with content-type: application/json',
    details: { field: 'content-type', in: 'headers' },
  }),
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: () => ({
    status: 400,
    code: 'bad_request',
    message: 'content-length does not match the body',
    details: { field: 'body', in: 'body' },
  }),
  FST_ERR_CTP_EMPTY_JSON_BODY: () => ({
    status: 400,
    code: 'bad_request',
    message: 'body: is empty but content-type is application/json (send a JSON value, or no content-type)',
    details: { field: 'body', in: 'body' },
  }),
  FST_ERR_CTP_INVALID_JSON_BODY: () => ({
    status: 400,
    code: 'bad_request',
    message: 'body: is not valid JSON',
    details: { field: 'body', in: 'body' },
  }),
  AGENTQ_BODY_NOT_UTF8: badBody,
  AGENTQ_UNSUPPORTED_CHARSET: unsupportedBy('content-type'),
  AGENTQ_BODY_TOO_DEEP: badBody,
  AGENTQ_BODY_TOO_WIDE: badBody,
  AGENTQ_UNSUPPORTED_ENCODING: unsupportedBy('content-encoding'),
  AGENTQ_BODY_FORBIDDEN_KEY: badBody,
  FST_ERR_BAD_URL: () => ({
    status: 400,
    code: 'bad_request',
    message: 'url: is not valid percent-encoding',
    details: { field: 'url', in: 'url' },
  }),
  FST_ERR_MAX_PARAM_LENGTH: () => ({
    status: 400,
    code: 'bad_request',
    message: 'url: a path segment is too long',
    details: { field: 'url', in: 'url' },
  }),
  FST_ERR_ASYNC_CONSTRAINT: () => ({ status: 400, code: 'bad_request', message: 'the request matches no route constraint' }),
};

type Answer = { status: number; code: string; message: string; details?: Record<string, unknown> };

/**
 * Errors of @fastify/static (the dashboard's files, the docs UI's) by status: they carry only a
 * status and its reason phrase, and were answered `bad_request` whatever their status (416 with
 * `bad_request`, and without the `Content-Range` that says the file's size). Each gets the
 * registry's code for its status instead. A path with `..` in it (403 there) is a file that is
 * not served, as any other: 404 `route_not_found`, like an unknown path.
 */
const STATIC_FILE: Record<number, (err: FastifyError, req: FastifyRequest) => Answer> = {
  400: () => ({ status: 400, code: 'bad_request', message: 'url: names no file that can be served', details: { field: 'url', in: 'url' } }),
  403: (_err, req) => ({ status: 404, code: 'route_not_found', message: `no route ${req.method} ${req.url.split('?')[0]!}` }),
  412: () => ({
    status: 412,
    code: 'precondition_failed',
    message: 'the file does not meet the request\'s If-Match or If-Unmodified-Since',
    details: { in: 'headers' },
  }),
  416: () => ({
    status: 416,
    code: 'range_not_satisfiable',
    message: 'range: is past the end of the file (Content-Range gives its size)',
    details: { field: 'range', in: 'headers' },
  }),
};

/**
 * Any other client error a plugin raises: `bad_request`, which is a 400 (a code's status is
 * always the registry's: clients branch on the code).
 */
const otherClientError = (err: FastifyError): Answer => ({
  status: 400,
  code: 'bad_request',
  message: err.message,
  ...(hasCode(err) ? { details: { fastify_code: err.code } } : {}),
});

/** Fastify's errors have a code (`FST_...`); @fastify/static's (http-errors) have none, whatever FastifyError says. */
const hasCode = (err: FastifyError): boolean => typeof (err as { code?: unknown }).code === 'string';

/** Answer any error in the standard shape. Shared by the error handler and `frameworkErrors`. */
function answer(err: FastifyError | CoordinatorError, req: FastifyRequest, reply: FastifyReply) {
  if (err instanceof CoordinatorError) {
    // a refusal that says when to come back says it in the header too (queue_full, too_many_clients, ...)
    const retryAfter = err.details?.retry_after_seconds;
    if (typeof retryAfter === 'number' && !reply.hasHeader('retry-after')) reply.header('retry-after', String(retryAfter));
    return reply.code(err.statusCode).send(body(err.code, err.message, err.details));
  }
  if (err.validation) {
    const issue = err.validation[0] as unknown as ValidationIssue | undefined;
    const field = fieldName(issue?.instancePath ?? '', err.validationContext);
    const message = `${field}: ${issue?.message ?? 'is invalid'}`;
    return reply
      .code(ErrorCodes.validation_failed)
      .send(body('validation_failed', message, { field, in: err.validationContext ?? 'request' }));
  }
  const known = err.code === undefined ? undefined : FRAMEWORK[err.code];
  if (known) {
    const a = known(err, req);
    return reply.code(a.status).send(body(a.code, a.message, a.details));
  }
  if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
    // @fastify/static's errors (http-errors) have no code; Fastify's own all have one
    const a = ((hasCode(err) ? undefined : STATIC_FILE[err.statusCode]) ?? otherClientError)(err, req);
    const range = (err as { headers?: Record<string, unknown> }).headers?.['Content-Range'];
    if (a.status === 416 && typeof range === 'string') reply.header('content-range', range);
    return reply.code(a.status).send(body(a.code, a.message, a.details));
  }
  req.log.error({ err }, 'request failed');
  return reply.code(500).send(body('internal_error', 'internal error; see the coordinator log'));
}

/**
 * Every error leaves as `{ error: { code, message, details? } }`: the domain's coded errors,
 * validation failures, Fastify's own (bad JSON, wrong content type, body too large, bad URL
 * encoding: `frameworkErrors`), unknown routes, and even requests too malformed to be HTTP
 * (`clientErrorHandler`, given to Fastify at construction).
 */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(answer);
  // a path that exists with other methods is 405 with `Allow`, as HTTP asks; only an unknown path is 404
  const routes = new Map<string, { pattern: RegExp; methods: Set<string> }>();
  app.addHook('onRoute', (route) => {
    let entry = routes.get(route.url);
    if (!entry) routes.set(route.url, (entry = { pattern: routePattern(route.url), methods: new Set() }));
    for (const m of [route.method].flat()) entry.methods.add(m);
  });
  const notAllowed = (reply: FastifyReply, path: string, method: string, allowed: Iterable<string>) => {
    const allow = [...allowed].sort();
    return reply
      .code(ErrorCodes.method_not_allowed)
      .header('allow', allow.join(', '))
      .send(body('method_not_allowed', `${path} does not take ${method}; it takes ${allow.join(', ')}`, { allowed: allow }));
  };
  // One hook for both checks below, in this order (a hook fewer on every request):
  // - the router refuses a path whose percent-encoding is broken; the query parser would read such
  //   a query literally (`?session_name=%zz` matching a session named `%zz`): refused the same way;
  // - a path named by a route of its own that takes other methods (`GET /jobs/wait`) is that
  //   route, not the parameter of another one (`GET /jobs/{job_id}` with job_id "wait": 404
  //   job_not_found).
  app.addHook('onRequest', (req, reply, done) => {
    const q = req.url.indexOf('?');
    if (q >= 0 && req.url.includes('%', q)) {
      try {
        decodeURIComponent(req.url.slice(q + 1));
      } catch {
        return done(Object.assign(new Error('url: is not valid percent-encoding'), { code: 'FST_ERR_BAD_URL', statusCode: 400 }));
      }
    }
    const url = routeOf(req).url;
    if (url === undefined || !url.includes(':')) return done();
    const path = q < 0 ? req.url : req.url.slice(0, q);
    const own = routes.get(path);
    if (own === undefined || own.methods.has(req.method)) return done();
    notAllowed(reply, path, req.method, own.methods);
  });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0]!;
    const allowed = new Set<string>();
    for (const { pattern, methods } of routes.values()) if (pattern.test(path)) for (const m of methods) allowed.add(m);
    // a route of this method that found nothing (a file @fastify/static does not have) is a 404 too
    if (allowed.size === 0 || allowed.has(req.method)) {
      return reply.code(404).send(body('route_not_found', `no route ${req.method} ${path}`));
    }
    return notAllowed(reply, path, req.method, allowed);
  });
}

/** A route's path as a regular expression over request paths (`:param`: one segment; `*`: the rest). */
function routePattern(url: string): RegExp {
  const source = url
    .split(/(:[A-Za-z0-9_]+|\*)/)
    .map((part) => (part === '*' ? '.*' : part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${source}$`);
}

/** Fastify's `frameworkErrors` option: router errors (bad percent-encoding, ...) in the standard shape. */
export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  void answer(err, req, reply);
}

/** Fastify's `clientErrorHandler`: a request that is not even valid HTTP gets a standard body too. */
export function clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'request_timeout', 'the request took too long to arrive']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'headers_too_large', 'the request line and headers are too large']
        : [400, 'bad_request', 'the request is not valid HTTP'];
  const text = JSON.stringify(body(code, message));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(text)}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${text}`,
    );
  }
  // closed without re-emitting the error: Node has handled it already, and a wave of expired slow
  // requests (each one timed out at the same check) would emit and handle two thousand of them again
  socket.destroy();
}

/** Error responses, for route schemas. */
export { ErrorBody } from '@agentq/protocol';
