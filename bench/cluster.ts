/**
 * Stores and coordinators side by side (`npm run bench:cluster`): the same measurements, in one
 * run, with the memory store, the SQLite store, PostgreSQL behind one coordinator, and PostgreSQL
 * behind two coordinators (clients on one, launchers on the other).
 *
 * 1. Dispatch latency: LAUNCHERS launchers keep a long-poll parked; one producer creates jobs one
 *    at a time. From just before `POST /jobs` is sent until a parked poll returns that job, over
 *    real HTTP with the project's client. With two coordinators the job is created on A and the
 *    polls are parked on B: the time includes the commit notification from A to B.
 * 2. Throughput: PRODUCERS producers create jobs (`POST /jobs`, one request each) while WORKERS
 *    launchers take them (capacity 4 per poll) and report `started` and `completed` for each: four
 *    requests and four transactions per job. Jobs per second from the first create to the last
 *    completion. With two coordinators, producers and launchers are split across both.
 *
 * Every coordinator runs in its own process. PostgreSQL: a throwaway server started like the
 * tests' (Debian's postgresql package; fsync off, as a disposable server), or BENCH_PG_URL.
 * Environment: BENCH_JOBS (latency, default 1000), BENCH_TOTAL (throughput, default 3000),
 * BENCH_LAUNCHERS (default 4), BENCH_PRODUCERS (default 4), BENCH_WORKERS (default 8), BENCH_STORES
 * (default memory,sqlite,postgres); BENCH_COORDINATOR runs another build's main.js (bench/lib/process.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AgentqClient } from '@agentq/client';
import { postgresUrl } from './lib/postgres.js';
import { QUIET_ENV, startCoordinatorProcess, type ServerProcess } from './lib/process.js';
import { latencyOf, ms } from './lib/stats.js';

const JOBS = Number(process.env.BENCH_JOBS ?? 1000);
const TOTAL = Number(process.env.BENCH_TOTAL ?? 3000);
const LAUNCHERS = Number(process.env.BENCH_LAUNCHERS ?? 4);
const PRODUCERS = Number(process.env.BENCH_PRODUCERS ?? 4);
const WORKERS = Number(process.env.BENCH_WORKERS ?? 8);
const WARMUP = 100;
/** the stores to run (BENCH_STORES=memory,sqlite,postgres: all by default) */
const STORES = new Set((process.env.BENCH_STORES ?? 'memory,sqlite,postgres').split(',').map((s) => s.trim()));

/** p50/p90/p99/max of POST /jobs on `producerUrl` -> a poll parked on `launcherUrl` returns it. */
async function latency(producerUrl: string, launcherUrl: string): Promise<string[]> {
  const producer = new AgentqClient({ url: producerUrl, connections: 4 });
  const launchers = new AgentqClient({ url: launcherUrl, connections: LAUNCHERS + 4 });
  const receivedAt = new Map<string, number>();
  const samples: number[] = [];
  let expecting: ((id: string) => void) | undefined;
  const stop = new AbortController();
  const loop = async () => {
    const { launcher_id } = await launchers.register({ hostname: 'bench' });
    while (!stop.signal.aborted) {
      const answer = await launchers.poll(launcher_id, { holdSeconds: 60, signal: stop.signal }).catch(() => null);
      const job = answer?.job;
      if (!job) continue;
      receivedAt.set(job.job_id, performance.now());
      expecting?.(job.job_id);
    }
  };
  const loops = Array.from({ length: LAUNCHERS }, loop);
  while ((await launchers.health()).launchers.parked_polls < LAUNCHERS) await new Promise((r) => setTimeout(r, 10));
  for (let i = 0; i < JOBS + WARMUP; i++) {
    const delivered = new Promise<string>((resolve) => (expecting = resolve));
    const t0 = performance.now();
    const job = await producer.createJob({ type: 'start_session', session_name: `lat-${i}`, prompt: 'x' });
    const got = await delivered;
    if (got !== job.job_id) throw new Error(`expected ${job.job_id}, got ${got}`);
    // the poll may return the job before POST /jobs answers: the time counts from t0 either way
    if (i >= WARMUP) samples.push(receivedAt.get(job.job_id)! - t0);
  }
  stop.abort();
  await Promise.allSettled(loops);
  await Promise.all([producer.close(), launchers.destroy()]);
  const l = latencyOf(samples);
  return [ms(l.p50), ms(l.p90), ms(l.p99), ms(l.max)];
}

