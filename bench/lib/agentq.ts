import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { AgentqClient } from '@agentq/client';
import type { CreateJobRequest, Job, SyncReport } from '@agentq/protocol';
import { monotonicMs } from './gc-trace.js';

/*
 * The agentq side of the workloads: a producer and launcher loops, in this process, talking to a
 * coordinator process over HTTP with the project's client. Jobs are no-ops: a launcher loop
 * reports each one started and then completed, as a launcher running an executor that exits at
 * once would.
 */

export type Protocol = 'single' | 'batched';

export interface ThroughputOptions {
  url: string;
  jobs: number;
  /** launcher loops, each registered as its own launcher */
  launchers: number;
  /** batched: the slots of each launcher (what it asks for); single: always 1 */
  capacity: number;
  /** single: create requests in flight at once */
  producers: number;
  /** batched: jobs per `POST /jobs/batch` */
  batch: number;
  /** session names are `<prefix>-<n>` (default t): several runs on one coordinator need their own */
  prefix?: string;
}

export interface ThroughputResult {
  jobs: number;
  seconds: number;
  jobsPerSecond: number;
  requests: number;
}


/**
 * N jobs through the coordinator: the clock runs from the first create until the last job is
 * reported completed. The producer creates while the launchers work.
 *
 * single: the seed's protocol. `POST /jobs` one job each (`producers` in flight); each launcher
 * loop long-polls `GET /launcher/jobs` (capacity 1), then `POST .../started`, `POST .../completed`.
 *
 * batched: `POST /jobs/batch` (`batch` jobs each); each launcher loop runs `POST /launcher/sync`
 * as the launcher does: it asks for its free slots, reports `started` for the jobs it received,
 * "runs" them once that is acknowledged (a no-op), and reports them `completed` in the next sync,
 * which also asks for new work.
 */
export async function throughput(o: ThroughputOptions, protocol: Protocol): Promise<ThroughputResult> {
  const job = (i: number): CreateJobRequest => ({ type: 'start_session', session_name: `${o.prefix ?? 't'}-${i}`, prompt: 'noop' });
  const producer = new AgentqClient({ url: o.url, connections: Math.max(4, o.producers) });
  const clients = Array.from({ length: o.launchers }, () => new AgentqClient({ url: o.url, connections: 2 }));
  const ids = await Promise.all(clients.map((c) => c.register({ hostname: 'bench', max_jobs: o.capacity }).then((r) => r.launcher_id)));
  const stop = new AbortController();
  setMaxListeners(0, stop.signal); // every request of every loop listens to it
  let completed = 0;
  let requests = 0;
  let finished: () => void = () => {};
  const allDone = new Promise<void>((resolve) => (finished = resolve));
  const done = (n: number) => {
    completed += n;
    if (completed >= o.jobs) {
      finished();
      stop.abort();
    }
  };

  const single = async (client: AgentqClient, id: string) => {
    while (!stop.signal.aborted) {
      const answer = await client.poll(id, { capacity: 1, holdSeconds: 30, signal: stop.signal }).catch(ignoreAbort);
      requests++;
      const j = answer?.job;
      if (!j) continue;
      await client.reportStarted(j.job_id, { launcher_id: id });
      await client.reportCompleted(j.job_id, { launcher_id: id, status: 'success', result: null });
      requests += 2;
      done(1);
    }
  };

  const batched = async (client: AgentqClient, id: string) => {
    let received: Job[] = []; // handed to us: to report started
    let ran: Job[] = []; // started and run (no-op): to report completed
    while (!stop.signal.aborted) {
      const reports: SyncReport[] = [
        ...ran.map((j): SyncReport => ({ job_id: j.job_id, kind: 'completed', status: 'success', result: null })),
        ...received.map((j): SyncReport => ({ job_id: j.job_id, kind: 'started' })),
      ];
      // jobs received but not yet started hold their slots; ran ones have exited
      const capacity = o.capacity - received.length;
      const res = await client.sync({ launcher_id: id, capacity, reports }, { holdSeconds: 30, signal: stop.signal }).catch(ignoreAbort);
      requests++;
      if (!res) continue;
      for (const r of res.results) if (!r.ok) throw new Error(`report refused: ${JSON.stringify(r)}`);
      const finishedNow = ran.length;
      ran = received;
      received = res.jobs;
      if (finishedNow > 0) done(finishedNow);
    }
  };

  const loops = clients.map((c, i) => (protocol === 'single' ? single : batched)(c, ids[i]!));
  const t0 = performance.now();
  let next = 0;
  const produce = async () => {
    if (protocol === 'single') {
      await Promise.all(
        Array.from({ length: o.producers }, async () => {
          while (next < o.jobs) {
            await producer.createJob(job(next++));
            requests++;
          }
        }),
      );
    } else {
      while (next < o.jobs) {
        const n = Math.min(o.batch, o.jobs - next);
        await producer.createJobs(Array.from({ length: n }, () => job(next++)));
        requests++;
      }
    }
  };
  await Promise.all([produce(), allDone]);
  const seconds = (performance.now() - t0) / 1000;
  await Promise.allSettled(loops);
  await Promise.all([producer.close(), ...clients.map((c) => c.destroy())]);
  return { jobs: completed, seconds, jobsPerSecond: completed / seconds, requests };
}

