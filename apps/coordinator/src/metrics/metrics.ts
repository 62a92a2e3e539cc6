import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { LeanHistogram } from './lean-histogram.js';
import { JobMetrics } from './job-metrics.js';
import { registerProtectionMetrics, type ProtectionSource } from './protection-metrics.js';
import { QueueWaits, type MetricsSource, type ScrapeCounts } from './source.js';

export interface MetricsOptions {
  /** open `GET /events` streams, read at scrape time */
  sseClients: () => number;
  /** what the limits refused, dropped and cut (protection-metrics.ts) */
  protection?: ProtectionSource;
}

/**
 * The Prometheus metrics of one coordinator app, in a registry of its own: several apps in one
 * process (tests, embedding) never share or collide. prom-client adds a metric to its global
 * registry unless told otherwise, so every metric here names `registers` explicitly.
 *
 * Event-driven metrics live in JobMetrics; the rest are gauges read from the source when
 * Prometheus scrapes, so they cannot drift from the core's own numbers.
 */
export class CoordinatorMetrics {
  readonly registry = new Registry();
  /**
   * The gauges read from the store, scraped apart: with the database out of reach a scrape leaves
   * them out and still answers with the rest (process, event loop, requests, job counters), the
   * moment those matter most. Left out, not 0: a 0 would say the queue is empty.
   */
  readonly #store = new Registry();
  readonly #jobs: JobMetrics;
  readonly #http: LeanHistogram<'method' | 'route' | 'status_code'>;

  constructor(source: MetricsSource, options: MetricsOptions) {
    const registers = [this.registry];
    // one read of the store per scrape, shared by the gauges that need it
    let pending: Promise<ScrapeCounts> | undefined;
    const counts = () => {
      pending ??= source.counts().finally(() => setImmediate(() => (pending = undefined)));
      return pending;
    };
    this.#jobs = new JobMetrics(this.registry, this.#store, source, counts);
    const storeRegisters = [this.#store];
    // one value, 0 when the queue is empty ("no data" would hide an empty queue from alerts and
    // graphs); the breakdown has a fixed label set, never one series per route (source.ts)
    new Gauge({
      name: 'agentq_queue_depth',
      help: 'Pending jobs.',
      registers: storeRegisters,
      async collect() {
        this.set((await counts()).queueDepth);
      },
    });
    new Gauge({
      name: 'agentq_pending_jobs',
      help: 'Pending jobs by what they wait for: free_slot (an online launcher can take them once it has room), matching_launcher (no online launcher can take them), session (their session is busy, or has older jobs queued).',
      labelNames: ['waiting_for'],
      registers: storeRegisters,
      async collect() {
        const { pendingByWait } = await counts();
        for (const waiting_for of QueueWaits) this.set({ waiting_for }, pendingByWait[waiting_for]);
      },
    });
    new Gauge({
      name: 'agentq_launchers',
      help: 'Registered launchers by status: online (includes deregistering) or stale (silent too long).',
      labelNames: ['status'],
      registers: storeRegisters,
      async collect() {
        const { launchers } = await counts();
        this.set({ status: 'online' }, launchers.online);
        this.set({ status: 'stale' }, launchers.stale);
      },
    });
    new Gauge({
      name: 'agentq_parked_polls',
      help: 'Launcher long-polls (GET /launcher/jobs) parked on the server, waiting for work.',
      registers: storeRegisters,
      async collect() {
        this.set((await counts()).parkedPolls);
      },
    });
    new Gauge({
      name: 'agentq_sse_clients',
      help: 'Open GET /events streams.',
      registers,
      collect() {
        this.set(options.sseClients());
      },
    });
    if (options.protection) registerProtectionMetrics(this.registry, options.protection);
    this.#http = new LeanHistogram({
      name: 'agentq_http_request_duration_seconds',
      help: 'HTTP request durations by method, route pattern (unmatched: no route, or a URL the router refuses) and status code (long-polls are held up to their timeout).',
      labelNames: ['method', 'route', 'status_code'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    // CPU, memory, handles, GC and nodejs_eventloop_lag_seconds, under their standard names so
    // the usual Node.js dashboards work unchanged. (Each registry runs its own event-loop delay
    // monitor and GC observer: measured, 200 idle registries in one process cost under 2% of
    // one core.)
    collectDefaultMetrics({ register: this.registry });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The text exposition format, for `GET /metrics`. */
  async exposition(): Promise<string> {
    const [own, store] = await Promise.all([this.registry.metrics(), this.#store.metrics().catch(() => undefined)]);
    return store === undefined ? own : `${own}\n${store}`;
  }

  /** `route` is the route's pattern (`/jobs/:job_id`), never the raw URL: ids would explode the label set. */
  observeRequest(method: string, route: string, statusCode: number, seconds: number): void {
    this.#http.observe({ method, route, status_code: String(statusCode) }, seconds);
  }

  close(): void {
    this.#jobs.close();
  }
}
