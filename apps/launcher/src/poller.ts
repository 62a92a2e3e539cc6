import type { Logger } from 'pino';
import type { SyncResponse } from '@agentq/protocol';
import { AgentqApiError, AgentqAuthError, isRetryable, toError, type AgentqClient, type BackoffOptions } from '@agentq/client';
import { describe, failedByCoordinator, type Connectivity } from './connectivity.js';
import { RegistrationError, type Registration } from './registration.js';
import type { Supervisor } from './supervisor.js';
import { bodyRefused, SyncChannel } from './sync-channel.js';

export interface PollerOptions {
  client: AgentqClient;
  registration: Registration;
  supervisor: Supervisor;
  connectivity: Connectivity;
  log: Logger;
  /** the reports waiting to go out: each poll carries them (report-and-poll) */
  channel: SyncChannel;
  /** aborting it abandons the reports a poll carries (the launcher's exit) */
  exit: AbortSignal;
  retry?: BackoffOptions;
  /** per-job agent tokens that came with an answer (auth on), told before its jobs are accepted */
  onAgentTokens?: (tokens: Readonly<Record<string, string>>) => void;
}

/**
 * The long-poll loop, on `POST /launcher/sync`. Each poll says how many
 * jobs the launcher can take (`capacity`: its free slots) and may get several at once; it also
 * carries the reports waiting to go out (sync-channel.ts), and is then answered at once. A poll
 * without reports is held until there is work. While the launcher is full the poll still goes
 * out with capacity 0, so stop requests and the deregistration notice arrive without delay. When
 * a slot frees up during such a poll, the poll is abandoned and a new one asks for work. Once
 * draining (shutdown), capacity stays 0.
 */