/** One dispatch: when its `POST /jobs` was sent (gc-trace.ts `monotonicMs`) and how long until a launcher had the job. */
export interface DispatchSample {
  at: number;
  ms: number;
}

/**
 * Dispatch latency: `launchers` loops keep a long-poll parked, one producer creates jobs one at a
 * time; for each job, the time from just before `POST /jobs` is sent until a parked poll returns
 * it. The first `warmup` jobs are kept apart (`warmup`): the coordinator's code is still being
 * compiled then. `protocol` decides what the launchers park: `GET /launcher/jobs` (single) or
 * `POST /launcher/sync` (batched).
 */
export async function dispatchLatency(
  o: { url: string; jobs: number; warmup: number; launchers: number; prefix?: string },
  protocol: Protocol,
): Promise<{ samples: DispatchSample[]; warmup: DispatchSample[] }> {
  const client = new AgentqClient({ url: o.url, connections: o.launchers + 4 });
  // when each job reached a launcher (it may be before POST /jobs has answered: a create answers
  // once its dispatch to a parked launcher is done)
  const receivedAt = new Map<string, number>();
  const samples: DispatchSample[] = [];
  const warmup: DispatchSample[] = [];
  let expecting: ((id: string) => void) | undefined;
  const stop = new AbortController();
  setMaxListeners(0, stop.signal);
  const loop = async () => {
    const { launcher_id } = await client.register({ hostname: 'bench' });
    while (!stop.signal.aborted) {
      const got =
        protocol === 'single'
          ? ((await client.poll(launcher_id, { holdSeconds: 30, signal: stop.signal }).catch(ignoreAbort))?.job ?? null)
          : ((await client.sync({ launcher_id, capacity: 1, reports: [] }, { holdSeconds: 30, signal: stop.signal }).catch(ignoreAbort))?.jobs[0] ??
            null);
      if (!got) continue;
      receivedAt.set(got.job_id, performance.now());
      expecting?.(got.job_id);
    }
  };
  const loops = Array.from({ length: o.launchers }, loop);
  while ((await client.health()).launchers.parked_polls < o.launchers) await new Promise((r) => setTimeout(r, 10));
  for (let i = 0; i < o.jobs + o.warmup; i++) {
    const delivered = new Promise<string>((resolve) => (expecting = resolve));
    const t0 = performance.now();
    const created = await client.createJob({ type: 'start_session', session_name: `${o.prefix ?? 'lat'}-${i}`, prompt: 'x' });
    const got = await delivered;
    if (got !== created.job_id) throw new Error(`expected ${created.job_id}, got ${got}`);
    (i < o.warmup ? warmup : samples).push({ at: monotonicMs(t0), ms: receivedAt.get(got)! - t0 });
    receivedAt.delete(got);
  }
  stop.abort();
  await Promise.allSettled(loops);
  await client.destroy();
  return { samples, warmup };
}

/**
 * `count` requests like a launcher's parked poll (`POST /launcher/sync` without reports) to a
 * server that answers none (bench/raw-server.ts): the same connections and requests, nothing
 * else. Resolves once the server has them all (its RSS stops moving), with a release function.
 */
export async function parkRaw(url: string, count: number, rss: () => number): Promise<{ release: () => Promise<void> }> {
  const client = new AgentqClient({ url, connections: count + 8, headersTimeoutMs: 120_000 });
  const stop = new AbortController();
  setMaxListeners(0, stop.signal);
  const body = { launcher_id: 'lnch_0123456789ab', capacity: 1, reports: [] };
  const polls = Array.from({ length: count }, () => client.sync(body, { holdSeconds: 300, signal: stop.signal }).catch(() => null));
  // no signal says a bare server has read them all: wait until its memory stops growing
  for (let last = -1, now = rss(); now !== last; last = now, now = rss()) await new Promise((r) => setTimeout(r, 1000));
  return {
    release: async () => {
      stop.abort();
      await Promise.allSettled(polls);
      await client.destroy();
    },
  };
}

/**
 * `count` launchers each with a long-poll parked on the coordinator, all at once; resolves once
 * they are all parked, with a function that lets them go.
 */
export async function parkPolls(url: string, count: number): Promise<{ release: () => Promise<void> }> {
  const client = new AgentqClient({ url, connections: count + 8, headersTimeoutMs: 120_000 });
  const ids: string[] = [];
  for (let i = 0; i < count; i += 100) {
    const n = Math.min(100, count - i);
    ids.push(...(await Promise.all(Array.from({ length: n }, () => client.register({ hostname: 'parked' }).then((r) => r.launcher_id)))));
  }
  const stop = new AbortController();
  setMaxListeners(0, stop.signal);
  // as the launcher parks: a sync without reports
  const polls = ids.map((id) => client.sync({ launcher_id: id, capacity: 1, reports: [] }, { holdSeconds: 300, signal: stop.signal }).catch(ignoreAbort));
  while ((await client.health()).launchers.parked_polls < count) await new Promise((r) => setTimeout(r, 50));
  return {
    release: async () => {
      stop.abort();
      await Promise.allSettled(polls);
      await client.destroy();
    },
  };
}

function ignoreAbort(err: unknown): null {
  if (err instanceof Error && (err.name === 'AbortError' || /abort/i.test(err.message))) return null;
  throw err;
}
