import { isTerminal, JobStatuses, JobTypes, TERMINAL_STATUSES, type LifecycleEvent } from '@agentq/protocol';
import { jobFactsOf, type JobFacts } from '../core/store/lazy-events.js';
import { Counter, Gauge, type Registry } from 'prom-client';
import { LeanHistogram } from './lean-histogram.js';
import type { MetricsSource, ScrapeCounts } from './source.js';

/** Seconds between two times (ms), or null when one is missing (or time ran backwards). */
function between(from: number | null, to: number | null): number | null {
  if (from === null || to === null) return null;
  const seconds = (to - from) / 1000;
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : null;
}

/**
 * The job metrics, all derived from lifecycle events. A job's life is cut in three histograms
 * that add up: time in queue (created or requeued -> claimed), dispatch (claimed -> the
 * launcher reports its executor started) and run time (started -> terminal status).
 */
export class JobMetrics {
  /** jobs put back in the queue and not claimed again: their time in queue starts there */
  readonly #requeuedAt = new Map<string, number>();
  readonly #unsubscribe: () => void;

  readonly #created: Counter<'type'>;
  readonly #endedTotal: Counter<'status'>;
  readonly #queueSeconds: LeanHistogram;
  readonly #dispatchSeconds: LeanHistogram;
  readonly #runSeconds: LeanHistogram<'status'>;
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
    this.#queueSeconds = new LeanHistogram({
      name: 'agentq_job_queue_seconds',
      help: 'Time a job waited in the queue: from its creation (or its return to the queue) to its claim by a launcher.',
      buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600],
      registers,
    });
    this.#dispatchSeconds = new LeanHistogram({
      name: 'agentq_job_dispatch_seconds',
      help: 'Dispatch latency: from a job being handed to a launcher to the launcher reporting its executor started.',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.#runSeconds = new LeanHistogram({
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
    // the row's fields, not the event's wire view (lazy-events.ts)
    const job = jobFactsOf(event);
    if (!job) return;
    switch (event.type) {
      case 'job.created':
        this.#created.inc({ type: job.type });
        break;
      case 'job.claimed': {
        const waited = between(this.#requeuedAt.get(job.id) ?? job.createdAt, job.claimedAt);
        this.#requeuedAt.delete(job.id);
        if (waited !== null) this.#queueSeconds.observe(waited);
        break;
      }
      case 'job.requeued':
        this.#requeuedAt.set(job.id, Date.parse(event.at));
        break;
      case 'job.started': {
        const dispatch = between(job.claimedAt, job.startedAt);
        if (dispatch !== null) this.#dispatchSeconds.observe(dispatch);
        break;
      }
      default:
        break;
    }
    if (event.type !== 'job.evicted' && isTerminal(job.status) && event.type === `job.${job.status}`) this.#terminal(job);
  }

  /** A job reached its terminal status (its one `job.<status>` event). */
  #terminal(job: JobFacts): void {
    this.#requeuedAt.delete(job.id);
    this.#endedTotal.inc({ status: job.status });
    const ran = between(job.startedAt, job.completedAt);
    if (ran !== null) this.#runSeconds.observe({ status: job.status }, ran);
    if (job.status === 'completed' && job.callbackOf) this.#callbacksDelivered.inc(job.callbackOf.length);
  }
}
