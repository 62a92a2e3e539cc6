import { AgentqApiError, AgentqConnectionError, isCoordinatorAnswer, neverSent, toError } from '@agentq/client';
import { isOutage, Reconnecting } from '../reconnect.js';

/*
 * Tool calls through a coordinator restart. A restarting coordinator answers 503 shutting_down,
 * then cannot be reached for a moment. A model that gets "coordinator unreachable" from
 * start_session or get_status may well give up on its plan, though the coordinator is back a
 * second later: so every tool sends its call again for a while, as wait_for_jobs and `agentq wait`
 * do (reconnect.ts), but only where sending it again cannot do the thing twice.
 */

/**
 * How long a tool call goes on trying a coordinator that is away (a restart takes seconds), or
 * its own wait if that is longer (get_output's wait_ms).
 */
export const OUTAGE_RETRY_MS = 30_000;

/**
 * How long past the end of a wait (or of the retries) a tool call still waits for the
 * coordinator's answer. A coordinator that takes calls but does not answer them (paused, or cut
 * off by the network) is given up on then, so a tool answers within MAX_WAIT_MS and this, before
 * the MCP client gives up (the SDK's client after 60 s).
 */
export const ANSWER_GRACE_MS = 5_000;

/**
 * Which calls may be sent again:
 * - `always`: reads, and stops and creates with an Idempotency-Key (the coordinator answers
 *   what the first attempt did: the job it made, the jobs it stopped);
 * - `unsent`: calls that would act twice (send_message): only when the call surely did nothing
 *   (the connection was never made, or the coordinator itself refused it for now).
 */
export type Resend = 'always' | 'unsent';

/**
 * A 503 `storage_unavailable` from PostgreSQL (`details.sql_state`): the database was cut off,
 * perhaps while the change was committing, so it may have been made (docs/api.md). Not when it
 * says `details.applied: false` (no connection could be had, or the change failed before its
 * COMMIT was sent: nothing of the request was applied; coordinators before that field never say
 * it, and are taken at their word as before). SQLite's (`details.sqlite_code`) changed nothing.
 */
export function mayHaveCommitted(err: unknown): boolean {
  return postgresUnavailable(err) && err.details?.['applied'] !== false;
}

/** A 503 `storage_unavailable` from PostgreSQL (`details.sql_state`), not SQLite's (`details.sqlite_code`: a change it refused, disk full). */
export function postgresUnavailable(err: unknown): err is AgentqApiError {
  return err instanceof AgentqApiError && err.code === 'storage_unavailable' && err.details !== undefined && 'sql_state' in err.details;
}

/** The call was surely not carried out: never sent, or refused for now by the coordinator itself. */
export function notCarriedOut(err: unknown): boolean {
  if (err instanceof AgentqConnectionError) return neverSent(err);
  // a coordinator's own 429/503 (an agentq code, not a proxy's http_503) comes before any work,
  // but for a commit to PostgreSQL whose outcome it could not learn
  return err instanceof AgentqApiError && (err.status === 429 || err.status === 503) && !err.code.startsWith('http_') && !mayHaveCommitted(err);
}

export interface OutageOptions {
  resend: Resend;
  /** the coordinator is known to be there: else one that cannot be reached is reported at once (a wrong URL) */
  reached: boolean;
  /** the tool call's own signal */
  signal: AbortSignal;
  /** how long the call itself may wait on the coordinator (get_output's wait_ms); default 0 */
  waitMs?: number;
  /** how long past the end of the retries a call may take to be answered */
  graceMs: number;
  /** told before each pause (the server says it on stderr) */
  onRetry?: (err: unknown, waitMs: number) => void;
  /** told when the coordinator answers after an outage, with how long it was away */
  onBack?: (outageMs: number) => void;
}

/** What each attempt gets: the signal that ends it, and what is left of the call's own wait. */
export interface Attempt {
  signal: AbortSignal;
  waitLeftMs: number;
}

