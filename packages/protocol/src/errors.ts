import { Type, type Static } from '@sinclair/typebox';

/**
 * Every error the coordinator answers has this body. Clients branch on `code`, never on
 * `message`. `details` carries machine-readable context (the failing `field`, a job's
 * `current_status`, ...).
 */
export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      code: Type.String(),
      message: Type.String(),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    }),
  },
  { description: 'Every error response' },
);
export type ErrorBody = Static<typeof ErrorBody>;

/** The registry of error codes and the HTTP status each one is answered with. */
export const ErrorCodes = {
  validation_failed: 400,
  bad_request: 400,
  unauthorized: 401,
  launcher_unknown: 401,
  forbidden: 403,
  /** a launcher registering a host identity bound to another (valid) token */
  host_bound: 403,
  request_timeout: 408,
  job_not_found: 404,
  session_not_found: 404,
  parent_session_not_found: 404,
  launcher_not_found: 404,
  route_not_found: 404,
  /** a path that exists, with another method: `Allow` and `details.allowed` list its methods */
  method_not_allowed: 405,
  job_owned_by_other_launcher: 409,
  invalid_transition: 409,
  session_exists: 409,
  session_idle: 409,
  session_closed: 409,
  /** a child for a session whose turn is being stopped */
  parent_stopping: 409,
  idempotency_key_reused: 409,
  /** a registration_key of an online launcher sent with another registration (other fields) */
  registration_key_reused: 409,
  /** a dashboard or docs UI file asked for with an `If-Match` or `If-Unmodified-Since` it does not meet */
  precondition_failed: 412,
  payload_too_large: 413,
  unsupported_media_type: 415,
  /** a dashboard or docs UI file asked for with a `Range` past its end (`Content-Range` gives its size) */
  range_not_satisfiable: 416,
  /** an `Expect` header other than 100-continue (the only expectation the coordinator meets) */
  expectation_failed: 417,
  depth_exceeded: 422,
  budget_exceeded: 422,
  rate_limited: 429,
  headers_too_large: 431,
  internal_error: 500,
  shutting_down: 503,
  overloaded: 503,
  queue_full: 503,
  storage_unavailable: 503,
  too_many_clients: 503,
  /** `POST /launcher/register` while MAX_LAUNCHERS launchers are registered and none of them is stale */
  too_many_launchers: 503,
  /** `GET /` on a coordinator whose dashboard was not built (`npm run build`) */
  dashboard_not_built: 503,
} as const;
export type ErrorCode = keyof typeof ErrorCodes;
