/**
 * Soak test of the coordinator's limits (`npm run bench:soak`; issue 11, docs/benchmarks.md).
 *
 * One coordinator process (SQLite, default limits) and one launcher process (demo executor) on
 * 127.0.0.1, and all at once, for SOAK_SECONDS:
 *   - a flood of 1 MiB prompts: SOAK_PRODUCERS clients creating jobs as fast as they are
 *     accepted (503s are retried after 250 ms, not after their Retry-After: an impatient client);
 *   - SOAK_SSE stalled event-stream clients (`?include=prompt`, never read; a few replaced each
 *     second so there are always new ones);
 *   - SOAK_SLOW slow-body connections (headers of a 1 MiB `POST /jobs`, one byte, then silence;
 *     each one the server closes is opened again);
 *   - a prober in its own thread: `GET /health` on a new connection every 100 ms.
 * Then the flood stops and every acknowledged job must complete (within SOAK_DRAIN_SECONDS).
 * Reported: health latency, acknowledged / refused creates, completions, peak RSS (VmHWM), and
 * what the limits did (from /metrics). Exit 1 when a check fails: the coordinator died, /health
 * failed or took over 100 ms, an acknowledged job did not complete, peak RSS over SOAK_RSS_BOUND_MB
 * (default: the coordinator's heap limit + 256 MiB; docs/operations.md, "Memory").
 * SOAK_COORDINATOR_NODE_OPTIONS are given to the coordinator's node (e.g. --max-old-space-size=1024);
 * SOAK_COORDINATOR_CPUS runs it under `taskset -c` (with the soak itself on the other cores:
 * `taskset -c 1 env SOAK_COORDINATOR_CPUS=0 npm run bench:soak`, the coordinator's host to itself);
 * SOAK_ENV_<NAME> sets the coordinator's variable NAME; SOAK_DATABASE_URL its store.
 *
 * Bounded: SOAK_SECONDS (default 60), SOAK_MAX_JOBS acknowledged at most (default 5000),
 * SOAK_DRAIN_SECONDS (default 600). Loopback only.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Pool, request } from 'undici';
import { memoryOf } from './lib/process.js';
import { percentile } from './lib/stats.js';

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const SECONDS = env('SOAK_SECONDS', 60);
const PRODUCERS = env('SOAK_PRODUCERS', 8);
const SSE = env('SOAK_SSE', 300);
const SLOW = env('SOAK_SLOW', 2000);
const MAX_JOBS = env('SOAK_MAX_JOBS', 5000);
const DRAIN_SECONDS = env('SOAK_DRAIN_SECONDS', 600);
const PROMPT_BYTES = env('SOAK_PROMPT_BYTES', 1024 * 1024);
const LAUNCHER_JOBS = env('SOAK_LAUNCHER_JOBS', 4);
/** MiB; by default the coordinator's V8 heap limit (4 x MAX_QUEUED_BYTES, its default) + 256 MiB */
const RSS_BOUND_MB = process.env.SOAK_RSS_BOUND_MB === undefined ? undefined : Number(process.env.SOAK_RSS_BOUND_MB);
const HEALTH_BOUND_MS = 100;


