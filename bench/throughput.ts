/**
 * Throughput benchmark (`npm run bench:throughput`): a real coordinator process, launcher loops
 * and a producer over HTTP (see lib/agentq.ts for the exact request pattern).
 *
 * For the memory store and the SQLite store (a fresh file each time), and for each protocol:
 *   - jobs/s: BENCH_JOBS no-op jobs created while BENCH_LAUNCHERS launcher loops run them
 *   - the coordinator's CPU time per job (user + system; it hardly moves when other work shares
 *     the machine, unlike jobs/s)
 *   - the coordinator's RSS before and after (memory kept per finished job)
 * then, on the memory store:
 *   - dispatch latency (POST /jobs -> a parked launcher has the job), both protocols
 *   - BENCH_PARKED launchers each with a long-poll parked, and the coordinator's RSS
 *
 * Environment: BENCH_JOBS (20000), BENCH_LAUNCHERS (8), BENCH_CAPACITY (8, slots per launcher in
 * the batched protocol), BENCH_PRODUCERS (8, creates in flight in the single-job protocol),
 * BENCH_BATCH (500, jobs per POST /jobs/batch), BENCH_LATENCY_JOBS (3000), BENCH_PARKED (10000),
 * BENCH_ONLY=throughput|latency|parked, BENCH_STORES=memory,sqlite, and LOG_LEVEL for the
 * coordinator (default info, its log written to a file).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dispatchLatency, parkPolls, throughput, type Protocol } from './lib/agentq.js';
import { startCoordinatorProcess } from './lib/process.js';
import { env, kb, latencyOf, mb, ms, rate } from './lib/stats.js';

const JOBS = env('BENCH_JOBS', 20_000);
const LAUNCHERS = env('BENCH_LAUNCHERS', 8);
const CAPACITY = env('BENCH_CAPACITY', 8);
const PRODUCERS = env('BENCH_PRODUCERS', 8);
const BATCH = env('BENCH_BATCH', 500);
const LATENCY_JOBS = env('BENCH_LATENCY_JOBS', 3000);
const PARKED = env('BENCH_PARKED', 10_000);
const ONLY = process.env.BENCH_ONLY;
const STORES = (process.env.BENCH_STORES ?? 'memory,sqlite').split(',');
const coordinatorEnv = { LOG_LEVEL: process.env.LOG_LEVEL ?? 'info' };

async function withStore<T>(store: string, fn: (url: string) => Promise<T>): Promise<T> {
  if (store === 'memory') return fn('memory:');
  const dir = mkdtempSync(join(tmpdir(), 'agentq-bench-db-'));
  try {
    return await fn(`sqlite:${join(dir, 'agentq.db')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function throughputTable(): Promise<void> {
  console.log(`\n## Throughput: ${JOBS.toLocaleString('en-US')} no-op jobs, ${LAUNCHERS} launcher loops`);
  console.log(`single: POST /jobs (${PRODUCERS} in flight), GET /launcher/jobs + started + completed per job`);
  console.log(`batched: POST /jobs/batch (${BATCH} per request), POST /launcher/sync with ${CAPACITY} slots per launcher\n`);
  console.log('| store | protocol | jobs/s | seconds | requests | coordinator CPU per job | RSS before | RSS after | RSS per finished job |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const store of STORES) {
    for (const protocol of ['single', 'batched'] as Protocol[]) {
      await withStore(store, async (databaseUrl) => {
        const server = await startCoordinatorProcess(databaseUrl, coordinatorEnv);
        try {
          const before = server.rssBytes();
          const cpu = server.cpuMs();
          const r = await throughput({ url: server.url, jobs: JOBS, launchers: LAUNCHERS, capacity: CAPACITY, producers: PRODUCERS, batch: BATCH }, protocol);
          // let the last answers and the sweeper settle before reading memory
          await new Promise((resolve) => setTimeout(resolve, 1500));
          const cpuPerJob = ((server.cpuMs() - cpu) * 1000) / r.jobs;
          const after = server.rssBytes();
          console.log(
            `| ${store} | ${protocol} | ${rate(r.jobsPerSecond)} | ${r.seconds.toFixed(2)} | ${r.requests.toLocaleString('en-US')} | ${cpuPerJob.toFixed(0)} µs | ${mb(before)} | ${mb(after)} | ${kb((after - before) / r.jobs)} |`,
          );
        } finally {
          await server.stop();
        }
      });
    }
  }
}

async function latencyTable(): Promise<void> {
  console.log(`\n## Dispatch latency: POST /jobs -> a parked launcher has the job (${LATENCY_JOBS} jobs after 200 warm-up, 4 launchers)\n`);
  console.log('| store | launchers park on | p50 | p90 | p99 | max |');
  console.log('|---|---|---|---|---|---|');
  for (const store of STORES) {
    for (const protocol of ['single', 'batched'] as Protocol[]) {
      await withStore(store, async (databaseUrl) => {
        const server = await startCoordinatorProcess(databaseUrl, coordinatorEnv);
        try {
          const l = latencyOf(await dispatchLatency({ url: server.url, jobs: LATENCY_JOBS, warmup: 200, launchers: 4 }, protocol));
          const park = protocol === 'single' ? 'GET /launcher/jobs' : 'POST /launcher/sync';
          console.log(`| ${store} | ${park} | ${ms(l.p50)} | ${ms(l.p90)} | ${ms(l.p99)} | ${ms(l.max)} |`);
        } finally {
          await server.stop();
        }
      });
    }
  }
}

async function parkedTable(): Promise<void> {
  console.log(`\n## ${PARKED.toLocaleString('en-US')} launchers, each with a long-poll parked (memory store)\n`);
  const server = await startCoordinatorProcess('memory:', { ...coordinatorEnv, LAUNCHER_POLL_TIMEOUT: '300' });
  try {
    const idle = server.rssBytes();
    const parked = await parkPolls(server.url, PARKED);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const held = server.rssBytes();
    await parked.release();
    console.log('| RSS idle | RSS with the polls parked | per parked poll |');
    console.log('|---|---|---|');
    console.log(`| ${mb(idle)} | ${mb(held)} | ${kb((held - idle) / PARKED)} |`);
  } finally {
    await server.stop();
  }
}

console.log(`# throughput benchmark — node ${process.version}, ${new Date().toISOString()}, coordinator LOG_LEVEL=${coordinatorEnv.LOG_LEVEL}`);
if (!ONLY || ONLY === 'throughput') await throughputTable();
if (!ONLY || ONLY === 'latency') await latencyTable();
if (!ONLY || ONLY === 'parked') await parkedTable();
