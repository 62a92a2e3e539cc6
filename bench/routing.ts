/**
 * Routing benchmark (`npm run bench:routing`).
 *
 * 1. Claim cost with routing: on the core directly (memory store, no HTTP), the median cost of a
 *    claim while 1,000 or 1,000,000 jobs are pending, spread over 100 routing keys (100 project
 *    directories under one root that the launcher serves), beside the same with one key.
 * 2. Dispatch latency, routed vs unrouted: a coordinator process, 4 parked launchers with labels
 *    and a project root; one producer creates jobs one at a time, with `requires` and a
 *    `project_dir` (routed) or without (unrouted), alternating blocks in the same run. Measured
 *    from just before `POST /jobs` to the parked poll returning the job, over real HTTP.
 *
 * Environment: BENCH_BIG (default 1000000), BENCH_KEYS (default 100), BENCH_JOBS (default 3000),
 * BENCH_ONLY=claims|latency.
 */
import { performance } from 'node:perf_hooks';
import { AgentqClient } from '@agentq/client';
import type { CreateJobRequest } from '@agentq/protocol';
import { Coordinator, loadConfig } from '@agentq/coordinator';
import { QUIET_ENV, startCoordinatorProcess } from './lib/process.js';
import { latencyOf, median, ms } from './lib/stats.js';

const BIG = Number(process.env.BENCH_BIG ?? 1_000_000);
const KEYS = Number(process.env.BENCH_KEYS ?? 100);
const JOBS = Number(process.env.BENCH_JOBS ?? 3000);
const LAUNCHERS = 4;
const WARMUP = 200;

/** Median µs per claim with `pending` jobs queued over `keys` routing keys (queue kept at size). */
async function claimCost(pending: number, keys: number): Promise<number> {
  const BATCHES = 40;
  const BATCH = 500;
  const config = loadConfig({}, { logLevel: 'silent', eventReplaySize: 0, databaseUrl: 'memory:' });
  const core = await Coordinator.open(config);
  let n = 0;
  const add = async (count: number) => {
    for (let i = 0; i < count; i++, n++) {
      await core.createJob({ type: 'start_session', session_name: `s${n}`, prompt: 'x', project_dir: `/bench/d${n % keys}` });
    }
  };
  await add(pending);
  const { launcher_id } = await core.register({ hostname: 'bench', project_roots: ['/bench'] });
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
  await core.shutdown();
  return median(perClaim);
}

async function claims(): Promise<void> {
  await claimCost(1000, KEYS); // JIT warm-up
  const rows: [string, number, number][] = [];
  for (const keys of [1, KEYS]) {
    const small = await claimCost(1000, keys);
    const big = await claimCost(BIG, keys);
    rows.push([`${keys} routing key${keys === 1 ? '' : 's'}`, small, big]);
  }
  console.log(`\n## Claim cost with routing (core, memory store; median of 40 batches of 500 claims, queue kept at size)`);
  console.log(`| jobs spread over | µs per claim, 1,000 pending | µs per claim, ${BIG.toLocaleString('en-US')} pending | ratio |`);
  console.log('|---|---|---|---|');
  for (const [label, small, big] of rows) {
    console.log(`| ${label} | ${small.toFixed(2)} | ${big.toFixed(2)} | ${(big / small).toFixed(2)}x |`);
  }
}

async function latency(): Promise<void> {
  const server = await startCoordinatorProcess('memory:', QUIET_ENV);
  const client = new AgentqClient({ url: server.url, connections: LAUNCHERS + 4 });
  // one job in flight at a time: the launcher may get it before POST /jobs has answered
  let t0 = 0;
  const samples = { routed: [] as number[], unrouted: [] as number[] };
  let expecting: ((id: string) => void) | undefined;
  const stop = new AbortController();
  const launcherLoop = async () => {
    const { launcher_id } = await client.register({
      hostname: 'bench',
      labels: { zone: 'eu', gpu: 'a100' },
      project_roots: ['/bench'],
    });
    while (!stop.signal.aborted) {
      const answer = await client.poll(launcher_id, { holdSeconds: 60, signal: stop.signal }).catch(() => null);
      const job = answer?.job;
      if (!job) continue;
      (job.requires ? samples.routed : samples.unrouted).push(performance.now() - t0);
      expecting?.(job.job_id);
    }
  };
  const loops = Array.from({ length: LAUNCHERS }, launcherLoop);
  while ((await client.health()).launchers.parked_polls < LAUNCHERS) await new Promise((r) => setTimeout(r, 10));

  const body = (i: number, routed: boolean): CreateJobRequest =>
    routed
      ? { type: 'start_session', session_name: `r${i}`, prompt: 'x', requires: { gpu: 'a100' }, project_dir: `/bench/p${i % KEYS}` }
      : { type: 'start_session', session_name: `u${i}`, prompt: 'x' };
  for (let i = 0; i < 2 * (JOBS + WARMUP); i++) {
    // alternate blocks of 100 so both kinds see the same conditions (GC, JIT, scheduler)
    const routed = Math.floor(i / 100) % 2 === 1;
    const delivered = new Promise<string>((resolve) => (expecting = resolve));
    t0 = performance.now();
    const job = await client.createJob(body(i, routed));
    if ((await delivered) !== job.job_id) throw new Error('a job was delivered out of turn');
    if (i === 2 * WARMUP - 1) {
      samples.routed.length = 0;
      samples.unrouted.length = 0;
    }
  }
  stop.abort();
  await Promise.allSettled(loops);
  await client.close();
  await server.stop();
  console.log(`\n## Dispatch latency, routed vs unrouted (POST /jobs -> parked poll; memory store; ${LAUNCHERS} launchers)`);
  console.log('| jobs | n | p50 | p90 | p99 |\n|---|---|---|---|---|');
  for (const [label, xs] of [
    ['unrouted', samples.unrouted],
    ['routed (`requires` + `project_dir`)', samples.routed],
  ] as const) {
    const l = latencyOf(xs);
    console.log(`| ${label} | ${l.samples} | ${ms(l.p50, 3)} | ${ms(l.p90, 3)} | ${ms(l.p99, 3)} |`);
  }
}

console.log(`# routing benchmark — node ${process.version}, ${new Date().toISOString()}`);
const only = process.env.BENCH_ONLY;
if (only !== 'latency') await claims();
if (only !== 'claims') await latency();