/** Jobs per second, created by producers and run (started, completed) by launchers, end to end. */
async function throughput(urls: string[]): Promise<string> {
  const clients = urls.map((url) => new AgentqClient({ url, connections: PRODUCERS + WORKERS + 4 }));
  const stop = new AbortController();
  let done = 0;
  let finished!: () => void;
  const allDone = new Promise<void>((resolve) => (finished = resolve));
  const worker = async (client: AgentqClient, i: number) => {
    const { launcher_id } = await client.register({ hostname: `worker-${i}` });
    while (!stop.signal.aborted) {
      const answer = await client.poll(launcher_id, { capacity: 4, holdSeconds: 60, signal: stop.signal }).catch(() => null);
      for (const job of answer?.jobs ?? []) {
        await client.reportStarted(job.job_id, { launcher_id });
        await client.reportCompleted(job.job_id, { launcher_id, status: 'success', result: 'ok' });
        if (++done === TOTAL) finished();
      }
    }
  };
  const workers = Array.from({ length: WORKERS }, (_, i) => worker(clients[i % clients.length]!, i));
  let next = 0;
  const t0 = performance.now();
  const producers = Array.from({ length: PRODUCERS }, async (_, p) => {
    const client = clients[p % clients.length]!;
    while (next < TOTAL) await client.createJob({ type: 'start_session', session_name: `tp-${next++}`, prompt: 'x' });
  });
  await Promise.all(producers);
  await allDone;
  const seconds = (performance.now() - t0) / 1000;
  stop.abort();
  await Promise.allSettled(workers);
  await Promise.all(clients.map((c) => c.destroy()));
  return `${Math.round(TOTAL / seconds)} jobs/s`;
}

async function setup(name: string, databaseUrls: string[], run: (servers: ServerProcess[]) => Promise<string[]>): Promise<string> {
  const servers: ServerProcess[] = [];
  for (const url of databaseUrls) servers.push(await startCoordinatorProcess(url, QUIET_ENV));
  try {
    return `| ${name} | ${(await run(servers)).join(' | ')} |`;
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
  }
}

const dir = mkdtempSync(join(tmpdir(), 'agentq-bench-'));
try {
  console.log(`# stores and coordinators — node ${process.version}, ${new Date().toISOString()}`);
  console.log(`latency: ${LAUNCHERS} parked launchers, ${JOBS} jobs after ${WARMUP} warm-up; throughput: ${TOTAL} jobs, ${PRODUCERS} producers, ${WORKERS} launchers (capacity 4)\n`);
  const rows: string[] = [];
  const both = async (servers: ServerProcess[]) => {
    const [a, b] = [servers[0]!, servers[servers.length - 1]!];
    const lat = await latency(a.url, b.url);
    return [...lat, await throughput(servers.map((s) => s.url))];
  };
  if (STORES.has('memory')) rows.push(await setup('memory', ['memory:'], both));
  if (STORES.has('sqlite')) rows.push(await setup('SQLite', [`sqlite:${join(dir, 'agentq.db')}`], both));
  if (STORES.has('postgres')) {
    const pgOne = await postgresUrl();
    rows.push(await setup('PostgreSQL, 1 coordinator', [pgOne], both));
    const pgTwo = await postgresUrl();
    rows.push(await setup('PostgreSQL, 2 coordinators (A creates, B dispatches)', [pgTwo, pgTwo], both));
  }
  console.log('| store | latency p50 | p90 | p99 | max | throughput |\n|---|---|---|---|---|---|');
  for (const row of rows) console.log(row);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
