import { AgentqApiError, AgentqConnectionError, backoffDelay, delay, isCoordinatorAnswer, type BackoffOptions } from '@agentq/client';

/*
 * Keeping a wait going while its coordinator restarts. A coordinator that shuts down answers the
 * waits parked on it with their snapshot, refuses what still arrives with 503 `shutting_down`
 * (Retry-After: 1), then cannot be reached until it is back. A wait (`agentq wait`,
 * `start --wait`, `output --follow`, the MCP tool `wait_for_jobs`) sends its call again meanwhile,
 * as `watch` reconnects its event stream, instead of reporting the coordinator unreachable.
 */

/**
 * How long a wait goes on without reaching any coordinator before it reports the last error
 * (unless its own deadline comes first). A restart takes seconds; this is for a coordinator that
 * is down for good, so that a wait without a deadline (`--timeout none`) does not hang for ever.
 */
export const OUTAGE_LIMIT_MS = 5 * 60_000;

/** The pauses between attempts (a longer Retry-After from the coordinator wins). */
const BACKOFF: BackoffOptions = { baseMs: 250, maxMs: 5_000 };

/** Statuses that say "not now" rather than "no": overloaded, restarting, or a proxy without it. */
const TRANSIENT_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

/** Is `err` what a coordinator that is restarting (or briefly away) answers? */
export function isOutage(err: unknown): boolean {
  if (err instanceof AgentqConnectionError) return true;
  return err instanceof AgentqApiError && TRANSIENT_STATUSES.has(err.status);
}

export interface ReconnectOptions {
  /** the wait's own deadline (Date.now-style ms; Infinity: none): no attempt is made after it */
  deadline: number;
  now: () => number;
  /** aborting stops at once, with the signal's reason */
  signal?: AbortSignal | undefined;
  /** the coordinator has already answered this wait (e.g. the job being waited for was just created) */
  reached?: boolean;
  /** default OUTAGE_LIMIT_MS */
  outageLimitMs?: number;
  /**
   * Which errors are sent again (default isOutage). A call that must not be carried out twice
   * and has no Idempotency-Key narrows it to the errors that say the call was never carried out.
   */
  retryable?: (err: unknown) => boolean;
  /** told before each pause: why, and for how long */
  onRetry?: (err: unknown, waitMs: number) => void;
  /** told when a call is answered after an outage: how long the coordinator was away (from its first failed attempt) */
  onBack?: (outageMs: number) => void;
}

/**
 * The calls of one wait, each sent again while the coordinator is away (a connection error, or
 * 429/502/503/504), after a capped backoff with jitter or the Retry-After it asked for.
 *
 * A coordinator that has not answered this wait yet is reported at once, as by any command: a
 * wrong URL, or one that is not running, is not something to wait for. Once it has answered,
 * errors are retried until the deadline (one last attempt is made at it), or until
 * `outageLimitMs` passed without an answer; then the last error is thrown, at once when the
 * coordinator's Retry-After reaches past that. A proxy's 502/503/504 is not an answer of the
 * coordinator (isGatewayError): it neither ends an outage nor shows the coordinator is there.
 */
export class Reconnecting {
  readonly #o: ReconnectOptions;
  #reached: boolean;
  /** when the coordinator stopped answering (undefined while it answers) */
  #outageSince: number | undefined;
  #attempt = 0;

  constructor(o: ReconnectOptions) {
    this.#o = o;
    this.#reached = o.reached ?? false;
  }

  /** The coordinator answered (a value or a refusal): an outage, if there was one, is over. */
  #answered(): void {
    this.#reached = true;
    if (this.#outageSince !== undefined) this.#o.onBack?.(this.#o.now() - this.#outageSince);
    this.#outageSince = undefined;
    this.#attempt = 0;
  }

  /**
   * `fn()`, again while the coordinator is away. `fn` is called anew for every attempt, so it can
   * work out what is left of the wait. `signal` (default the wait's) also ends the pauses.
   */
  async call<T>(fn: () => Promise<T>, signal: AbortSignal | undefined = this.#o.signal): Promise<T> {
    for (;;) {
      try {
        const value = await fn();
        this.#answered();
        return value;
      } catch (err) {
        if (signal?.aborted || this.#o.signal?.aborted) throw err;
        // a proxy's 502/503/504 (no agentq error body) is not the coordinator answering: it is
        // still away, and an outage goes on through it
        const coordinatorAnswered = isCoordinatorAnswer(err);
        if (!(this.#o.retryable ?? isOutage)(err)) {
          // the coordinator answered, with a refusal that waiting will not change
          if (coordinatorAnswered) this.#answered();
          throw err;
        }
        // its own "not now" (429, 503 shutting_down) shows it is there: not a wrong URL
        if (coordinatorAnswered) this.#reached = true;
        if (!this.#reached) throw err;
        const now = this.#o.now();
        this.#outageSince ??= now;
        const left = Math.min(this.#o.deadline, this.#outageSince + (this.#o.outageLimitMs ?? OUTAGE_LIMIT_MS)) - now;
        if (left <= 0) throw err;
        const asked = err instanceof AgentqApiError ? (err.retryAfterMs ?? 0) : 0;
        // the coordinator asks not to be called again before the time is up: trying once more at
        // the end (it said it would still refuse) only keeps the caller waiting for the same answer
        if (asked > left) throw err;
        const pause = Math.min(left, Math.max(asked, backoffDelay(this.#attempt++, BACKOFF)));
        this.#o.onRetry?.(err, pause);
        await delay(pause, signal);
      }
    }
  }
}
