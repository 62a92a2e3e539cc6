import { isTerminal, JobStatuses, JobTypes, TERMINAL_STATUSES, type EventJob, type LifecycleEvent } from '@agentq/protocol';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { MetricsSource, ScrapeCounts } from './source.js';

/** Seconds between two wire timestamps, or null when one is missing (or time ran backwards). */
function between(from: string | null | undefined, to: string | null | undefined): number | null {
  if (!from || !to) return null;
  const seconds = (Date.parse(to) - Date.parse(from)) / 1000;
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : null;
}

/**
 * The job metrics, all derived from lifecycle events. A job's life is cut in three histograms
 * that add up: time in queue (created or requeued -> claimed), dispatch (claimed -> the
 * launcher reports its executor started) and run time (started -> terminal status).
 */
export class JobMetrics {
  /** jobs put back in the queue and not claimed again: their time in queue starts there */
  readonly #requeuedAt = new Map<string, string>();
  readonly #unsubscribe: () => void;

  readonly #created: Counter<'type'>;
  readonly #endedTotal: Counter<'status'>;
  readonly #queueSeconds: Histogram;
  readonly #dispatchSeconds: Histogram;
  readonly #runSeconds: Histogram<'status'>;
  readonly #callbacksDelivered: Counter;

  /** `storeRegistry` holds the gauge read from the store (CoordinatorMetrics: scraped apart) */
  constructor(registry: Registry, storeRegistry: Registry, source: MetricsSource, counts: () => Promise<ScrapeCounts>) {
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
    new Gauge({
      name: 'agentq_jobs',
      help: 'Jobs the store holds, by status (terminal ones until history retention deletes them).',
      labelNames: ['status'],
      registers: [storeRegistry],
      async collect() {
        const { jobsByStatus } = await counts();
        for (const status of JobStatuses) this.set({ status }, jobsByStatus[status] ?? 0);
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

    // every series at 0 from the start: a series that first appears at 1 has no sample before
    // its first event, so increase() and rate() miss that event (the first failure after a
    // restart would never fire an alert). Types and terminal statuses are fixed sets.
    for (const type of JobTypes) this.#created.inc({ type }, 0);
    for (const status of TERMINAL_STATUSES) {
      this.#endedTotal.inc({ status }, 0);
      this.#runSeconds.zero({ status });
    }

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
        const waited = between(this.#requeuedAt.get(job.job_id) ?? job.created_at, job.claimed_at);
        this.#requeuedAt.delete(job.job_id);
        if (waited !== null) this.#queueSeconds.observe(waited);
        break;
      }
      case 'job.requeued':
        this.#requeuedAt.set(job.job_id, event.at);
        break;
      case 'job.started': {
        const dispatch = between(job.claimed_at, job.started_at);
        if (dispatch !== null) this.#dispatchSeconds.observe(dispatch);
        break;
      }
      default:
        break;
    }
    if (event.type !== 'job.evicted' && isTerminal(job.status) && event.type === `job.${job.status}`) this.#terminal(job);
  }

  /** A job reached its terminal status (its one `job.<status>` event). */
  #terminal(job: EventJob): void {
    this.#requeuedAt.delete(job.job_id);
    this.#endedTotal.inc({ status: job.status });
    const ran = between(job.started_at, job.completed_at);
    if (ran !== null) this.#runSeconds.observe({ status: job.status }, ran);
    if (job.status === 'completed' && job.callback_of) this.#callbacksDelivered.inc(job.callback_of.length);
  }
}
