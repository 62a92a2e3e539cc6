/**
 * agentq beside BullMQ + Redis (`npm run bench:compare`): the same workload, in the same run, one
 * table. The ratio is the result: absolute numbers move from run to run on a shared machine.
 *
 * Needs redis-server (Debian: `apt-get install -y redis-server`); this script installs nothing and
 * says so when it is missing. The agentq coordinator runs on the memory store (DATABASE_URL=memory:)
 * as Redis runs without persistence (no RDB, no AOF), and then on SQLite (a fresh file per run,
 * every change committed before it is answered), the default store.
 *
 * Each round runs agentq then BullMQ; the table shows the median of BENCH_ROUNDS rounds (3).
 * Environment: as bench/throughput.ts (BENCH_JOBS, BENCH_LAUNCHERS, BENCH_CAPACITY,
 * BENCH_PRODUCERS, BENCH_BATCH, BENCH_LATENCY_JOBS, BENCH_LATENCY_WARMUP), plus BENCH_CONCURRENCY
 * (8, the BullMQ worker's concurrency) and BENCH_ROUNDS.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dispatchLatency, throughput, type Protocol } from './lib/agentq.js';
import { bullLatency, bullThroughput } from './lib/bullmq.js';
import { startCoordinatorProcess, startRedis } from './lib/process.js';
import { env, latencyOf, median, ms, rate, type Latency } from './lib/stats.js';

const JOBS = env('BENCH_JOBS', 20_000);
const LAUNCHERS = env('BENCH_LAUNCHERS', 8);
const CAPACITY = env('BENCH_CAPACITY', 8);
const PRODUCERS = env('BENCH_PRODUCERS', 8);
const BATCH = env('BENCH_BATCH', 500);
const CONCURRENCY = env('BENCH_CONCURRENCY', 8);
const LATENCY_JOBS = env('BENCH_LATENCY_JOBS', 3000);
const LATENCY_WARMUP = env('BENCH_LATENCY_WARMUP', 2000);
const ROUNDS = env('BENCH_ROUNDS', 3);
const coordinatorEnv = { LOG_LEVEL: process.env.LOG_LEVEL ?? 'info' };

const redis = await startRedis();
if (!redis) {
  console.log('redis-server is not installed: the BullMQ side of the comparison cannot run.');
  console.log('Install it (Debian/Ubuntu: apt-get install -y redis-server), then run npm run bench:compare again.');
  console.log('npm run bench:throughput measures agentq alone.');
  process.exit(0);
}

interface Round {
  single: number;
  batched: number;
  latency: Latency;
  /** agentq on SQLite (the BullMQ rounds leave them 0) */
  sqliteSingle: number;
  sqliteBatched: number;
}

/** Jobs/s of one protocol on a fresh coordinator with the store `databaseUrl` names. */
async function agentqRun(databaseUrl: string, protocol: Protocol): Promise<number> {
  const server = await startCoordinatorProcess(databaseUrl, coordinatorEnv);
  try {
    const r = await throughput({ url: server.url, jobs: JOBS, launchers: LAUNCHERS, capacity: CAPACITY, producers: PRODUCERS, batch: BATCH }, protocol);
    return r.jobsPerSecond;
  } finally {
    await server.stop();
  }
}

async function agentqRound(): Promise<Round> {
  const single = await agentqRun('memory:', 'single');
  const batched = await agentqRun('memory:', 'batched');
  const dir = mkdtempSync(join(tmpdir(), 'agentq-compare-'));
  let sqliteSingle: number;
  let sqliteBatched: number;
  try {
    sqliteSingle = await agentqRun(`sqlite:${join(dir, 'single.db')}`, 'single');
    sqliteBatched = await agentqRun(`sqlite:${join(dir, 'batched.db')}`, 'batched');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const server = await startCoordinatorProcess('memory:', coordinatorEnv);
  try {
    const { samples } = await dispatchLatency({ url: server.url, jobs: LATENCY_JOBS, warmup: LATENCY_WARMUP, launchers: 4 }, 'single');
    const latency = latencyOf(samples.map((x) => x.ms));
    return { single, batched, latency, sqliteSingle, sqliteBatched };
  } finally {
    await server.stop();
  }
}

async function bullRound(port: number): Promise<Round> {
  const o = { port, jobs: JOBS, concurrency: CONCURRENCY, producers: PRODUCERS, batch: BATCH };
  const single = (await bullThroughput(o, 'single')).jobsPerSecond;
  const batched = (await bullThroughput(o, 'batched')).jobsPerSecond;
  const latency = latencyOf(await bullLatency({ port, jobs: LATENCY_JOBS, warmup: LATENCY_WARMUP, concurrency: CONCURRENCY }));
  return { single, batched, latency, sqliteSingle: 0, sqliteBatched: 0 };
}

console.log(`# agentq vs BullMQ + Redis — node ${process.version}, ${new Date().toISOString()}`);
console.log(`${JOBS.toLocaleString('en-US')} no-op jobs per run, median of ${ROUNDS} rounds; coordinator LOG_LEVEL=${coordinatorEnv.LOG_LEVEL}, memory store (and SQLite where it says)`);
console.log(`agentq: ${LAUNCHERS} launcher loops (batched: ${CAPACITY} slots each); BullMQ: one worker, concurrency ${CONCURRENCY}`);
const ours: Round[] = [];
const theirs: Round[] = [];
try {
  for (let i = 0; i < ROUNDS; i++) {
    ours.push(await agentqRound());
    theirs.push(await bullRound(redis.port));
    const a = ours[i]!;
    const b = theirs[i]!;
    console.log(
      `round ${i + 1}: agentq ${rate(a.single)} / ${rate(a.batched)} jobs/s, BullMQ ${rate(b.single)} / ${rate(b.batched)} jobs/s (single / batched)`,
    );
  }
} finally {
  await redis.stop();
}

const m = (rounds: Round[], f: (r: Round) => number) => median(rounds.map(f));
const row = (what: string, f: (r: Round) => number, show: (x: number) => string, higherIsBetter: boolean) => {
  const a = m(ours, f);
  const b = m(theirs, f);
  const ratio = higherIsBetter ? a / b : b / a;
  console.log(`| ${what} | ${show(a)} | ${show(b)} | ${ratio.toFixed(2)}× |`);
};
console.log('\n| measure | agentq | BullMQ + Redis | agentq / BullMQ |');
console.log('|---|---|---|---|');
row('jobs/s, one job per request (POST /jobs; poll, started, completed | add)', (r) => r.single, rate, true);
row(`jobs/s, batched (POST /jobs/batch; POST /launcher/sync | addBulk)`, (r) => r.batched, rate, true);
// SQLite beside the same BullMQ rounds
const sqliteRow = (what: string, f: (r: Round) => number, g: (r: Round) => number) => {
  const a = m(ours, f);
  const b = m(theirs, g);
  console.log(`| ${what} | ${rate(a)} | ${rate(b)} | ${(a / b).toFixed(2)}× |`);
};
sqliteRow('jobs/s, one job per request, agentq on SQLite', (r) => r.sqliteSingle, (r) => r.single);
sqliteRow('jobs/s, batched, agentq on SQLite', (r) => r.sqliteBatched, (r) => r.batched);
row('dispatch latency p50 (lower is better; ratio BullMQ / agentq)', (r) => r.latency.p50, ms, false);
row('dispatch latency p99 (lower is better; ratio BullMQ / agentq)', (r) => r.latency.p99, ms, false);