const root = fileURLToPath(new URL('../..', import.meta.url));
const COORDINATOR = join(root, 'apps/coordinator/dist/src/main.js');
const LAUNCHER = join(root, 'apps/launcher/dist/src/main.js');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`;

function openFileLimit(): number | null {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const n = Number(line?.split(/\s{2,}/)[1]);
  return Number.isFinite(n) ? n : null;
}

async function startCoordinator(dir: string): Promise<{ child: ChildProcess; url: string; lines: () => number }> {
  const nodeArgs = (process.env.SOAK_COORDINATOR_NODE_OPTIONS ?? '').split(' ').filter(Boolean);
  // SOAK_COORDINATOR_CPUS: the coordinator on these cores only (taskset exec's node: same pid)
  const cpus = process.env.SOAK_COORDINATOR_CPUS;
  const command = cpus ? ['taskset', '-c', cpus, process.execPath] : [process.execPath];
  const child = spawn(command[0]!, [...command.slice(1), ...nodeArgs, COORDINATOR], {
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      DATABASE_URL: process.env.SOAK_DATABASE_URL ?? `sqlite:${join(dir, 'agentq.db')}`,
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('SOAK_ENV_')).map(([k, v]) => [k.slice(9), v])),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let count = 0;
  const lines = createInterface({ input: child.stdout! });
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`coordinator exited (${code}) before it was ready`)));
    lines.on('line', (line) => {
      count++;
      if (process.env.SOAK_SHOW_NON_JSON && !line.startsWith('{')) process.stderr.write(`coordinator: ${line}\n`);
      if (!line.includes('"coordinator ready"')) return;
      resolve((JSON.parse(line) as { url: string }).url);
    });
  });
  return { child, url, lines: () => count };
}

function startLauncher(url: string, dir: string): ChildProcess {
  return spawn(
    process.env.SOAK_LAUNCHER_EXEC ?? process.execPath,
    [LAUNCHER, '--url', url, '--executor', 'demo', '--max-jobs', String(LAUNCHER_JOBS), '--state-dir', join(dir, 'launcher'), '--project-dir', dir, '--log-level', 'warn', '--hostname', 'soak'],
    { env: { PATH: process.env.PATH ?? '', AGENTQ_DEMO_STEP_MS: '20' }, stdio: ['ignore', 'ignore', 'inherit'] },
  );
}

/** What the prober measured: each answered probe's time and when it was answered (epoch ms). */
interface Probes {
  samples: number[];
  at: number[];
  failures: string[];
}

/**
 * The floor: a bare node:http server in its own process that answers `GET /health` at once. Probed
 * like the coordinator during the whole run, it shows what the machine itself adds to a probe (the
 * soak's load shares its cores with the coordinator, the launcher and the probers).
 */
async function startBareServer(): Promise<{ url: string; child: ChildProcess }> {
  const code = `
    const server = require('node:http').createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end('{"status":"ok"}');
    });
    server.listen(0, '127.0.0.1', () => console.log(server.address().port));
  `;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  child.stdout!.setEncoding('utf8');
  const [line] = (await once(child.stdout!, 'data')) as [string];
  return { url: `http://127.0.0.1:${line.trim()}`, child };
}

/**
 * The prober: its own process, so the soak's own load (the flood, 2,300 sockets) does not delay
 * its measurements. A new connection for each probe: accepting one is part of answering.
 */
function startProber(url: string): { stop: () => Promise<Probes> } {
  const code = `
    const { Client } = require(${JSON.stringify(fileURLToPath(import.meta.resolve('undici')))});
    const samples = []; const at = []; const failures = []; let running = true;
    process.on('message', () => { running = false; });
    (async () => {
      while (running) {
        const started = performance.now();
        const client = new Client(${JSON.stringify(url)});
        try {
          const res = await client.request({ method: 'GET', path: '/health', headersTimeout: 30000, bodyTimeout: 30000 });
          await res.body.text();
          if (res.statusCode !== 200) failures.push('status ' + res.statusCode);
          else { samples.push(performance.now() - started); at.push(Date.now()); }
        } catch (err) { failures.push(String(err && err.code || err)); }
        await client.close().catch(() => {});
        const wait = 100 - (performance.now() - started);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
      process.send({ samples, at, failures }, () => process.exit(0));
    })();
  `;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return {
    stop: async () => {
      const result = once(child, 'message') as Promise<[Probes]>;
      child.send('stop');
      const [r] = await result;
      return r;
    },
  };
}

/** TCP connections the kernel dropped because an accept queue was full (the whole host). */
function listenDrops(): number {
  const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
  const i = lines.findIndex((l) => l.startsWith('TcpExt:'));
  const names = lines[i]!.split(/\s+/);
  const values = lines[i + 1]!.split(/\s+/);
  return Number(values[names.indexOf('ListenDrops')] ?? 0);
}

/** Event-stream clients that never read. */
function stalledStreams(port: number, count: number) {
  const sockets: Socket[] = [];
  let opened = 0;
  const open = () => {
    const s = connect(port, '127.0.0.1');
    s.on('error', () => undefined);
    s.write('GET /events?include=prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n');
    s.once('data', () => s.pause());
    sockets.push(s);
    opened++;
  };
  for (let i = 0; i < count; i++) open();
  // a few replaced every second: there are always fresh ones as well as long-stalled ones
  const timer = setInterval(() => {
    if (count === 0) return;
    for (let i = 0; i < Math.max(1, count / 100); i++) {
      sockets.shift()?.destroy();
      open();
    }
  }, 1000);
  return {
    opened: () => opened,
    stop: () => {
      clearInterval(timer);
      for (const s of sockets) s.destroy();
    },
  };
}

