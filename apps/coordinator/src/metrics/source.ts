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

/**
 * What a pending job waits for, as `pending_reason` tells it (docs/routing.md): a free slot on an
 * online launcher that can take it, an online launcher that can take it at all, or its session
 * (busy, or older jobs of it first). A fixed set, unlike routes: those are made of user input
 * (required labels, project directories, session hosts), one series each would be unbounded.
 */
export const QueueWaits = ['free_slot', 'matching_launcher', 'session'] as const;
export type QueueWait = (typeof QueueWaits)[number];

export interface ScrapeCounts {
  /** pending jobs */
  queueDepth: number;
  /** pending jobs by what they wait for (they add up to `queueDepth`) */
  pendingByWait: Record<QueueWait, number>;
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
