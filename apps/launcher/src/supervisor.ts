import type { Logger } from 'pino';
import type { Job } from '@agentq/protocol';
import type { InterruptionCode } from './final-report.js';
import type { JobRunner } from './job-runner.js';
import type { Reporter } from './reporter.js';

export interface SupervisorOptions {
  maxJobs: number;
  reporter: Reporter;
  log: Logger;
  /** start one job's runner */
  runJob: (job: Job) => JobRunner;
}

/** Job ids remembered after they ended, or after a stop of a job not running here was answered. */
const RECENTLY_ENDED = 1000;

/** Add `id` to `set`, forgetting the oldest beyond RECENTLY_ENDED. */
function remember(set: Set<string>, id: string): void {
  set.add(id);
  if (set.size > RECENTLY_ENDED) set.delete(set.values().next().value!);
}

/**
 * The running jobs (the original launcher's JobSupervisor): enforces the concurrency limit, routes stop
 * requests to the right job, and lets the launcher wait for, interrupt or kill all of them.
 */
export class Supervisor {
  readonly #o: SupervisorOptions;
  readonly #running = new Map<string, JobRunner>();
  readonly #ended = new Set<string>();
  /** jobs not running here whose stop was answered with a `stopped` report */
  readonly #stopAnswered = new Set<string>();
  readonly #listeners = new Set<() => void>();

  constructor(options: SupervisorOptions) {
    this.#o = options;
  }

  get runningIds(): string[] {
    return [...this.#running.keys()];
  }

  /** How many more jobs may start now (the `capacity` of the next poll). */
  get freeSlots(): number {
    return Math.max(0, this.#o.maxJobs - this.#running.size);
  }

  /** Called whenever a job starts or ends. Returns an unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Run a job the coordinator handed to this launcher. */
  accept(job: Job): void {
    const earlier = this.#running.get(job.job_id);
    if (earlier) {
      // handed out again while the runner of its earlier claim is still here: a claim requeued
      // (its lease ran out while the coordinator could not be reached) and taken again by this
      // launcher, in the very answer that refuses the earlier runner's `started`. That runner ends
      // without running it; the new claim is run once it has.
      this.#o.log.warn({ job_id: job.job_id }, 'job handed out again while its earlier claim is still here; run once that ends');
      void earlier.done.then(() => {
        if (!this.#running.has(job.job_id)) this.accept(job);
      });
      return;
    }
    if (this.freeSlots === 0) {
      // the poll said capacity 0, so this is a coordinator bug; the job is claimed by us, so run it anyway
      this.#o.log.warn({ job_id: job.job_id, max_jobs: this.#o.maxJobs }, 'job received while full; running it anyway');
    }
    const runner = this.#o.runJob(job);
    this.#running.set(job.job_id, runner);
    this.#emit();
    void runner.done.then(() => {
      this.#running.delete(job.job_id);
      remember(this.#ended, job.job_id);
      this.#emit();
    });
  }

  /**
   * The coordinator asked to stop a job. A job this launcher does not run is reported stopped
   * (signal null), once, so that it does not stay `stopping` for ever. That goes for a job that
   * ended here too: its `stopped` report queues behind its final one, which the coordinator takes
   * first (and then refuses the `stopped` as too late) — unless it never got it: a coordinator
   * restored from a backup taken while the job ran still counts it as running here.
   */
  stop(jobId: string): void {
    const runner = this.#running.get(jobId);
    if (runner) return runner.stop();
    if (this.#stopAnswered.has(jobId)) return;
    remember(this.#stopAnswered, jobId);
    const endedHere = this.#ended.has(jobId);
    this.#o.log.info({ job_id: jobId }, `stop requested for ${endedHere ? 'a job that ended here' : 'a job not running here'}; reporting it stopped`);
    void this.#o.reporter.send(jobId, { kind: 'stopped', body: { signal: null } }, { last: true, mayBeLate: endedHere });
  }

  /**
   * The coordinator does not count the job as running here any more: a report of it was refused
   * as unknown (404) or not this launcher's (409). It ended it (the launcher was lost, or it timed
   * out) or never knew it (a coordinator that lost its state). Its executor is stopped, so that no
   * agent goes on working, and holding a slot, for a job that has ended.
   */
  disowned(jobId: string, why: string): void {
    const runner = this.#running.get(jobId);
    if (!runner) return;
    this.#o.log.warn({ job_id: jobId, why }, 'the coordinator no longer counts this job as running here; stopping its executor');
    runner.disown(why);
  }

  /** Kill every running job and report it failed with `reason` and `code`. Resolves when all have ended. */
  async interruptAll(reason: string, code: InterruptionCode): Promise<void> {
    for (const runner of this.#running.values()) runner.interrupt(reason, code);
    await this.idle();
  }

  /** SIGKILL every executor's process group, synchronously. */
  killAllNow(): void {
    for (const runner of this.#running.values()) runner.killNow();
  }

  /** Resolves when no job is running. */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all([...this.#running.values()].map((r) => r.done));
  }

  #emit(): void {
    for (const listener of this.#listeners) {
      try {
        listener();
      } catch (err) {
        this.#o.log.error({ err }, 'supervisor listener threw');
      }
    }
  }
}
