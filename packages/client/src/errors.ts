/** The coordinator answered with an error body `{ error: { code, message, details } }`. */
export class AgentqApiError extends Error {
  override readonly name: string = 'AgentqApiError';
  /** how long the coordinator asked to wait before trying again (its Retry-After), if it did */
  retryAfterMs?: number;
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
  /** A 4xx other than 408/429: retrying the same request cannot succeed. */
  get isFinal(): boolean {
    return this.status >= 400 && this.status < 500 && this.status !== 408 && this.status !== 429;
  }
}

/**
 * The coordinator refused the credentials: 401 `unauthorized` (no token, or one it does not
 * know) or 403 `forbidden` (the token's role may not do this). Retrying cannot help; callers
 * stop and tell the user which token to set. (A 401 `launcher_unknown` is not one of these: it
 * means "register again".)
 */
export class AgentqAuthError extends AgentqApiError {
  override readonly name = 'AgentqAuthError';
  constructor(status: number, code: string, message: string, details?: Record<string, unknown>) {
    super(
      status,
      code,
      status === 401
        ? `the coordinator refused the request: no valid token (${message})`
        : `the coordinator refused the request: the token may not do this (${message})`,
      details,
    );
  }
}

/** The coordinator could not be reached, or the connection broke before an answer. */
export class AgentqConnectionError extends Error {
  override readonly name = 'AgentqConnectionError';
  readonly code = 'coordinator_unreachable';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * The call cannot be sent as given: a token (or another header) with a character an HTTP header
 * cannot carry. A mistake on this side: neither a retry nor another coordinator can help.
 */
export class AgentqUsageError extends Error {
  override readonly name = 'AgentqUsageError';
  readonly code = 'invalid_request';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * A 502/503/504 that is not the coordinator's: a proxy or gateway in front of it answered, with
 * no agentq error body (its code is `http_<status>`), most often because the coordinator behind
 * it is down. Not an answer of the coordinator: it cannot be reached, and the call may or may not
 * have been passed on to it. (The coordinator's own 503, `shutting_down`, `overloaded`,
 * `queue_full`, ..., has its agentq code.)
 */
export function isGatewayError(err: unknown): boolean {
  return err instanceof AgentqApiError && (err.status === 502 || err.status === 503 || err.status === 504) && err.code.startsWith('http_');
}

/** The coordinator itself answered `err` (an error of its own), not a proxy in front of it (isGatewayError). */
export function isCoordinatorAnswer(err: unknown): err is AgentqApiError {
  return err instanceof AgentqApiError && !isGatewayError(err);
}

/** Turn anything thrown into an Error, keeping the original as `cause`. */
export function toError(value: unknown): Error {
  if (value instanceof Error) return value;
  return new Error(typeof value === 'string' ? value : JSON.stringify(value), { cause: value });
}

/** True when a request failed for a reason that a later retry may not hit (network, 5xx, 408, 429). */
export function isRetryable(err: unknown): boolean {
  if (err instanceof AgentqConnectionError) return true;
  if (err instanceof AgentqApiError) return !err.isFinal;
  return false;
}