export class Poller {
  readonly #o: PollerOptions;
  #draining = false;
  /** aborts the poll in flight when it was sent with capacity 0 and that is no longer true */
  #refresh: AbortController | undefined;
  #refreshCapacity = 0;
  /** a deregistration notice came (maybe on a sync of the report channel) */
  #deregistered = false;
  /**
   * ends the backoff after a failed poll early when there is nothing left to poll for (the
   * deregistration notice came on a report's sync), or when the launcher it failed as is gone
   * (registered again): one after a poll the coordinator failed is not woken by the success of
   * that sync or registration (`wakeOnReachable: false`)
   */
  #pause: AbortController | undefined;
  /** the launcher id the poll that `#pause` waits to retry was made as */
  #pausedAs: string | undefined;

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
    const { client, registration, connectivity, channel } = this.#o;
    try {
      for (let attempt = 0; !signal.aborted && !this.#deregistered; ) {
        const launcherId = registration.id!;
        const capacity = this.#capacity();
        channel.pollerWillTake(true);
        const taken = channel.take(launcherId);
        // a poll that carries reports is answered at once and is not abandoned for a refresh;
        // one without is held, and may be abandoned (refresh, shutdown)
        const refresh = new AbortController();
        if (taken.length === 0) {
          this.#refresh = refresh;
          this.#refreshCapacity = capacity;
          channel.pollerWillTake(false);
        }
        const log = this.#o.log.child({ launcher_id: launcherId });
        try {
          const res = await client.sync(
            { launcher_id: launcherId, capacity, reports: SyncChannel.body(taken) },
            {
              holdSeconds: registration.settings.poll_timeout_seconds,
              signal: taken.length > 0 ? AbortSignal.any([this.#o.exit, signal]) : AbortSignal.any([signal, refresh.signal]),
            },
          );
          channel.pollerWillTake(true);
          connectivity.ok();
          attempt = 0;
          channel.settle(taken, res);
          this.answered(res, log);
        } catch (err) {
          const e = toError(err);
          channel.pollerWillTake(false);
          // polling stopped under a poll that carried reports: they go out again on their own
          // (the coordinator may have applied them; a report sent twice is answered ok)
          if (signal.aborted && !this.#o.exit.aborted) channel.requeue(taken);
          else channel.fail(taken, e);
          if (signal.aborted || this.#deregistered) break;
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
          this.#pause = new AbortController();
          this.#pausedAs = launcherId;
          const pause = AbortSignal.any([signal, this.#pause.signal]);
          if (!isRetryable(e) && taken.length > 0 && bodyRefused(e)) {
            // a body refused with the reports it carried (one outside the schema, too large for a
            // proxy): most likely for a report, which the channel has settled (each of several
            // goes again on its own; a single one is refused, never sent again, and its job ends
            // with a report that says so: job-runner.ts). Not a loop: the poll goes again after
            // a backoff, as one refused for itself does, but without those reports.
            const jobIds = [...new Set(taken.map((p) => p.jobId))];
            log.warn(
              {
                attempt,
                status: e.status,
                code: e.code,
                err: describe(e),
                ...(jobIds.length === 1 ? { job_id: jobIds[0] } : { job_ids: jobIds }),
                reports: taken.map((p) => p.report.kind),
              },
              taken.length > 1
                ? 'poll refused with the reports it carried; each report goes again on its own, the poll after a backoff'
                : 'poll refused with the report it carried; the report is not sent again, the poll goes again after a backoff',
            );
            await connectivity.backoff(attempt++, pause, this.#o.retry, { wakeOnReachable: false });
          } else if (!isRetryable(e) && e instanceof AgentqApiError) {
            // e.g. a 400 from a coordinator of another version: retrying at full speed would spin,
            // and so would a retry woken by each heartbeat the coordinator answers meanwhile
            log.error({ attempt, status: e.status, code: e.code, err: describe(e) }, 'poll refused; retrying with backoff');
            await connectivity.backoff(attempt++, pause, this.#o.retry, { wakeOnReachable: false });
          } else if (failedByCoordinator(e)) {
            // the coordinator answered, and failed this poll (a 500 internal_error): it is not
            // down, and a heartbeat or a report it takes meanwhile says nothing about the next
            // poll, which waits its whole backoff, as a report it failed does (reporter.ts)
            log.warn({ attempt, err: describe(e) }, 'coordinator failed the poll; retrying it after a backoff');
            await connectivity.backoff(attempt++, pause, this.#o.retry, { wakeOnReachable: false });
          } else {
            connectivity.failed(e, 'poll');
            await connectivity.backoff(attempt++, pause, this.#o.retry);
          }
        } finally {
          this.#refresh = undefined;
          this.#pause = undefined;
          this.#pausedAs = undefined;
        }
      }
    } finally {
      // not polling any more: queued reports go out on their own
      channel.pollerWillTake(false);
    }
    return this.#deregistered ? 'deregistered' : 'aborted';
  }

  /**
   * The launcher registered (again, under `launcherId`: another loop was told the coordinator no
   * longer knows it). A poll waiting out the backoff of one the coordinator failed or refused as
   * the launcher it was goes now: that failure says nothing about the new launcher, which would
   * otherwise take no job for up to the longest backoff (30 s).
   */
  registered(launcherId: string): void {
    if (this.#pausedAs !== undefined && this.#pausedAs !== launcherId) this.#pause?.abort();
  }

  /**
   * What an answer asks of the launcher, whichever sync brought it: run the jobs, stop the jobs
   * named in `stop_jobs`, and end polling on the deregistration notice.
   */
  answered(res: Pick<SyncResponse, 'jobs' | 'stop_jobs' | 'deregistered' | 'agent_tokens'>, log: Logger = this.#o.log): void {
    const { supervisor } = this.#o;
    if (res.stop_jobs?.length) {
      log.info({ stop_jobs: res.stop_jobs }, 'stop requested');
      for (const jobId of res.stop_jobs) supervisor.stop(jobId);
    }
    // never logged: each is a credential for the job's agent; told before its jobs are accepted
    if (res.agent_tokens) this.#o.onAgentTokens?.(res.agent_tokens);
    if (this.#draining && res.jobs.length > 0) {
      // handed out by a poll that left before the shutdown began: not started, so that the drain
      // does not wait for them; the coordinator puts them back in the queue when this launcher
      // deregisters (or after JOB_CLAIM_LEASE)
      log.warn({ job_ids: res.jobs.map((j) => j.job_id) }, 'jobs handed out while shutting down; not started');
    } else for (const job of res.jobs) supervisor.accept(job);
    if (res.deregistered && !this.#deregistered) {
      log.info('deregistered by the coordinator');
      this.#deregistered = true;
      this.#refresh?.abort();
      this.#pause?.abort();
    }
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
