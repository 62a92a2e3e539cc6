import type { Logger } from 'pino';
import { AgentqApiError, AgentqAuthError, isRetryable, toError, type AgentqClient, type BackoffOptions } from '@agentq/client';
import { describe, type Connectivity } from './connectivity.js';
import { RegistrationError, type Registration } from './registration.js';
import type { Supervisor } from './supervisor.js';

export interface PollerOptions {
  client: AgentqClient;
  registration: Registration;
  supervisor: Supervisor;
  connectivity: Connectivity;
  log: Logger;
  retry?: BackoffOptions;
  /** per-job agent tokens that came with an answer (auth on), told before its jobs are accepted */
  onAgentTokens?: (tokens: Readonly<Record<string, string>>) => void;
}

/**
 * The long-poll loop (the original launcher's JobPoller). Each poll says how many jobs the launcher can take
 * (`capacity`); while it is full the poll still goes out with capacity 0, so stop requests and
 * the deregistration notice arrive without delay. When a slot frees up during such a poll, the
 * poll is abandoned and a new one asks for work. Once draining (shutdown), capacity stays 0.
 */
export class Poller {
  readonly #o: PollerOptions;
  #draining = false;
  /** aborts the poll in flight when it was sent with capacity 0 and that is no longer true */
  #refresh: AbortController | undefined;
  #refreshCapacity = 0;

  constructor(options: PollerOptions) {
    this.#o = options;
    options.supervisor.onChange(() => this.#maybeRefresh());
  }

  /** Take no more jobs; keep polling for stop requests. */
  drain(): void {
    this.#draining = true;
    this.#maybeRefresh();
  }

  /** Poll until the coordinator deregisters the launcher ('deregistered') or `signal` aborts ('aborted'). */
  async run(signal: AbortSignal): Promise<'deregistered' | 'aborted'> {
    const { client, registration, supervisor, connectivity } = this.#o;
    for (let attempt = 0; !signal.aborted; ) {
      const launcherId = registration.id!;
      const capacity = this.#capacity();
      const refresh = new AbortController();
      this.#refresh = refresh;
      this.#refreshCapacity = capacity;
      const log = this.#o.log.child({ launcher_id: launcherId });
      try {
        const res = await client.poll(launcherId, {
          capacity,
          holdSeconds: registration.settings.poll_timeout_seconds,
          signal: AbortSignal.any([signal, refresh.signal]),
        });
        connectivity.ok();
        attempt = 0;
        if (res?.stop_jobs?.length) {
          log.info({ stop_jobs: res.stop_jobs }, 'stop requested');
          for (const jobId of res.stop_jobs) supervisor.stop(jobId);
        }
        // never logged: each is a credential for the job's agent
        if (res?.agent_tokens) this.#o.onAgentTokens?.(res.agent_tokens);
        // every job the answer hands out is ours now (`job` is `jobs[0]`, kept for old launchers)
        for (const job of res?.jobs ?? (res?.job ? [res.job] : [])) supervisor.accept(job);
        if (res?.deregistered) {
          log.info('deregistered by the coordinator');
          return 'deregistered';
        }
      } catch (err) {
        const e = toError(err);
        if (signal.aborted) break;
        if (refresh.signal.aborted) continue;
        if (e instanceof AgentqApiError && e.code === 'launcher_unknown') {
          try {
            await registration.renew(launcherId, signal);
          } catch (renewErr) {
            // stopped waiting for it (the end of a shutdown drain): polling is over, and the
            // launcher still drains its reports and deregisters; a refusal for good is fatal
            if (signal.aborted) break;
            throw toError(renewErr);
          }
          continue;
        }
        if (e instanceof AgentqAuthError) {
          // its credential is refused: retrying cannot help, and would hammer the coordinator
          throw new RegistrationError(`the coordinator refused this launcher's credential: ${e.message}`, { cause: e });
        }
        if (!isRetryable(e) && e instanceof AgentqApiError) {
          // e.g. a 400 from a coordinator of another version: retrying at full speed would spin
          log.error({ err: describe(e) }, 'poll refused; retrying with backoff');
        } else {
          connectivity.failed(e, 'poll');
        }
        await connectivity.backoff(attempt++, signal, this.#o.retry);
      } finally {
        this.#refresh = undefined;
      }
    }
    return 'aborted';
  }

  #capacity(): number {
    return this.#draining ? 0 : this.#o.supervisor.freeSlots;
  }

  /**
   * A parked capacity-0 poll is abandoned when a slot frees up. A poll with capacity > 0 is never
   * abandoned (except when draining): the coordinator may be handing it a job at that moment.
   */
  #maybeRefresh(): void {
    const r = this.#refresh;
    if (!r) return;
    const now = this.#capacity();
    if ((this.#refreshCapacity === 0 && now > 0) || (this.#draining && this.#refreshCapacity > 0)) r.abort();
  }
}
