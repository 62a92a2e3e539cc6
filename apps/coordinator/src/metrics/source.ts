import type { Job, LifecycleEvent } from '@agentq/protocol';
import type { Coordinator } from '../core/coordinator.js';

/**
 * Everything the metrics read from the coordinator's core, and nothing more: lifecycle events
 * as they happen, a few counts at scrape time, and the jobs that already exist when the
 * metrics start. The core is rewritten behind a Store seam; this interface is the whole
 * contract the metrics depend on (see `coordinatorSource` for how the current core fills it).
 */
export interface MetricsSource {
  /** lifecycle events (`core.events.subscribe`); returns the unsubscribe function */
  subscribe(listener: (event: LifecycleEvent) => void): () => void;
  /** counts read at every scrape (the numbers of `GET /health`) */
  counts(): ScrapeCounts;
  /** jobs that exist before the subscription (a restored journal, a core kept across apps) */
  existingJobs(): Iterable<ExistingJob>;
}

export type ExistingJob = Pick<Job, 'job_id' | 'status' | 'created_at'>;

export interface ScrapeCounts {
  /** pending jobs */
  queueDepth: number;
  /**
   * Pending jobs per routing key, once the core routes jobs. When given, `agentq_queue_depth`
   * is exported per `routing_key` instead of as one unlabelled total.
   */
  queueDepthByKey?: Iterable<readonly [routingKey: string, pending: number]>;
  launchers: { online: number; stale: number };
  /** launcher long-polls parked on the server */
  parkedPolls: number;
}

/** The source for the current core: `events.subscribe`, `health()` and `listJobs()`. */
export function coordinatorSource(core: Coordinator, startedAt: number): MetricsSource {
  return {
    subscribe: (listener) => core.events.subscribe(listener),
    counts() {
      const health = core.health(startedAt);
      return {
        queueDepth: health.queue_depth,
        launchers: { online: health.launchers.online, stale: health.launchers.stale },
        parkedPolls: health.launchers.parked_polls,
      };
    },
    *existingJobs() {
      let cursor: number | undefined;
      do {
        const page = core.listJobs({ limit: 1000, cursor });
        yield* page.jobs;
        cursor = page.next_cursor === null ? undefined : Number(page.next_cursor);
      } while (cursor !== undefined);
    },
  };
}
