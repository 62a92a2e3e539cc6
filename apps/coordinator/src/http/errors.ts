import { ErrorCodes, type ErrorBody } from '@agentq/protocol';
import type { FastifyError, FastifyInstance } from 'fastify';
import { CoordinatorError } from '../core/errors.js';
import { fieldName, type ValidationIssue } from './validation.js';

function body(code: string, message: string, details?: Record<string, unknown>): ErrorBody {
  return { error: details ? { code, message, details } : { code, message } };
}

/** Every error leaves as `{ error: { code, message, details? } }`. */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | CoordinatorError, req, reply) => {
    if (err instanceof CoordinatorError) {
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
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return reply.code(413).send(body('payload_too_large', 'request body is larger than the server accepts'));
    }
    if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      return reply.code(415).send(body('unsupported_media_type', 'send JSON with content-type: application/json'));
    }
    if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
      return reply
        .code(err.statusCode)
        .send(body('bad_request', err.message, { field: 'body', in: 'body', fastify_code: err.code }));
    }
    req.log.error({ err }, 'request failed');
    return reply.code(500).send(body('internal_error', 'internal error; see the coordinator log'));
  });

  app.setNotFoundHandler((req, reply) =>
    reply.code(404).send(body('route_not_found', `no route ${req.method} ${req.url.split('?')[0]}`)),
  );
}

/** Error responses, for route schemas. */
export { ErrorBody } from '@agentq/protocol';
