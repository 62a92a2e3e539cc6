/**
 * Where a latency tail comes from: the garbage-collection pauses of a process, on the system's
 * monotonic clock (`monotonicMs`, the same in every process of the machine), so that pauses of
 * the coordinator and of the benchmark's own process can be laid beside the samples.
 * `node --import <this file>` records the process it is loaded into and writes its pauses to
 * $AGENTQ_BENCH_GC_FILE when the process exits; the bench process records itself with `recordGc()`.
 */
import { writeFileSync } from 'node:fs';
import { constants, PerformanceObserver, performance, type PerformanceEntry } from 'node:perf_hooks';

/**
 * `performance.now()` readings of this process on the system-wide monotonic clock (CLOCK_MONOTONIC,
 * in ms): `performance.timeOrigin` comes from the wall clock, which may be stepped between two
 * processes' starts.
 */
const ORIGIN = Number(process.hrtime.bigint()) / 1e6 - performance.now();
export const monotonicMs = (performanceNow: number): number => ORIGIN + performanceNow;

export interface GcPause {
  /** start, on the monotonic clock (monotonicMs) */
  at: number;
  ms: number;
  kind: 'minor' | 'major' | 'incremental' | 'weak';
}

const KINDS: Record<number, GcPause['kind']> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak',
};

/** Record this process's GC pauses from now on; `pauses` grows as they come. */
export function recordGc(): { pauses: GcPause[]; stop: () => void } {
  const pauses: GcPause[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries() as (PerformanceEntry & { detail?: { kind?: number } })[]) {
      pauses.push({ at: monotonicMs(e.startTime), ms: e.duration, kind: KINDS[e.detail?.kind ?? 0] ?? 'minor' });
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  return { pauses, stop: () => observer.disconnect() };
}

/** A sample that overlaps one of `pauses` (both on the monotonic clock). */
export function overlapsPause(sample: { at: number; ms: number }, pauses: readonly GcPause[]): boolean {
  return pauses.some((p) => p.at < sample.at + sample.ms && p.at + p.ms > sample.at);
}

// loaded with --import into another process (the coordinator): record it, write at exit
const file = process.env.AGENTQ_BENCH_GC_FILE;
if (file) {
  const { pauses } = recordGc();
  process.on('exit', () => writeFileSync(file, JSON.stringify(pauses)));
}
