/**
 * Memory bounded by active work (`npm run bench:history`): a coordinator process runs N no-op
 * jobs to completion over HTTP (batch create, then report-and-poll), and its resident set size
 * (RSS) is read from /proc after each tenth of the run — on the SQLite store (where only a
 * bounded window of finished jobs stays in memory) and on the memory store (which holds
 * everything until JOB_HISTORY_DAYS). At the end it also reads the V8 heap in use (from
 * /metrics: what the coordinator really holds) and the RSS again after BENCH_SETTLE seconds idle
 * (V8 gives unused heap back to the system only after a while).
 *
 * Environment: BENCH_HISTORY_JOBS (default 100000), BENCH_SETTLE (default 15), BENCH_ONLY=sqlite|memory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Job, SyncReport } from '@agentq/protocol';
import { QUIET_ENV, startCoordinatorProcess } from './lib/process.js';

const TOTAL = Number(process.env.BENCH_HISTORY_JOBS ?? 100_000);
const BATCH = 1000;
const SETTLE = Number(process.env.BENCH_SETTLE ?? 15);

/** A gauge's value from the coordinator's Prometheus text. */
async function gauge(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const value = new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1];
  if (value === undefined) throw new Error(`no ${name} in /metrics`);
  return Number(value);
}

async function post<T>(url: string, path: string, body: unknown): Promise<T> {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

async function run(label: string, databaseUrl: string): Promise<void> {
  const server = await startCoordinatorProcess(databaseUrl, { ...QUIET_ENV, LAUNCHER_POLL_TIMEOUT: '1' });
  const rssMiB = () => server.rssBytes() / 1024 / 1024;
  const { launcher_id } = await post<{ launcher_id: string }>(server.url, '/launcher/register', { hostname: 'bench' });
  const samples: [number, number][] = [[0, rssMiB()]];
  const t0 = performance.now();
  let done = 0;
  let held: Job[] = [];
  for (let created = 0; done < TOTAL; ) {
    if (created < TOTAL && held.length === 0) {
      const jobs = Array.from({ length: Math.min(BATCH, TOTAL - created) }, (_, i) => ({
        type: 'start_session' as const,
        session_name: `h${created + i}`,
        prompt: 'no-op',
      }));
      await post(server.url, '/jobs/batch', { jobs });
      created += jobs.length;
    }
    const reports: SyncReport[] = held.flatMap((j) => [
      { job_id: j.job_id, kind: 'started' as const },
      { job_id: j.job_id, kind: 'completed' as const, result: 'ok' },
    ]);
    const answer = await post<{ jobs: Job[]; results: { ok: boolean }[] }>(server.url, '/launcher/sync', {
      launcher_id,
      capacity: BATCH / 2,
      reports,
    });
    if (answer.results.some((r) => !r.ok)) throw new Error('a report was refused');
    done += held.length;
    held = answer.jobs;
    if (done > 0 && done % (TOTAL / 10) < held.length + BATCH / 2 && samples.at(-1)![0] !== done) {
      samples.push([done, rssMiB()]);
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const final = rssMiB();
  const heapUsed = (await gauge(server.url, 'nodejs_heap_size_used_bytes')) / 1024 / 1024;
  await new Promise((r) => setTimeout(r, SETTLE * 1000));
  const settled = rssMiB();
  await server.stop();
  console.log(`\n## ${label}: RSS while ${TOTAL.toLocaleString('en-US')} no-op jobs complete (${seconds.toFixed(1)} s)`);
  console.log('| jobs completed | RSS (MiB) |\n|---|---|');
  for (const [n, rss] of samples) console.log(`| ${n.toLocaleString('en-US')} | ${rss.toFixed(0)} |`);
  console.log(`| ${TOTAL.toLocaleString('en-US')} (end) | ${final.toFixed(0)} |`);
  console.log(`| after ${SETTLE} s idle | ${settled.toFixed(0)} |`);
  console.log(`V8 heap in use at the end: ${heapUsed.toFixed(0)} MiB`);
}

console.log(`# history benchmark — node ${process.version}, ${new Date().toISOString()}`);
const only = process.env.BENCH_ONLY;
if (only !== 'memory') {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-bench-history-'));
  try {
    await run('SQLite store', `sqlite:${join(dir, 'agentq.db')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
if (only !== 'sqlite') await run('memory store', 'memory:');
