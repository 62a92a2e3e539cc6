import { isTerminal, JobStatuses, type Job, type JobStatus, type LifecycleEvent } from '@agentq/protocol';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ExistingJob, MetricsSource } from './source.js';

/** Seconds between two wire timestamps, or null when one is missing (or time ran backwards). */
function between(from: string | null | undefined, to: string | null | undefined): number | null {
  if (!from || !to) return null;
  const seconds = (Date.parse(to) - Date.parse(from)) / 1000;
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : null;
}

/** What the metrics remember about a job that has not ended yet. */
interface LiveJob {
  status: JobStatus;
  /** when it last entered the queue: created, or put back by a requeue */
  queuedAt: string;
}

/**
 * The job metrics, all derived from lifecycle events. A job's life is cut in three histograms
 * that add up: time in queue (created or requeued -> claimed), dispatch (claimed -> the
 * launcher reports its executor started) and run time (started -> terminal status).
 */
export class JobMetrics {
  /** jobs not yet terminal, by id: their current status is what the by-status gauge counts */
  readonly #live = new Map<string, LiveJob>();
  /** terminal jobs still held by the coordinator (until retention evicts them), by status */
  readonly #ended = new Map<JobStatus, number>();
  readonly #unsubscribe: () => void;

  readonly #created: Counter<'type'>;
  readonly #endedTotal: Counter<'status'>;
  readonly #queueSeconds: Histogram;
  readonly #dispatchSeconds: Histogram;
  readonly #runSeconds: Histogram<'status'>;
  readonly #callbacksDelivered: Counter;

  constructor(registry: Registry, source: MetricsSource) {
    const registers = [registry];
    this.#created = new Counter({
      name: 'agentq_jobs_created_total',
      help: 'Jobs created, by type (start_session, resume_session; callbacks are resume_session jobs).',
      labelNames: ['type'],
      registers,
    });
    this.#endedTotal = new Counter({
      name: 'agentq_jobs_ended_total',
      help: 'Jobs that reached a terminal status, by that status.',
      labelNames: ['status'],
      registers,
    });
    const live = this.#live;
    const ended = this.#ended;
    new Gauge({
      name: 'agentq_jobs',
      help: 'Jobs the coordinator holds, by status (terminal ones until retention evicts them).',
      labelNames: ['status'],
      registers,
      collect() {
        const counts = new Map<JobStatus, number>(JobStatuses.map((s) => [s, ended.get(s) ?? 0]));
        for (const job of live.values()) counts.set(job.status, (counts.get(job.status) ?? 0) + 1);
        for (const [status, n] of counts) this.set({ status }, n);
      },
    });
    this.#queueSeconds = new Histogram({
      name: 'agentq_job_queue_seconds',
      help: 'Time a job waited in the queue: from its creation (or its return to the queue) to its claim by a launcher.',
      buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600],
      registers,
    });
    this.#dispatchSeconds = new Histogram({
      name: 'agentq_job_dispatch_seconds',
      help: 'Dispatch latency: from a job being handed to a launcher to the launcher reporting its executor started.',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.#runSeconds = new Histogram({
      name: 'agentq_job_run_seconds',
      help: 'Run time of the jobs that started: from started to their terminal status, by that status.',
      labelNames: ['status'],
      buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400],
      registers,
    });
    this.#callbacksDelivered = new Counter({
      name: 'agentq_callbacks_delivered_total',
      help: "Child outcomes delivered to their parent session (counted when the callback resume job completes).",
      registers,
    });

    // Both run synchronously, so no event can fall between the listing and the subscription.
    for (const job of source.existingJobs()) this.#track(job, null);
    this.#unsubscribe = source.subscribe((event) => this.#onEvent(event));
  }

  close(): void {
    this.#unsubscribe();
  }

  #onEvent(event: LifecycleEvent): void {
    if (!('job' in event)) return;
    const job = event.job;
    switch (event.type) {
      case 'job.created':
        this.#created.inc({ type: job.type });
        break;
      case 'job.claimed': {
        const waited = between(this.#live.get(job.job_id)?.queuedAt ?? job.created_at, job.claimed_at);
        if (waited !== null) this.#queueSeconds.observe(waited);
        break;
      }
      case 'job.started': {
        const dispatch = between(job.claimed_at, job.started_at);
        if (dispatch !== null) this.#dispatchSeconds.observe(dispatch);
        break;
      }
      case 'job.evicted':
        this.#evicted(job);
        return;
      default:
        break;
    }
    if (isTerminal(job.status)) this.#terminal(job);
    else this.#track(job, event.type === 'job.requeued' ? event.at : null);
  }

  /** Note a job's current status; `requeuedAt` when it has just gone back to the queue. */
  #track(job: ExistingJob, requeuedAt: string | null): void {
    if (isTerminal(job.status)) {
      this.#ended.set(job.status, (this.#ended.get(job.status) ?? 0) + 1);
      return;
    }
    const known = this.#live.get(job.job_id);
    if (!known) this.#live.set(job.job_id, { status: job.status, queuedAt: requeuedAt ?? job.created_at });
    else {
      known.status = job.status;
      if (requeuedAt !== null) known.queuedAt = requeuedAt;
    }
  }

  #terminal(job: Job): void {
    // a job is counted as ended once, when it leaves the live set
    if (!this.#live.delete(job.job_id)) return;
    this.#ended.set(job.status, (this.#ended.get(job.status) ?? 0) + 1);
    this.#endedTotal.inc({ status: job.status });
    const ran = between(job.started_at, job.completed_at);
    if (ran !== null) this.#runSeconds.observe({ status: job.status }, ran);
    if (job.status === 'completed' && job.callback_of) this.#callbacksDelivered.inc(job.callback_of.length);
  }

  #evicted(job: Job): void {
    if (this.#live.delete(job.job_id)) return;
    const n = this.#ended.get(job.status) ?? 0;
    if (n > 0) this.#ended.set(job.status, n - 1);
  }
}