/**
 * `call()`, sent again while the coordinator is away, for up to OUTAGE_RETRY_MS (or `waitMs`),
 * and answered or given up on within that and `graceMs` (a coordinator that takes the call and
 * does not answer, too): before an MCP client gives up on the tool call. What cannot be sent
 * again, or is still failing then, is thrown; a coordinator that did not answer in time as an
 * AgentqConnectionError.
 */
export async function throughOutage<T>(call: (a: Attempt) => Promise<T>, o: OutageOptions): Promise<T> {
  const start = Date.now();
  const waitMs = o.waitMs ?? 0;
  const windowMs = Math.max(waitMs, OUTAGE_RETRY_MS);
  const limit = AbortSignal.timeout(windowMs + o.graceMs);
  const signal = AbortSignal.any([o.signal, limit]);
  const reconnect = new Reconnecting({
    deadline: start + windowMs,
    now: Date.now,
    signal,
    reached: o.reached,
    retryable: o.resend === 'always' ? isOutage : notCarriedOut,
    onRetry: o.onRetry,
    onBack: o.onBack,
  });
  try {
    return await reconnect.call(() => call({ signal, waitLeftMs: Math.max(0, start + waitMs - Date.now()) }));
  } catch (err) {
    if (limit.aborted && !o.signal.aborted) {
      throw new AgentqConnectionError(`the coordinator did not answer within ${Math.round((windowMs + o.graceMs) / 1000)} s`, { cause: err });
    }
    throw err;
  }
}

/**
 * The coordinator's outages that one tool call waited through (its calls sent again until it was
 * back). A call that took a restart's seconds says so in its answer (`coordinator_outage`), so
 * that the agent knows what it waited on, and each pause and each return is said on stderr, for
 * the operator. An outage's time is told apart by what the coordinator did: refused the call for
 * now (its own 429 or 503: it was there) or could not be reached (no answer, or a proxy's
 * 502/503/504). The pause after a failed attempt counts as what that attempt met (after a
 * refusal it is the coordinator's doing: its Retry-After); the time an attempt itself takes, as
 * what it met: an attempt sent after a refusal that goes unanswered until a proxy gives up (504)
 * or the call's time is up was time the coordinator could not be reached, not time it refused.
 * The attempt that is answered is no outage (a wait_for_jobs that holds 25 s once the
 * coordinator is back did not wait 25 s on an outage).
 */
export class OutageRecord {
  #retries = 0;
  #unreachableMs = 0;
  #refusedMs = 0;
  /**
   * the last failed attempt of the outage going on: when, the pause after it, and whether the
   * coordinator refused it; `ended`: the call failed with it, no attempt follows
   */
  #last: { at: number; pauseMs: number; refused: boolean; ended?: true } | undefined;
  #lastError: string | undefined;
  #mayHaveActed = false;

  constructor(
    readonly tool: string,
    readonly log?: (line: string) => void,
  ) {}

  /** before a pause: `err` is why the attempt failed */
  retried(err: unknown, pauseMs: number): void {
    this.#retries++;
    const now = Date.now();
    const refused = isCoordinatorAnswer(err);
    this.#count(now, refused);
    this.#last = { at: now, pauseMs: Math.max(0, pauseMs), refused };
    this.#lastError = toError(err).message;
    if (!notCarriedOut(err)) this.#mayHaveActed = true;
    this.log?.(`${this.tool}: ${this.#lastError}; trying again in ${Math.round(pauseMs)} ms`);
  }

  /**
   * The time since the last failed attempt: its pause counted as what that attempt met, the rest
   * (the next attempt's own time) as what that one met: `next` (true: refused for now; false: no
   * answer), undefined when it was answered (no outage).
   */
  #count(now: number, next: boolean | undefined): void {
    if (this.#last === undefined || this.#last.ended) return;
    const { paused, since } = sinceFailed(this.#last, now);
    this.#add(this.#last.refused, paused);
    if (next !== undefined) this.#add(next, since);
  }

  #add(refused: boolean, ms: number): void {
    if (refused) this.#refusedMs += ms;
    else this.#unreachableMs += ms;
  }

