import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { CoordinatorLimits, RegisterLauncherRequest, RegisterLauncherResponse } from '@agentq/protocol';
import { AgentqApiError, AgentqAuthError, isRetryable, toError, type AgentqClient, type BackoffOptions } from '@agentq/client';
import { Connectivity, describe, failedByCoordinator } from './connectivity.js';

/** Raised when registration is impossible (a final 4xx) or no longer wanted. */
export class RegistrationError extends Error {
  override readonly name = 'RegistrationError';
}

/**
 * The launcher's identity at the coordinator. `register` retries until the coordinator answers;
 * `renew` re-registers after a 401 `launcher_unknown` (e.g. the coordinator lost its state), once
 * for all the loops that noticed it at the same time, each waiting with its own abort signal.
 */
export class Registration {
  readonly #client: AgentqClient;
  readonly #log: Logger;
  readonly #connectivity: Connectivity;
  readonly #body: () => RegisterLauncherRequest;
  readonly #retry: BackoffOptions | undefined;
  readonly #tokenSource: (() => string | undefined) | undefined;
  /** the registration token of the latest attempt */
  #token: string | undefined;
  readonly #onRegistered: ((res: RegisterLauncherResponse) => void) | undefined;
  #current: RegisterLauncherResponse | undefined;
  #renewal: Renewal | undefined;
  #retired = false;

  constructor(deps: {
    client: AgentqClient;
    log: Logger;
    connectivity: Connectivity;
    /** what to register with; asked at each registration (the host identity is loaded at start) */
    body: () => RegisterLauncherRequest;
    retry?: BackoffOptions;
    /**
     * The registration token (launcher role), asked at each registration (a token file is read
     * again: it may have been rotated since); later calls use the answered launcher_token.
     */
    token?: () => string | undefined;
    /** told of every successful registration, before register() resolves */
    onRegistered?: (res: RegisterLauncherResponse) => void;
  }) {
    this.#client = deps.client;
    this.#log = deps.log;
    this.#connectivity = deps.connectivity;
    this.#body = deps.body;
    this.#retry = deps.retry;
    this.#tokenSource = deps.token;
    this.#onRegistered = deps.onRegistered;
  }

  /** The current launcher id; undefined before the first registration succeeded. */
  get id(): string | undefined {
    return this.#current?.launcher_id;
  }

  /**
   * The bearer token of this launcher's calls: its own credential once registered (auth on),
   * else the registration token (or none, for a coordinator without authentication).
   */
  get token(): string | undefined {
    return this.#current?.launcher_token ?? this.#token;
  }

  get settings(): RegisterLauncherResponse {
    if (!this.#current) throw new RegistrationError('not registered yet');
    return this.#current;
  }

  /**
   * The coordinator's limits as its heartbeat answer tells them: they replace those of the
   * registration when they differ (a coordinator restarted on a persistent store with other
   * limits still knows this launcher, so it does not register again to hear them). An answer
   * without them (a coordinator older than the fields) changes nothing.
   */
  limitsNow(told: CoordinatorLimits): void {
    const current = this.#current;
    if (!current) return;
    const changed: CoordinatorLimits = {};
    if (told.max_report_bytes !== undefined && told.max_report_bytes !== current.max_report_bytes) changed.max_report_bytes = told.max_report_bytes;
    if (told.max_output_bytes !== undefined && told.max_output_bytes !== current.max_output_bytes) changed.max_output_bytes = told.max_output_bytes;
    if (Object.keys(changed).length === 0) return;
    this.#log.info(
      { launcher_id: current.launcher_id, ...changed, was: { max_report_bytes: current.max_report_bytes, max_output_bytes: current.max_output_bytes } },
      "the coordinator's limits changed; cutting results by the new ones",
    );
    this.#current = { ...current, ...changed };
  }

  /** After a deregistration notice the launcher must not come back under a new id. */
  retire(): void {
    this.#retired = true;
  }

