/**
 * Dispatch benchmark (`npm run bench:dispatch`).
 *
 * 1. Latency: a coordinator runs in its own process; N launchers keep a long-poll parked;
 *    one producer creates jobs one at a time. Measured: from just before `POST /jobs` is sent
 *    to the moment a parked launcher's poll returns that job, both over real HTTP with the
 *    project's client. Reported: p50 / p90 / p99 / max over JOBS jobs.
 * 2. Claim cost: on the core directly (no HTTP), the median cost of a claim while 1,000 vs
 *    1,000,000 jobs are pending, to show claiming does not depend on queue length.
 *
 * Latency is measured twice: with the memory store and with the SQLite store (the default).
 *
 * Environment: BENCH_JOBS (default 3000), BENCH_LAUNCHERS (default 4), BENCH_BIG (default 1000000),
 * BENCH_ONLY=latency|claims to run one part.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AgentqClient } from '@agentq/client';
import { Coordinator, loadConfig } from '@agentq/coordinator';
import { QUIET_ENV, startCoordinatorProcess } from './lib/process.js';
import { latencyOf, median, ms } from './lib/stats.js';

const JOBS = Number(process.env.BENCH_JOBS ?? 3000);
const LAUNCHERS = Number(process.env.BENCH_LAUNCHERS ?? 4);
const BIG = Number(process.env.BENCH_BIG ?? 1_000_000);
const WARMUP = 200;

async function latency(databaseUrl: string): Promise<void> {
  const server = await startCoordinatorProcess(databaseUrl, QUIET_ENV);
  const client = new AgentqClient({ url: server.url, connections: LAUNCHERS + 4 });
  // when each job reached a launcher: it may be before POST /jobs has answered (a create answers
  // once its dispatch to a parked launcher is done), so the sample is taken by the producer
  const receivedAt = new Map<string, number>();
  const samples: number[] = [];
  let expecting: ((id: string) => void) | undefined;
  const stop = new AbortController();

  const launcherLoop = async () => {
    const { launcher_id } = await client.register({ hostname: 'bench' });
    while (!stop.signal.aborted) {
      const answer = await client.poll(launcher_id, { holdSeconds: 60, signal: stop.signal }).catch(() => null);
      const job = answer?.job;
      if (!job) continue;
      receivedAt.set(job.job_id, performance.now());
      expecting?.(job.job_id);
    }
  };
  const loops = Array.from({ length: LAUNCHERS }, launcherLoop);
  // let every launcher park before the first job
  while ((await client.health()).launchers.parked_polls < LAUNCHERS) await new Promise((r) => setTimeout(r, 10));

  for (let i = 0; i < JOBS + WARMUP; i++) {
    const delivered = new Promise<string>((resolve) => (expecting = resolve));
    const t0 = performance.now();
    const job = await client.createJob({ type: 'start_session', session_name: `bench-${i}`, prompt: 'x' });
    const got = await delivered;
    if (got !== job.job_id) throw new Error(`expected ${job.job_id}, got ${got}`);
    if (i >= WARMUP) samples.push(receivedAt.get(got)! - t0);
    receivedAt.delete(got);
  }
  stop.abort();
  await Promise.allSettled(loops);
  await client.close();
  await server.stop();

  const l = latencyOf(samples);
  console.log(`\n## POST /jobs -> parked launcher's poll returns the job (${databaseUrl.startsWith('sqlite:') ? 'SQLite store' : 'memory store'})`);
  console.log(`launchers parked: ${LAUNCHERS}, jobs: ${l.samples} (after ${WARMUP} warm-up)`);
  console.log(`| p50 | p90 | p99 | max |\n|---|---|---|---|`);
  console.log(`| ${ms(l.p50, 3)} | ${ms(l.p90, 3)} | ${ms(l.p99, 3)} | ${ms(l.max, 3)} |`);
}

/**
 * Median cost of one claim with `pending` jobs queued: BATCHES timed batches of BATCH claims,
 * each followed by an untimed refill so the queue stays at `pending`. The median of batches
 * keeps a GC pause (the million-job heap is large) from deciding the result.
 */
async function claimCost(pending: number): Promise<number> {
  const BATCHES = 40;
  const BATCH = 500;
  const config = loadConfig({}, { logLevel: 'silent', eventReplaySize: 0, databaseUrl: 'memory:' });
  const core = await Coordinator.open(config);
  let n = 0;
  const add = async (count: number) => {
    for (let i = 0; i < count; i++) await core.createJob({ type: 'start_session', session_name: `s${n++}`, prompt: 'x' });
  };
  await add(pending);
  const { launcher_id } = await core.register({});
  const signal = new AbortController().signal;
  const perClaim: number[] = [];
  for (let b = 0; b < BATCHES; b++) {
    const t0 = performance.now();
    for (let i = 0; i < BATCH; i++) {
      const answer = await core.poll(launcher_id, 1, signal);
      if (!answer?.job) throw new Error('queue ran dry');
    }
    perClaim.push(((performance.now() - t0) * 1000) / BATCH);
    await add(BATCH);
  }
  return median(perClaim);
}

async function claims(): Promise<void> {
  await claimCost(1000); // warm the JIT so the first measured size is not penalised
  const small = await claimCost(1000);
  const big = await claimCost(BIG);
  console.log(`\n## Claim cost on the core (median of 40 batches of 500 claims, queue kept at size)`);
  console.log(`| pending jobs | µs per claim |\n|---|---|`);
  console.log(`| 1,000 | ${small.toFixed(2)} |`);
  console.log(`| ${BIG.toLocaleString('en-US')} | ${big.toFixed(2)} |`);
  console.log(`ratio: ${(big / small).toFixed(2)}x`);
}

console.log(`# dispatch benchmark — node ${process.version}, ${new Date().toISOString()}`);
const only = process.env.BENCH_ONLY;
if (only !== 'claims') {
  await latency('memory:');
  const dir = mkdtempSync(join(tmpdir(), 'agentq-bench-'));
  try {
    await latency(`sqlite:${join(dir, 'agentq.db')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
if (only !== 'latency') await claims();
