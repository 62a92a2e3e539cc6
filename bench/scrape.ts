/**
 * What a Prometheus scrape costs with a long history (`npm run bench:scrape`): a coordinator
 * process on a database that holds BENCH_SCRAPE_JOBS ended jobs (the retention window of a busy
 * deployment), `GET /metrics` timed BENCH_SCRAPES times one after the other, and `GET /health`
 * too; on SQLite and on PostgreSQL. Also the time the coordinator takes to start on that
 * database (SQLite counts its ended jobs once there).
 *
 * The history is made fast: BENCH_SCRAPE_SEED jobs run to completion over HTTP (batch create, then
 * report-and-poll), then, coordinator stopped, their rows are copied in SQL until the database
 * holds BENCH_SCRAPE_JOBS (the copies differ in id and number only).
 *
 * Environment: BENCH_SCRAPE_JOBS (default 200000), BENCH_SCRAPE_SEED (default 1000),
 * BENCH_SCRAPES (default 50), BENCH_STORES (default sqlite,postgres; PostgreSQL as
 * bench/lib/postgres.ts finds it); BENCH_COORDINATOR=<main.js of another build> times that build.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import pg from 'pg';
import type { Job, SyncReport } from '@agentq/protocol';
import { postgresUrl } from './lib/postgres.js';
import { QUIET_ENV, startCoordinatorProcess } from './lib/process.js';
import { env, latencyOf } from './lib/stats.js';

const TOTAL = env('BENCH_SCRAPE_JOBS', 200_000);
const SEED = env('BENCH_SCRAPE_SEED', 1000);
const SCRAPES = env('BENCH_SCRAPES', 50);
const STORES = (process.env.BENCH_STORES ?? 'sqlite,postgres').split(',');

async function post<T>(url: string, path: string, body: unknown): Promise<T> {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** SEED jobs created and completed over HTTP, then copied in SQL up to TOTAL. */
async function seed(databaseUrl: string): Promise<void> {
  const server = await startCoordinatorProcess(databaseUrl, { ...QUIET_ENV, LAUNCHER_POLL_TIMEOUT: '1' });
  try {
    const { launcher_id } = await post<{ launcher_id: string }>(server.url, '/launcher/register', { hostname: 'bench' });
    const jobs = Array.from({ length: SEED }, (_, i) => ({ type: 'start_session' as const, session_name: `s${i}`, prompt: 'no-op' }));
    await post(server.url, '/jobs/batch', { jobs });
    let held: Job[] = [];
    for (let done = 0; done < SEED; ) {
      const reports: SyncReport[] = held.flatMap((j) => [
        { job_id: j.job_id, kind: 'started' as const },
        { job_id: j.job_id, kind: 'completed' as const, result: 'ok' },
      ]);
      const answer = await post<{ jobs: Job[] }>(server.url, '/launcher/sync', { launcher_id, capacity: 500, reports });
      done += held.length;
      held = answer.jobs;
    }
  } finally {
    await server.stop();
  }
  const copies = Math.ceil(TOTAL / SEED) - 1;
  if (databaseUrl.startsWith('sqlite:')) copySqlite(databaseUrl.slice('sqlite:'.length), copies);
  else await copyPostgres(databaseUrl, copies);
}

function copySqlite(file: string, copies: number): void {
  const db = new Database(file);
  try {
    const columns = (db.prepare('PRAGMA table_info(jobs)').all() as { name: string }[]).map((c) => c.name);
    const { top } = db.prepare('SELECT max(seq) AS top FROM jobs').get() as { top: number };
    const copied = columns.map((c) => (c === 'seq' ? `j.seq + k * ${top}` : c === 'id' ? `j.id || '-' || k` : `j.${c}`));
    db.transaction(() => {
      db.exec(`WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < ${copies})
               INSERT INTO jobs (${columns.join(', ')}) SELECT ${copied.join(', ')} FROM jobs j, n`);
      db.exec(`WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < ${copies})
               INSERT INTO job_prompts (job_id, prompt) SELECT p.job_id || '-' || k, p.prompt FROM job_prompts p, n`);
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
}

async function copyPostgres(url: string, copies: number): Promise<void> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    const { rows } = await db.query<{ name: string }>(
      "SELECT column_name AS name FROM information_schema.columns WHERE table_name = 'jobs' AND table_schema = current_schema() ORDER BY ordinal_position",
    );
    const columns = rows.map((r) => r.name);
    const top = Number((await db.query<{ top: string }>('SELECT max(seq) AS top FROM jobs')).rows[0]!.top);
    const copied = columns.map((c) => (c === 'seq' ? `j.seq + k * ${top}` : c === 'id' ? `j.id || '-' || k` : `j.${c}`));
    await db.query(`INSERT INTO jobs (${columns.join(', ')}) SELECT ${copied.join(', ')} FROM jobs j, generate_series(1, ${copies}) k`);
    await db.query("SELECT setval('jobs_seq', (SELECT max(seq) FROM jobs))");
    // as autovacuum leaves a table that has settled: the count of earlier versions scans the
    // status index only
    await db.query('VACUUM ANALYZE jobs');
  } finally {
    await db.end();
  }
}

/** Milliseconds of each of `n` requests of `path`, one after the other. */
async function timed(url: string, path: string, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const res = await fetch(`${url}${path}`);
    await res.text();
    out.push(performance.now() - t0);
    if (!res.ok) throw new Error(`${path}: ${res.status}`);
  }
  return out;
}

async function measure(store: string, databaseUrl: string): Promise<void> {
  await seed(databaseUrl);
  const t0 = performance.now();
  const server = await startCoordinatorProcess(databaseUrl, QUIET_ENV);
  const startMs = performance.now() - t0;
  try {
    // PostgreSQL: the copies went through the trigger; the sweeper folds what it recorded (once a second)
    await new Promise((r) => setTimeout(r, 3000));
    const text = await (await fetch(`${server.url}/metrics`)).text();
    const held = /^agentq_jobs\{status="completed"\} (\d+)$/m.exec(text)?.[1];
    const metrics = latencyOf(await timed(server.url, '/metrics', SCRAPES));
    const health = latencyOf(await timed(server.url, '/health', SCRAPES));
    const fmt = (ms: number) => ms.toFixed(1);
    console.log(`\n## ${store}: ${Number(held).toLocaleString('en-US')} ended jobs (${SCRAPES} requests each, one at a time)`);
    console.log('| request | p50 (ms) | p90 (ms) | max (ms) |\n|---|---|---|---|');
    console.log(`| GET /metrics | ${fmt(metrics.p50)} | ${fmt(metrics.p90)} | ${fmt(metrics.max)} |`);
    console.log(`| GET /health | ${fmt(health.p50)} | ${fmt(health.p90)} | ${fmt(health.max)} |`);
    console.log(`\nstart until /health answers: ${startMs.toFixed(0)} ms`);
  } finally {
    await server.stop();
  }
}

for (const store of STORES) {
  if (store === 'postgres') {
    await measure('PostgreSQL', await postgresUrl());
    continue;
  }
  const dir = mkdtempSync(join(tmpdir(), 'agentq-bench-scrape-'));
  try {
    await measure('SQLite', `sqlite:${join(dir, 'agentq.db')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
// the throwaway PostgreSQL server (bench/lib/postgres.ts) stops with the process
process.exit(0);