  async register(signal: AbortSignal): Promise<RegisterLauncherResponse> {
    // one key per registration, sent on each of its attempts: an attempt whose answer was lost
    // (a timeout, a reset connection, a 503 of a proxy) may have registered the launcher, and the
    // next one is then answered with that launcher instead of registering a second. A new key for
    // each registration (after the coordinator forgot this launcher, too): a registration that
    // follows a finished one is a new launcher, never the old one again.
    const registration_key = randomBytes(18).toString('base64url');
    // false once a coordinator refused the key (one older than it answers 400), for this
    // registration only: the next one tries it again, as the coordinators may have been upgraded
    let sendKey = true;
    for (let attempt = 0; ; attempt++) {
      if (signal.aborted) throw toError(signal.reason);
      try {
        // always with the registration token: an old launcher credential cannot register
        const body = sendKey ? { ...this.#body(), registration_key } : this.#body();
        this.#token = this.#tokenSource?.();
        const res = await this.#client.register(body, { signal, ...(this.#token ? { token: this.#token } : {}) });
        this.#connectivity.ok();
        const previous = this.#current?.launcher_id;
        this.#current = res;
        this.#log.info(
          {
            launcher_id: res.launcher_id,
            previous_launcher_id: previous,
            poll_timeout_seconds: res.poll_timeout_seconds,
            heartbeat_interval_seconds: res.heartbeat_interval_seconds,
            ...(body.replaces ? { replaces: body.replaces, replaced: res.replaced ?? [] } : {}),
          },
          previous ? 'registered again under a new id' : 'registered',
        );
        this.#onRegistered?.(res);
        return res;
      } catch (err) {
        const e = toError(err);
        if (signal.aborted) throw e;
        if (e instanceof AgentqAuthError) {
          // host_bound: the token is fine, but its host belongs to another (the message says which)
          const hint = e.code === 'host_bound' ? '' : '. Set AGENTQ_TOKEN (or --token-file) to a token with the launcher role';
          throw new RegistrationError(`registration refused: ${e.message}${hint}`, { cause: e });
        }
        if (sendKey && e instanceof AgentqApiError && e.code === 'validation_failed' && e.details?.['field'] === 'registration_key') {
          // a coordinator older than the field: register as before it, at once
          sendKey = false;
          this.#log.warn(
            { err: e.message },
            'the coordinator does not know registration_key (it is older than this launcher): registering without it, so a retry after a lost answer may leave a second launcher listed until the heartbeat timeout',
          );
          continue;
        }
        if (!isRetryable(e)) throw new RegistrationError(`registration refused: ${e.message}`, { cause: e });
        if (failedByCoordinator(e)) {
          // the coordinator answered, and failed this registration (a 500 internal_error): it is
          // not unreachable, so this is no outage; retried after a backoff of its own, as a poll or
          // a report it failed is (poller.ts, reporter.ts)
          this.#log.warn(
            { attempt, status: e.status, code: e.code, err: describe(e) },
            'coordinator failed the registration; retrying it after a backoff',
          );
          await this.#connectivity.backoff(attempt, signal, this.#retry, { wakeOnReachable: false });
          continue;
        }
        this.#connectivity.failed(e, 'register');
        await this.#connectivity.backoff(attempt, signal, this.#retry);
      }
    }
  }

  /**
   * The coordinator answered 401 `launcher_unknown` to a request made as `staleId`. Register again
   * unless someone already did (the id moved on) or the launcher is retired.
   *
   * Every loop that noticed it at the same time shares one registration, but each waits on it
   * with its own `signal`: a caller whose signal aborts (the poller at the end of a shutdown
   * drain) stops waiting without failing the others (the reporter still delivering reports). The
   * shared registration itself is abandoned only when no caller waits for it any more.
   */
  async renew(staleId: string, signal: AbortSignal): Promise<void> {
    if (this.#retired) throw new RegistrationError('the coordinator no longer knows this launcher, which was deregistered');
    if (this.id !== staleId) return;
    if (signal.aborted) throw toError(signal.reason);
    const renewal = (this.#renewal ??= this.#startRenewal(staleId));
    renewal.waiters++;
    try {
      await untilAborted(renewal.done, signal);
    } finally {
      if (--renewal.waiters === 0 && this.#renewal === renewal) {
        // nobody wants it any more: stop retrying; a later renew() starts afresh
        this.#renewal = undefined;
        renewal.abort.abort(toError(signal.reason));
      }
    }
  }

  #startRenewal(staleId: string): Renewal {
    this.#log.warn({ launcher_id: staleId }, 'coordinator does not know this launcher any more; registering again');
    const abort = new AbortController();
    const renewal: Renewal = { abort, waiters: 0, done: this.register(abort.signal).then(() => {}) };
    const forget = () => {
      if (this.#renewal === renewal) this.#renewal = undefined;
    };
    // a rejection is seen by the waiters (if any are left); this only ends the renewal
    renewal.done.then(forget, forget);
    return renewal;
  }
}

/** One re-registration shared by every caller of renew() while it runs. */
interface Renewal {
  done: Promise<void>;
  /** aborts the registration; used once the last waiter has left */
  abort: AbortController;
  waiters: number;
}

/** `promise`, or a rejection with the signal's reason as soon as `signal` aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(toError(signal.reason));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(toError(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(toError(err));
      },
    );
  });
}