  /**
   * The client sent the call again by itself after `err` (a stop's retries with its key): an
   * attempt that may have acted makes what the call ends with not the whole story, as retried().
   */
  resentByClient(err: unknown): void {
    if (!notCarriedOut(err)) this.#mayHaveActed = true;
  }

  /** the coordinator answered again, `outageMs` after the outage's first failed attempt */
  back(outageMs: number): void {
    this.#count(Date.now(), undefined);
    this.#last = undefined;
    this.log?.(`${this.tool}: the coordinator answered again after ${seconds(outageMs)} s; the call goes on`);
  }

  /**
   * The call failed with `err` during an outage (it went on failing until its time was up, or the
   * coordinator's Retry-After reached past it): the last attempt's time counts as what it met.
   */
  ended(err: unknown): void {
    if (this.#last === undefined || this.#last.ended) return;
    const now = Date.now();
    const own = isCoordinatorAnswer(err);
    const notNow = own && (err.status === 429 || err.status === 503);
    // (an answer that is no "not now", a 404 say: the coordinator was there, that attempt was no outage)
    this.#count(now, own && !notNow ? undefined : notNow);
    this.#last = { ...this.#last, at: now, ended: true };
  }

  /**
   * An attempt that was sent again may have been carried out: it failed without proof that it did
   * nothing (its connection broke after the call was sent, a proxy answered 5xx, PostgreSQL was
   * cut off during the commit). What a later attempt is answered may then be its doing: a stop
   * sent again finds the job it stopped already over.
   */
  get mayHaveActed(): boolean {
    return this.#mayHaveActed;
  }

  /**
   * What the answer carries: undefined when the call met no outage. `unreachable_ms`: how long the
   * coordinator could not be reached; `refused_ms`: how long it refused the call for now.
   */
  view(): { unreachable_ms: number; refused_ms: number; retries: number; back: boolean; last_error: string } | undefined {
    if (this.#retries === 0) return undefined;
    // an outage going on (the call not ended yet): the pause as what its attempt met, an attempt
    // since then that has no answer yet as time the coordinator could not be reached
    let unreachable = this.#unreachableMs;
    let refused = this.#refusedMs;
    const last = this.#last;
    if (last !== undefined && !last.ended) {
      const { paused, since } = sinceFailed(last, Date.now());
      if (last.refused) refused += paused;
      else unreachable += paused;
      unreachable += since;
    }
    return {
      unreachable_ms: Math.round(unreachable),
      refused_ms: Math.round(refused),
      retries: this.#retries,
      back: this.#last === undefined,
      last_error: this.#lastError!,
    };
  }

  /** the line the answer's message ends with, when the call met an outage that ended */
  line(): string | undefined {
    const v = this.view();
    if (!v?.back) return undefined;
    return (
      `Note: the coordinator ${outageSpans(v)} during this call (${v.last_error}; ` +
      `tried again ${v.retries} time(s)); it was waited for, and the call went on once it answered again.`
    );
  }
}

/**
 * "could not be reached for 2.3 s", "refused calls for now for 1.0 s", or both: what an outage
 * was, for a note (a span that took no time is left out, unless both did).
 */
export function outageSpans(v: { unreachable_ms: number; refused_ms: number }): string {
  const spans = [
    ...(v.unreachable_ms > 0 || v.refused_ms === 0 ? [`could not be reached for ${seconds(v.unreachable_ms)} s`] : []),
    ...(v.refused_ms > 0 ? [`refused calls for now for ${seconds(v.refused_ms)} s`] : []),
  ];
  return spans.join(' and ');
}

/**
 * The time from a failed attempt (`at`) to `now`, split: `paused`, the pause after it (what that
 * attempt met), and `since`, the next attempt's own time since then (what that one meets).
 */
function sinceFailed(last: { at: number; pauseMs: number }, now: number): { paused: number; since: number } {
  const elapsed = Math.max(0, now - last.at);
  const paused = Math.min(elapsed, last.pauseMs);
  return { paused, since: elapsed - paused };
}

const seconds = (ms: number) => (ms / 1000).toFixed(1);