/** Connections that send a request's headers and one byte of its body, then nothing. */
function slowBodies(port: number, count: number) {
  let running = true;
  let opened = 0;
  let timedOut = 0;
  const closedOther = new Map<string, number>();
  const sockets = new Set<Socket>();
  const open = () => {
    if (!running) return;
    const s = connect(port, '127.0.0.1');
    sockets.add(s);
    opened++;
    let answer = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => (answer += d));
    s.on('error', () => undefined);
    s.write(`POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${PROMPT_BYTES + 100}\r\n\r\n{`);
    s.once('close', () => {
      sockets.delete(s);
      if (answer.startsWith('HTTP/1.1 408')) timedOut++;
      else {
        const how = answer === '' ? 'closed unanswered' : answer.split('\r\n')[0]!;
        closedOther.set(how, (closedOther.get(how) ?? 0) + 1);
      }
      setTimeout(open, 10); // open another: the pressure stays
    });
  };
  for (let i = 0; i < count; i++) open();
  return {
    stats: () => ({ opened, timedOut, closedOther: Object.fromEntries(closedOther) }),
    stop: () => {
      running = false;
      for (const s of sockets) s.destroy();
    },
  };
}

/** Producers creating jobs with large prompts as fast as they are accepted. */
async function flood(url: string, until: number, acknowledged: string[], refused: Map<string, number>): Promise<void> {
  const pool = new Pool(url, { connections: PRODUCERS, headersTimeout: 120_000, bodyTimeout: 120_000 });
  const prompt = 'p'.repeat(PROMPT_BYTES - 16);
  let n = 0;
  const producer = async (p: number) => {
    while (Date.now() < until && acknowledged.length < MAX_JOBS) {
      const name = `soak-${p}-${n++}`;
      const body = `{"type":"start_session","session_name":"${name}","prompt":"${name}:${prompt}"}`;
      try {
        const res = await pool.request({ method: 'POST', path: '/jobs', headers: { 'content-type': 'application/json' }, body });
        const text = await res.body.text();
        // the answer echoes the 1 MiB prompt: the id is near its start, no need to parse it all
        if (res.statusCode === 201) acknowledged.push(/"job_id":"([^"]+)"/.exec(text.slice(0, 200))![1]!);
        else {
          const code = res.statusCode === 503 || res.statusCode === 429 ? (JSON.parse(text) as { error: { code: string } }).error.code : `http_${res.statusCode}`;
          refused.set(code, (refused.get(code) ?? 0) + 1);
          await sleep(250);
        }
      } catch (err) {
        const code = `client_${(err as { code?: string }).code ?? 'error'}`;
        refused.set(code, (refused.get(code) ?? 0) + 1);
        await sleep(250);
      }
    }
  };
  await Promise.all(Array.from({ length: PRODUCERS }, (_, p) => producer(p)));
  await pool.close();
}

async function metricsOf(url: string): Promise<Map<string, number>> {
  const text = await (await request(`${url}/metrics`)).body.text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('agentq_') && !line.startsWith('nodejs_eventloop_lag')) continue;
    if (line.startsWith('agentq_http_request_duration_seconds') && !line.includes('route="/health"')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

/** Wait until no job is pending or active (or the deadline). */
async function drain(url: string, deadline: number): Promise<void> {
  for (;;) {
    const health = (await (await request(`${url}/health`)).body.json()) as { queue_depth: number; jobs_active: number };
    if (health.queue_depth === 0 && health.jobs_active === 0) return;
    if (Date.now() > deadline) return;
    await sleep(1000);
  }
}

/** The final status of each acknowledged job, counted. */
async function statusesOf(url: string, ids: string[]): Promise<Map<string, number>> {
  const statuses = new Map<string, number>();
  // a few at a time: each job carries its 1 MiB prompt and the demo's 1 MiB result
  for (let i = 0; i < ids.length; i += 10) {
    const res = await request(`${url}/jobs/wait`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ job_ids: ids.slice(i, i + 10), timeout_ms: 0, mode: 'all', include_terminal: true }),
    });
    const body = (await res.body.json()) as { jobs: { status: string }[]; not_found: string[]; omitted: string[] };
    // snapshots past the coordinator's MAX_ANSWER_BYTES are read one by one
    const omitted = await Promise.all(body.omitted.map(async (id) => (await (await request(`${url}/jobs/${id}`)).body.json()) as { status: string }));
    for (const j of [...body.jobs, ...omitted]) statuses.set(j.status, (statuses.get(j.status) ?? 0) + 1);
    if (body.not_found.length > 0) statuses.set('not_found', (statuses.get('not_found') ?? 0) + body.not_found.length);
  }
  return statuses;
}

