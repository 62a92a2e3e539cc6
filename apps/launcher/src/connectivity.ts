import type { Logger } from 'pino';
import { AgentqApiError, AgentqConnectionError, backoffDelay, isCoordinatorAnswer, NOT_TLS, tlsRefusalOf, type BackoffOptions } from '@agentq/client';

/**
 * Whether the coordinator answers, shared by the poller, the heartbeat and the reporter so that
 * an outage is logged once when it starts and once when it ends, not on every retry. Whoever
 * sees a success calls `ok()`, which also wakes every retry waiting in a backoff after an outage:
 * reports go out as soon as the coordinator is back instead of at the end of their longest delay.
 */
export class Connectivity {
  readonly #log: Logger;
  #down = false;
  #since = 0;
  /** no retry before this time: the coordinator's Retry-After (overloaded, rate-limited) */
  #notBefore = 0;
  #waiters = new Set<() => void>();
  /** the retries waiting their own backoff (not woken by `ok()`), each with the time it ends */
  #ownWaiters = new Map<() => void, number>();

  constructor(log: Logger) {
    this.#log = log;
  }

  get isDown(): boolean {
    return this.#down;
  }

  failed(err: Error, during: string): void {
    // an overloaded coordinator says how long to stay away: every loop honours it
    if (err instanceof AgentqApiError && err.retryAfterMs !== undefined) {
      this.#notBefore = Math.max(this.#notBefore, Date.now() + err.retryAfterMs);
    }
    if (this.#down) return;
    this.#down = true;
    this.#since = Date.now();
    if (isCoordinatorAnswer(err) && !err.code.startsWith('http_')) {
      // its own 503 (shutting down, overloaded, storage unavailable), 429 or 408: it answers, and
      // says why it serves nobody for now; "unreachable" would send the reader to the network
      this.#log.warn(
        { during, status: err.status, code: err.code, err: describe(err) },
        'coordinator unavailable (it answered, refusing requests for now); retrying with backoff until it serves them',
      );
      return;
    }
    const tls = tlsRefusalOf(err);
    if (tls !== undefined) {
      // reached, but TLS refused it: no wait makes that work, the set-up has to change (a
      // certificate can be replaced while the launcher waits, so it keeps retrying)
      this.#log.warn(
        { during, tls_error: tls, err: describe(err) },
        tls === NOT_TLS
          ? 'coordinator does not speak TLS there: use an http:// --url (it serves https:// only with TLS_CERT_FILE and TLS_KEY_FILE); retrying with backoff'
          : "coordinator's TLS certificate is not trusted: give the CA certificate that signed it with --ca-file or AGENTQ_CA_FILE, and a --url host name it names; retrying with backoff",
      );
      return;
    }
    this.#log.warn(
      { during, ...(err instanceof AgentqApiError ? { status: err.status, code: err.code } : {}), err: describe(err) },
      'coordinator unreachable; retrying with backoff until it answers',
    );
  }

  ok(): void {
    this.#notBefore = 0;
    if (this.#down) {
      this.#down = false;
      this.#log.info({ down_ms: Date.now() - this.#since }, 'coordinator reachable again');
    }
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const wake of waiters) wake();
  }

  /**
   * The launcher exits at `deadline` (the end of its report drain): every retry waiting its own
   * backoff that would end after it goes now, once, instead of never. Without this a report the
   * coordinator failed just before the shutdown (its own backoff up to 30 s, the drain 15 s) was
   * abandoned unsent, though a retry might well have been taken. A retry failing again waits its
   * next backoff as usual, so this sends each at most once more; a retry that ends before the
   * deadline goes on its own.
   */
  leavingAt(deadline: number): void {
    for (const [wake, until] of [...this.#ownWaiters]) if (until > deadline) wake();
  }

  /**
   * Wait before retry number `attempt`: the backoff delay (at least what a Retry-After asked
   * for), cut short when the coordinator is seen answering again, unless `wakeOnReachable` is
   * false (the retry of a request the coordinator itself failed: see `failedByCoordinator`; it
   * ends early only when the launcher leaves before it would: `leavingAt`).
   * Resolves early (never rejects) when `signal` aborts; callers check it.
   */
  backoff(attempt: number, signal: AbortSignal, options?: BackoffOptions, { wakeOnReachable = true } = {}): Promise<void> {
    const ms = Math.max(backoffDelay(attempt, options), this.#notBefore - Date.now());
    return new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.#waiters.delete(done);
        this.#ownWaiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      if (wakeOnReachable) this.#waiters.add(done);
      else this.#ownWaiters.set(done, Date.now() + ms);
    });
  }
}

/**
 * Whether `err` is the coordinator's own answer to the request that it could not serve it, for
 * a reason of that request's (500 `internal_error`, a 502 `invalid_response` answer, ...): the
 * coordinator is reachable and serving others, so another request succeeding says nothing about
 * this one, and its retry waits its own backoff (not woken by `ok()`), or it would be sent again
 * as often as anything else succeeds. Not one of these, and still woken: a connection error, a
 * proxy's 5xx, the coordinator's 503 (shutting down, overloaded, storage unavailable: it serves
 * nobody for now), a 408 (the request did not arrive whole) and a 429 (its Retry-After).
 *
 * A proxy's answer is any 5xx without an agentq error body (its code is `http_<status>`), not
 * only the 502/503/504 of `isCoordinatorAnswer`: a CDN in front of a coordinator that is down
 * answers 520-524 (Cloudflare's "origin is unreachable", "timed out", ...), and those reports
 * must go as soon as the coordinator is back, like those after any other outage.
 */
export function failedByCoordinator(err: Error): err is AgentqApiError {
  return isCoordinatorAnswer(err) && !err.code.startsWith('http_') && err.status >= 500 && err.status !== 503;
}

/** A short, loggable description of a request failure. */
export function describe(err: Error): string {
  if (err instanceof AgentqApiError) return `${err.status} ${err.code}: ${err.message}`;
  if (err instanceof AgentqConnectionError) return err.message;
  return `${err.name}: ${err.message}`;
}
