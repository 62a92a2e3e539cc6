/**
 * Throughput benchmark (`npm run bench:throughput`): a real coordinator process, launcher loops
 * and a producer over HTTP (see lib/agentq.ts for the exact request pattern).
 *
 * For the memory store and the SQLite store (a fresh file each time), and for each protocol:
 *   - jobs/s: BENCH_JOBS no-op jobs created while BENCH_LAUNCHERS launcher loops run them
 *   - the coordinator's CPU time per job (user + system; it hardly moves when other work shares
 *     the machine, unlike jobs/s)
 *   - the coordinator's RSS before and after (memory kept per finished job)
 * then:
 *   - dispatch latency (POST /jobs -> a parked launcher has the job), both protocols
 *   - BENCH_PARKED launchers each with a long-poll parked, and the coordinator's RSS (memory
 *     store), beside the floors holding the same requests: a bare node:http server, and a bare
 *     Fastify app without a logger and with pino at info to a file (the stack the coordinator
 *     must use)
 *   - memory kept per finished job: RSS right after BENCH_JOBS jobs and after BENCH_SETTLE s idle
 *
 * Environment: BENCH_JOBS (20000), BENCH_LAUNCHERS (8), BENCH_CAPACITY (8, slots per launcher in
 * the batched protocol), BENCH_PRODUCERS (8, creates in flight in the single-job protocol),
 * BENCH_BATCH (500, jobs per POST /jobs/batch), BENCH_LATENCY_JOBS (3000), BENCH_LATENCY_WARMUP
 * (2000), BENCH_PARKED (10000), BENCH_SETTLE (60), BENCH_ONLY=throughput|latency|parked|memory,
 * BENCH_STORES=memory,sqlite, BENCH_PROTOCOLS=single,batched, and LOG_LEVEL for the coordinator
 * (default info, its log written to a file).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dispatchLatency, parkPolls, parkRaw, throughput, type Protocol } from './lib/agentq.js';
import { overlapsPause, recordGc, type GcPause } from './lib/gc-trace.js';
import { startCoordinatorProcess, startFastifyFloorServer, startRawServer, type ServerProcess } from './lib/process.js';
import { env, kb, latencyOf, mb, ms, rate } from './lib/stats.js';

const JOBS = env('BENCH_JOBS', 20_000);
const LAUNCHERS = env('BENCH_LAUNCHERS', 8);
const CAPACITY = env('BENCH_CAPACITY', 8);
const PRODUCERS = env('BENCH_PRODUCERS', 8);
const BATCH = env('BENCH_BATCH', 500);
const LATENCY_JOBS = env('BENCH_LATENCY_JOBS', 3000);
const LATENCY_WARMUP = env('BENCH_LATENCY_WARMUP', 2000);
const PARKED = env('BENCH_PARKED', 10_000);
const SETTLE = env('BENCH_SETTLE', 60);
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
    for (const protocol of (process.env.BENCH_PROTOCOLS ?? 'single,batched').split(',') as Protocol[]) {
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

const GC_TRACE = fileURLToPath(new URL('./lib/gc-trace.js', import.meta.url));

async function latencyTable(): Promise<void> {
  console.log(`\n## Dispatch latency: POST /jobs -> a parked launcher has the job (${LATENCY_JOBS} jobs after ${LATENCY_WARMUP} warm-up, 4 launchers)\n`);
  console.log('client: measured by the producer; warm-up p99: the first jobs, while the coordinator\'s code is still being');
  console.log('compiled; server: the responseTime of POST /jobs in the coordinator\'s log (a create answers once its dispatch');
  console.log('is done); worst 1% during a GC pause: how many of the slowest samples overlap a garbage-collection pause of');
  console.log('the coordinator or of this process (which runs the producer and the launchers).\n');
  console.log('| store | launchers park on | p50 | p90 | p99 | max | warm-up p99 | server p50 | server p99 | worst 1% during a GC pause: coordinator / bench | coordinator GC pauses while counted |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|');
  for (const store of STORES) {
    for (const protocol of ['single', 'batched'] as Protocol[]) {
      await withStore(store, async (databaseUrl) => {
        const gcDir = mkdtempSync(join(tmpdir(), 'agentq-bench-gc-'));
        const gcFile = join(gcDir, 'gc.json');
        const server = await startCoordinatorProcess(databaseUrl, { ...coordinatorEnv, AGENTQ_BENCH_GC_FILE: gcFile }, ['--import', GC_TRACE]);
        const own = recordGc();
        let row: string;
        try {
          const { samples, warmup } = await dispatchLatency({ url: server.url, jobs: LATENCY_JOBS, warmup: LATENCY_WARMUP, launchers: 4 }, protocol);
          await new Promise((resolve) => setTimeout(resolve, 500)); // the last log lines
          const responseTimes = fromLog(server.log()).slice(LATENCY_WARMUP);
          await server.stop(); // the coordinator writes its GC pauses as it exits
          // pauses while the counted samples ran (not the warm-up's, nor the shutdown's)
          const from = samples[0]!.at;
          const to = samples[samples.length - 1]!.at + samples[samples.length - 1]!.ms;
          const within = (pauses: GcPause[]) => pauses.filter((p) => p.at + p.ms >= from && p.at <= to && (p.kind === 'minor' || p.kind === 'major'));
          const recorded = existsSync(gcFile) ? (JSON.parse(readFileSync(gcFile, 'utf8')) as GcPause[]) : undefined;
          const theirs = within(recorded ?? []);
          const ours = within(own.pauses);
          const l = latencyOf(samples.map((x) => x.ms));
          const srv = latencyOf(responseTimes);
          const worst = [...samples].sort((a, b) => b.ms - a.ms).slice(0, Math.max(1, Math.floor(samples.length / 100)));
          const during = (pauses: GcPause[]) => worst.filter((x) => overlapsPause(x, pauses)).length;
          const pauseMs = latencyOf(theirs.map((p) => p.ms));
          const pauses = recorded ? `${theirs.length} (p50 ${ms(pauseMs.p50)}, max ${ms(pauseMs.max)})` : 'not recorded';
          const park = protocol === 'single' ? 'GET /launcher/jobs' : 'POST /launcher/sync';
          row = `| ${store} | ${park} | ${ms(l.p50)} | ${ms(l.p90)} | ${ms(l.p99)} | ${ms(l.max)} | ${ms(latencyOf(warmup.map((x) => x.ms)).p99)} | ${ms(srv.p50)} | ${ms(srv.p99)} | ${during(theirs)} / ${during(ours)} of ${worst.length} | ${pauses} |`;
        } finally {
          own.stop();
          await server.stop();
          rmSync(gcDir, { recursive: true, force: true });
        }
        console.log(row);
      });
    }
  }
}

/** From a coordinator's log: the responseTime of each POST /jobs (request completion lines at info). */
function fromLog(text: string): number[] {
  const responseTimes: number[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    const j = JSON.parse(line) as { msg?: string; req?: { method?: string; url?: string }; responseTime?: number };
    if (j.msg === 'request completed' && j.req?.method === 'POST' && j.req.url === '/jobs' && j.responseTime !== undefined) {
      responseTimes.push(j.responseTime);
    }
  }
  return responseTimes;
}