async function main(): Promise<void> {
  const needed = SSE + SLOW + PRODUCERS + 256;
  const limit = openFileLimit();
  // Node raises its soft open-file limit to the hard one at start; the coordinator inherits it
  console.log(`open-file limit ${limit ?? 'unknown'} (needed about ${needed} here and in the coordinator)`);
  if (limit !== null && limit < needed) {
    console.error(`raise it first: ulimit -n ${needed} (or lower SOAK_SLOW / SOAK_SSE)`);
    process.exit(2);
  }
  const dir = mkdtempSync(join(tmpdir(), 'agentq-soak-'));
  const coordinator = await startCoordinator(dir);
  const { url } = coordinator;
  const port = Number(new URL(url).port);
  const pid = coordinator.child.pid!;
  let died: string | null = null;
  coordinator.child.once('exit', (code, signal) => (died = `exited (${code ?? signal})`));
  let rssSamples = 0;
  let rssMax = 0;
  const rssTimer = setInterval(() => {
    try {
      rssMax = Math.max(rssMax, memoryOf(pid).rss);
      rssSamples++;
    } catch {
      /* gone */
    }
  }, 100);
  const launcher = startLauncher(url, dir);
  const prober = startProber(url);
  const bare = await startBareServer();
  const floorProber = startProber(bare.url);
  const sse = stalledStreams(port, SSE);
  const slow = slowBodies(port, SLOW);
  console.log(`coordinator ${url} (pid ${pid}); ${SSE} stalled streams, ${SLOW} slow bodies, ${PRODUCERS} producers of ${mib(PROMPT_BYTES)} prompts for ${SECONDS} s`);

  const started = Date.now();
  const dropsBefore = listenDrops();
  const acknowledged: string[] = [];
  const refused = new Map<string, number>();
  const progress = setInterval(() => {
    const m = memoryOf(pid);
    console.log(`  ${((Date.now() - started) / 1000).toFixed(0)} s: ${acknowledged.length} acknowledged, refused ${JSON.stringify(Object.fromEntries(refused))}, RSS ${mib(m.rss)}`);
  }, 10_000);
  await flood(url, started + SECONDS * 1000, acknowledged, refused);
  const floodSeconds = (Date.now() - started) / 1000;
  console.log(`flood over after ${floodSeconds.toFixed(0)} s: ${acknowledged.length} acknowledged; draining (the attack goes on)`);
  if (!died) await drain(url, Date.now() + DRAIN_SECONDS * 1000);
  const totalSeconds = (Date.now() - started) / 1000;
  clearInterval(progress);
  const health = await prober.stop();
  const floor = await floorProber.stop();
  bare.child.kill('SIGTERM');
  const drops = listenDrops() - dropsBefore;
  const statuses = died ? new Map<string, number>() : await statusesOf(url, acknowledged);
  const diedDuring: string | null = died;
  const slowStats = slow.stats();
  sse.stop();
  slow.stop();
  const metrics = diedDuring ? new Map<string, number>() : await metricsOf(url);
  const peak = diedDuring ? 0 : memoryOf(pid).peak;
  clearInterval(rssTimer);
  launcher.kill('SIGTERM');
  coordinator.child.kill('SIGTERM');
  await Promise.all([once(launcher, 'exit'), diedDuring ? Promise.resolve() : once(coordinator.child, 'exit')]);
  rmSync(dir, { recursive: true, force: true });

  const sorted = [...health.samples].sort((a, b) => a - b);
  const boundMb = RSS_BOUND_MB ?? Math.round((4 * (metrics.get('agentq_max_queued_prompt_bytes') ?? 0)) / 1024 / 1024 + 256);
  const completed = statuses.get('completed') ?? 0;
  const checks: [string, boolean][] = [
    [`the coordinator stayed up${diedDuring ? ` (${diedDuring})` : ''}`, diedDuring === null],
    [`/health answered every probe within ${HEALTH_BOUND_MS} ms`, health.failures.length === 0 && (sorted.at(-1) ?? Infinity) <= HEALTH_BOUND_MS],
    ['every acknowledged job completed', completed === acknowledged.length],
    [`peak RSS under ${boundMb} MiB`, peak > 0 && peak <= boundMb * 1024 * 1024],
  ];
  const metric = (name: string) => metrics.get(name) ?? 0;
  console.log('\nresults');
  console.log(`  run: ${totalSeconds.toFixed(0)} s (flood ${floodSeconds.toFixed(0)} s, then the drain)`);
  console.log(`  creates: ${acknowledged.length} acknowledged, refused ${JSON.stringify(Object.fromEntries(refused))}`);
  console.log(`  acknowledged jobs by final status: ${JSON.stringify(Object.fromEntries(statuses))}`);
  console.log(
    `  /health: ${health.samples.length} probes, p50 ${percentile(sorted, 50).toFixed(1)} ms, p99 ${percentile(sorted, 99).toFixed(1)} ms, ` +
      `max ${(sorted.at(-1) ?? NaN).toFixed(1)} ms, over ${HEALTH_BOUND_MS} ms: ${sorted.filter((x) => x > HEALTH_BOUND_MS).length}, failures: ${health.failures.length} ${JSON.stringify(health.failures.slice(0, 5))}`,
  );
  const floodEnd = started + floodSeconds * 1000;
  const slowIn = (from: number, to: number) => health.samples.filter((ms, i) => ms > HEALTH_BOUND_MS && health.at[i]! >= from && health.at[i]! < to).length;
  const floorSorted = [...floor.samples].sort((a, b) => a - b);
  console.log(
    `  the floor (a bare node:http server on the same machine, probed the same way): p50 ${percentile(floorSorted, 50).toFixed(1)} ms, ` +
      `p99 ${percentile(floorSorted, 99).toFixed(1)} ms, max ${(floorSorted.at(-1) ?? NaN).toFixed(1)} ms, over ${HEALTH_BOUND_MS} ms: ${floorSorted.filter((x) => x > HEALTH_BOUND_MS).length} of ${floorSorted.length}`,
  );
  console.log(`  /health over ${HEALTH_BOUND_MS} ms by phase: flood ${slowIn(0, floodEnd)}, drain ${slowIn(floodEnd, Infinity)}`);
  const slowest = health.samples.map((ms, i) => [ms, (health.at[i]! - started) / 1000] as const).sort((a, b) => b[0] - a[0]).slice(0, 20);
  console.log(`  slowest /health probes (ms at s): ${slowest.map(([ms, at]) => `${ms.toFixed(0)}@${at.toFixed(1)}`).join(' ')}`);
  console.log(`  connections dropped by the kernel (accept queue full, whole host): ${drops}`);
  console.log(`  coordinator RSS: peak ${mib(peak)} (VmHWM), highest sampled ${mib(rssMax)} over ${rssSamples} samples`);
  console.log(`  stalled streams opened ${sse.opened()}; cut: ${metric('agentq_sse_clients_cut_total{reason="client_unread"}')} for their own unread bytes, ${metric('agentq_sse_clients_cut_total{reason="total_buffered"}')} for the total`);
  console.log(`  slow bodies opened ${slowStats.opened}: ${slowStats.timedOut} answered 408, others ${JSON.stringify(slowStats.closedOther)}`);
  console.log(
    `  limits: queue_full ${metric('agentq_requests_refused_total{reason="queue_full"}')}, too_many_clients ${metric('agentq_requests_refused_total{reason="sse_clients"}') + metric('agentq_requests_refused_total{reason="connections"}')}, ` +
      `connections refused ${metric('agentq_connections_closed_by_limit_total{reason="refused"}')} evicted ${metric('agentq_connections_closed_by_limit_total{reason="evicted"}')}, ` +
      `log lines dropped ${metric('agentq_log_lines_dropped_total')} (read ${coordinator.lines()})`,
  );
  console.log(`  MAX_QUEUED_BYTES ${mib(metric('agentq_max_queued_prompt_bytes'))}`);
  const served = [...metrics.entries()].filter(([k]) => k.startsWith('agentq_http_request_duration_seconds_bucket') && k.includes('status_code="200"'));
  console.log(`  /health as the coordinator timed it (from its onRequest to its answer), cumulative: ${served.map(([k, v]) => `${/le="([^"]+)"/.exec(k)![1]}:${v}`).join(' ')}`);
  console.log(
    `  coordinator event-loop delay (whole run): p50 ${(metric('nodejs_eventloop_lag_p50_seconds') * 1000).toFixed(1)} ms, ` +
      `p99 ${(metric('nodejs_eventloop_lag_p99_seconds') * 1000).toFixed(1)} ms, max ${(metric('nodejs_eventloop_lag_max_seconds') * 1000).toFixed(1)} ms`,
  );
  for (const [name, ok] of checks) console.log(`  ${ok ? 'PASS' : 'FAIL'} ${name}`);
  process.exit(checks.every(([, ok]) => ok) ? 0 : 1);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
