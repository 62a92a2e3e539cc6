export { AgentqClient, type ClientOptions, type CallOptions, type CreateJobOptions, type StopOptions } from './client.js';
export { parseRetryAfter } from './retry-after.js';
export { MAX_CA_FILE_BYTES, NOT_TLS, readCaFile, tlsRefusalOf } from './ca-file.js';
export {
  AgentqApiError,
  AgentqAuthError,
  AgentqConnectionError,
  AgentqUsageError,
  isCoordinatorAnswer,
  isGatewayError,
  isRetryable,
  toError,
} from './errors.js';
export { backoffDelay, delay, type BackoffOptions } from './backoff.js';
export { parseSse, type SseMessage } from './sse.js';
export { coordinatorUrlProblem, Endpoints, neverSent, splitUrls, withoutCredentials } from './endpoints.js';