async function parkedTable(): Promise<void> {
  console.log(`\n## ${PARKED.toLocaleString('en-US')} launchers, each with a long-poll parked (memory store)\n`);
  console.log('The floors: a bare node:http server (bench/raw-server.ts) and a bare Fastify app (bench/fastify-floor-server.ts),');
  console.log('without a logger and with pino at info to a file, holding the same requests.\n');
  console.log('| server | RSS idle | RSS with the polls parked | per parked poll |');
  console.log('|---|---|---|---|');
  // every parked poll is a launcher of its own: BENCH_PARKED past MAX_LAUNCHERS would be refused 503
  const server = await startCoordinatorProcess('memory:', { ...coordinatorEnv, LAUNCHER_POLL_TIMEOUT: '300', MAX_LAUNCHERS: String(Math.max(PARKED, 10_000)) });
  try {
    const idle = server.rssBytes();
    const parked = await parkPolls(server.url, PARKED);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const held = server.rssBytes();
    await parked.release();
    console.log(`| coordinator | ${mb(idle)} | ${mb(held)} | ${kb((held - idle) / PARKED)} |`);
  } finally {
    await server.stop();
  }
  const floors: [string, () => Promise<ServerProcess>][] = [
    ['bare node:http', startRawServer],
    ['bare Fastify', () => startFastifyFloorServer(false)],
    ['bare Fastify + pino (info, to a file)', () => startFastifyFloorServer(true)],
  ];
  for (const [name, start] of floors) {
    const floor = await start();
    try {
      const idle = floor.rssBytes();
      const parked = await parkRaw(floor.url, PARKED, () => floor.rssBytes());
      const held = floor.rssBytes();
      await parked.release();
      console.log(`| ${name} | ${mb(idle)} | ${mb(held)} | ${kb((held - idle) / PARKED)} |`);
    } finally {
      await floor.stop();
    }
  }
}

/**
 * What finished jobs keep: RSS after BENCH_JOBS no-op jobs (single-job protocol), right after the
 * run and once the coordinator has been idle for BENCH_SETTLE seconds (V8 gives memory back after
 * a while without work; right after a burst the heap is mostly garbage not yet collected).
 */
async function memoryTable(): Promise<void> {
  console.log(`\n## Memory kept per finished job: ${JOBS.toLocaleString('en-US')} no-op jobs, then ${SETTLE} s idle\n`);
  console.log('| store | RSS before | right after | after idle | per job, right after | per job, after idle | V8 heap used after idle |');
  console.log('|---|---|---|---|---|---|---|');
  for (const store of STORES) {
    await withStore(store, async (databaseUrl) => {
      const server = await startCoordinatorProcess(databaseUrl, coordinatorEnv);
      try {
        const before = server.rssBytes();
        const r = await throughput({ url: server.url, jobs: JOBS, launchers: LAUNCHERS, capacity: CAPACITY, producers: PRODUCERS, batch: BATCH }, 'single');
        const after = server.rssBytes();
        await new Promise((resolve) => setTimeout(resolve, SETTLE * 1000));
        const settled = server.rssBytes();
        const heap = await heapUsed(server.url);
        console.log(
          `| ${store} | ${mb(before)} | ${mb(after)} | ${mb(settled)} | ${kb((after - before) / r.jobs)} | ${kb((settled - before) / r.jobs)} | ${mb(heap)} |`,
        );
      } finally {
        await server.stop();
      }
    });
  }
}

/** nodejs_heap_size_used_bytes from the coordinator's /metrics. */
async function heapUsed(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(text)?.[1] ?? Number.NaN);
}

console.log(
  `# throughput benchmark — node ${process.version}, ${new Date().toISOString()}, coordinator LOG_LEVEL=${coordinatorEnv.LOG_LEVEL}, ` +
    `load average ${loadavg().map((x) => x.toFixed(1)).join(' ')} (${cpus().length} CPUs)`,
);
if (!ONLY || ONLY === 'throughput') await throughputTable();
if (!ONLY || ONLY === 'latency') await latencyTable();
if (!ONLY || ONLY === 'parked') await parkedTable();
if (!ONLY || ONLY === 'memory') await memoryTable();
console.log(`\nload average at the end: ${loadavg().map((x) => x.toFixed(1)).join(' ')}`);
