import type { JobStatus, LifecycleEvent } from '@agentq/protocol';
import type { Coordinator } from '../core/coordinator.js';

/**
 * Everything the metrics read from the coordinator's core, and nothing more: lifecycle events
 * as they happen, and counts read from the store at scrape time (so they are right whatever
 * coordinator made the change, and after a restart).
 */
export interface MetricsSource {
  /** lifecycle events (`core.events.subscribe`); returns the unsubscribe function */
  subscribe(listener: (event: LifecycleEvent) => void): () => void;
  /** counts read at every scrape */
  counts(): Promise<ScrapeCounts>;
}

export interface ScrapeCounts {
  /** pending jobs */
  queueDepth: number;
  /**
   * Ready jobs per routing key. When given, `agentq_queue_depth` is exported per `routing_key`
   * (jobs waiting behind a busy session are under `routing_key=""`).
   */
  queueDepthByKey?: Iterable<readonly [routingKey: string, pending: number]>;
  /** jobs the store holds, by status */
  jobsByStatus: Partial<Record<JobStatus, number>>;
  launchers: { online: number; stale: number };
  /** launcher long-polls parked on this coordinator */
  parkedPolls: number;
}

/** The source for the core: `events.subscribe` and `metricsCounts()`. */
export function coordinatorSource(core: Coordinator): MetricsSource {
  return {
    subscribe: (listener) => core.events.subscribe(listener),
    counts: () => core.metricsCounts(),
  };
}
