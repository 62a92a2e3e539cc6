import { performance } from 'node:perf_hooks';
import { Queue, Worker } from 'bullmq';
import type { Protocol, ThroughputResult } from './agentq.js';

/*
 * The same workloads on BullMQ + Redis: a Queue (the producer) and one Worker with
 * `concurrency` slots running a no-op processor, in this process, against redis-server in its own
 * process. BullMQ's defaults otherwise (completed jobs are kept, as agentq keeps its history).
 */

export interface BullOptions {
  port: number;
  jobs: number;
  concurrency: number;
  producers: number;
  batch: number;
}

let queues = 0;

/**
 * N no-op jobs: the clock runs from the first add until the worker has completed the last one.
 * single: `queue.add` (`producers` in flight); batched: `queue.addBulk` (`batch` jobs each).
 */
export async function bullThroughput(o: BullOptions, protocol: Protocol): Promise<ThroughputResult> {
  const name = `bench-${process.pid}-${queues++}`;
  const connection = { host: '127.0.0.1', port: o.port, maxRetriesPerRequest: null };
  const queue = new Queue(name, { connection });
  let completed = 0;
  let finished: () => void = () => {};
  const allDone = new Promise<void>((resolve) => (finished = resolve));
  const worker = new Worker(name, async () => null, { connection, concurrency: o.concurrency });
  worker.on('completed', () => {
    if (++completed >= o.jobs) finished();
  });
  await worker.waitUntilReady();
  const t0 = performance.now();
  let next = 0;
  let requests = 0;
  if (protocol === 'single') {
    await Promise.all(
      Array.from({ length: o.producers }, async () => {
        while (next < o.jobs) {
          await queue.add('noop', { session_name: `t-${next++}`, prompt: 'noop' });
          requests++;
        }
      }),
    );
  } else {
    while (next < o.jobs) {
      const n = Math.min(o.batch, o.jobs - next);
      await queue.addBulk(Array.from({ length: n }, () => ({ name: 'noop', data: { session_name: `t-${next++}`, prompt: 'noop' } })));
      requests++;
    }
  }
  await allDone;
  const seconds = (performance.now() - t0) / 1000;
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  return { jobs: completed, seconds, jobsPerSecond: completed / seconds, requests };
}

/**
 * Dispatch latency: a worker waits for jobs (`concurrency` slots), one producer adds jobs one at a
 * time; for each, the time from just before `queue.add` until the processor has it.
 */
export async function bullLatency(o: { port: number; jobs: number; warmup: number; concurrency: number }): Promise<number[]> {
  const name = `bench-lat-${process.pid}-${queues++}`;
  const connection = { host: '127.0.0.1', port: o.port, maxRetriesPerRequest: null };
  const queue = new Queue(name, { connection });
  const samples: number[] = [];
  let sentAt = 0;
  let expecting: (() => void) | undefined;
  const worker = new Worker(
    name,
    async () => {
      samples.push(performance.now() - sentAt);
      expecting?.();
      return null;
    },
    { connection, concurrency: o.concurrency },
  );
  await worker.waitUntilReady();
  for (let i = 0; i < o.jobs + o.warmup; i++) {
    const delivered = new Promise<void>((resolve) => (expecting = resolve));
    sentAt = performance.now();
    await queue.add('noop', { session_name: `lat-${i}`, prompt: 'x' });
    await delivered;
    if (i === o.warmup - 1) samples.length = 0;
  }
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  return samples;
}
