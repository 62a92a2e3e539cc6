import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import Database, { type Statement } from 'better-sqlite3';
import pg from 'pg';
import { JobStatuses, type JobStatus } from '@agentq/protocol';
import type { AgentqClient } from '@agentq/client';
import { request } from 'undici';
import { ManualClock } from '../src/core/clock.js';
import { freshDatabaseUrl, pgStatementsDuring } from './pg-server.js';
import { parsePrometheusText } from './prometheus-text.js';
import { fakeLauncher, start, startTest, tempDir } from './helpers.js';

/*
 * agentq_jobs (jobs the store holds, by status) is read at every scrape. It must agree with what
 * GET /jobs lists through every kind of change, and on SQLite it must not cost a count over the
 * ended jobs of the whole retention period (docs/operations.md, "Metrics").
 */

/** agentq_jobs by status, scraped over HTTP. */
async function scrapedCounts(url: string): Promise<Record<JobStatus, number>> {
  const res = await request(`${url}/metrics`);
  assert.equal(res.statusCode, 200);
  const family = parsePrometheusText(await res.body.text()).get('agentq_jobs');
  assert.ok(family, 'agentq_jobs is exported');
  const out = Object.fromEntries(JobStatuses.map((s) => [s, 0])) as Record<JobStatus, number>;
  for (const sample of family.samples) out[sample.labels.status as JobStatus] = sample.value;
  return out;
}

/** Every job GET /jobs lists, counted by status (all pages). */
async function listedCounts(client: AgentqClient): Promise<Record<JobStatus, number>> {
  const out = Object.fromEntries(JobStatuses.map((s) => [s, 0])) as Record<JobStatus, number>;
  let cursor: string | undefined;
  do {
    const page = await client.listJobs({ limit: 1000, ...(cursor ? { cursor } : {}) });
    for (const job of page.jobs) out[job.status]++;
    cursor = page.next_cursor ?? undefined;
  } while (cursor);
  return out;
}

async function agrees(url: string, client: AgentqClient, when: string): Promise<Record<JobStatus, number>> {
  const listed = await listedCounts(client);
  assert.deepEqual(await scrapedCounts(url), listed, when);
  return listed;
}

/** A database the test can start a coordinator on twice (a restart); none for the memory store. */
async function durableUrl(t: TestContext): Promise<string | undefined> {
  if (process.env.AGENTQ_TEST_STORE === 'postgres') {
    const url = await freshDatabaseUrl(t);
    if (url === null) throw new Error('PostgreSQL is not available (AGENTQ_TEST_STORE=postgres)');
    return url;
  }
  if (process.env.AGENTQ_TEST_STORE !== 'sqlite') return undefined;
  const dir = tempDir(t, 'agentq-counts-');
  return `sqlite:${join(dir, 'agentq.db')}`;
}

test('agentq_jobs agrees with GET /jobs through creation, claims, ends, retention, a hot window of one and a restart', async (t) => {
  const clock = new ManualClock();
  const databaseUrl = await durableUrl(t);
  // a hot window of one ended job: on SQLite the others are read back from the file
  const config = { jobRetentionMs: 60_000, hotJobs: 1, sweepIntervalMs: 600_000, ...(databaseUrl ? { databaseUrl } : {}) };
  const first = await startTest(t, config, { clock });
  let { c, client } = first;
  const l = await fakeLauncher(client);
  const ids: Record<string, string> = {};
  for (const name of ['claimed', 'running', 'completed', 'failed', 'stopped', 'pending']) ids[name] = (await start(client, name)).job_id;
  assert.deepEqual(
    { pending: (await agrees(c.url, client, 'created')).pending },
    { pending: 6 },
  );
  // the launcher takes the five oldest; then each goes its way
  const taken = await l.poll({ capacity: 5, batch: true });
  assert.equal(taken?.jobs?.length, 5);
  await l.started(ids.running!);
  await l.started(ids.completed!);
  await l.completed(ids.completed!, 'ok');
  await l.started(ids.failed!);
  await l.failed(ids.failed!, 'boom');
  await client.stopJob(ids.stopped!);
  await l.stopped(ids.stopped!);
  const ended = await agrees(c.url, client, 'claimed, started, ended');
  assert.deepEqual(
    [ended.pending, ended.claimed, ended.running, ended.completed, ended.failed, ended.stopped],
    [1, 1, 1, 1, 1, 1],
  );
  await c.core.sweep(); // trims the hot window on SQLite: the counts stay

  // retention deletes the three ended jobs; one that ends later stays
  clock.advance(60_000);
  await l.completed(ids.running!, 'later');
  await c.core.sweep();
  const evicted = await agrees(c.url, client, 'after retention');
  assert.equal(evicted.completed, 1, 'the later one');
  assert.equal(evicted.failed + evicted.stopped, 0);

  if (databaseUrl === undefined) return; // memory: nothing survives a restart
  await client.close();
  await c.close();
  ({ c, client } = await startTest(t, config, { clock }));
  await agrees(c.url, client, 'after a restart');
  // and the counts go on from there
  await client.stopJob(ids.pending!);
  const after = await agrees(c.url, client, 'a change after the restart');
  assert.equal(after.stopped, 1);
});

/**
 * Record the SQL of every statement the process runs on any better-sqlite3 connection while
 * `fn` runs (the coordinator runs in this process; checkpoints run on a thread of their own).
 */
async function statementsDuring(fn: () => Promise<void>): Promise<string[]> {
  const probe = new Database(':memory:');
  const proto = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, unknown>;
  probe.close();
  const seen: string[] = [];
  const methods = ['all', 'get', 'run', 'iterate'] as const;
  const originals = methods.map((m) => proto[m] as (...args: unknown[]) => unknown);
  methods.forEach((m, i) => {
    proto[m] = function (this: Statement, ...args: unknown[]) {
      seen.push(this.source);
      return originals[i]!.apply(this, args);
    };
  });
  try {
    await fn();
  } finally {
    methods.forEach((m, i) => (proto[m] = originals[i]));
  }
  return seen;
}

test('SQLite: a scrape of /metrics and a GET /health read no job from the database file, however much history it holds', async (t) => {
  const dir = tempDir(t, 'agentq-counts-');
  // no ended job in memory: counting them from the file would be the only way left; no periodic
  // sweep (its retention pass reads jobs, and would be recorded if it ran during the scrape)
  const { c, client } = await startTest(t, { databaseUrl: `sqlite:${join(dir, 'agentq.db')}`, hotJobs: 0, sweepIntervalMs: 600_000 });
  for (const name of ['a', 'b', 'c']) await client.stopJob((await start(client, name)).job_id);
  await start(client, 'waiting');
  await c.core.sweep(); // trims the hot window

  let counts: Record<JobStatus, number> | undefined;
  const statements = await statementsDuring(async () => {
    counts = await scrapedCounts(c.url);
    const health = await request(`${c.url}/health`);
    assert.equal(health.statusCode, 200);
    assert.equal(((await health.body.json()) as { queue_depth: number }).queue_depth, 1);
  });
  assert.equal(counts?.stopped, 3);
  assert.equal(counts?.pending, 1);
  assert.deepEqual(
    statements.filter((sql) => /\bjobs\b/.test(sql)),
    [],
    'no statement over the jobs table',
  );
});

/** A PostgreSQL connection for the test's own reads and writes. */
async function pgClient(t: TestContext, url: string): Promise<pg.Client> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  t.after(() => db.end());
  return db;
}

test('PostgreSQL: a scrape reads the jobs by status from the counts the trigger keeps, and every read of jobs it makes is bounded by live or ready jobs', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  // no periodic sweep: its passes read jobs, and would be recorded if one ran during the scrape
  const { c, client } = await startTest(t, { databaseUrl: url, sweepIntervalMs: 600_000 });
  for (const name of ['a', 'b']) await client.stopJob((await start(client, name)).job_id);
  await start(client, 'waiting');
  let counts: Record<JobStatus, number> | undefined;
  const statements = await pgStatementsDuring(async () => {
    counts = await scrapedCounts(c.url);
  });
  assert.equal(counts?.stopped, 2);
  assert.equal(counts?.pending, 1);
  assert.deepEqual(
    statements.filter((sql) => /\bFROM jobs\b/.test(sql) && !/status IN \('pending', 'claimed', 'running', 'stopping'\)|ready_since IS NOT NULL/.test(sql)),
    [],
    'no read over every job',
  );
  assert.ok(statements.some((sql) => /\bFROM job_counts\b/.test(sql)), 'the counts are read');
});

test('PostgreSQL: the sweeper folds the status changes the trigger recorded into the counts; a change committed during the fold waits for the next one', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const { c, client } = await startTest(t, { databaseUrl: url, sweepIntervalMs: 600_000 });
  const ids: string[] = [];
  for (const name of ['a', 'b', 'c']) ids.push((await client.stopJob((await start(client, name)).job_id)).job_id);
  const db = await pgClient(t, url);
  const changes = async () => Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM job_count_changes')).rows[0]!.n);
  assert.equal(await changes(), 6, 'three creations and three status changes');
  const before = await agrees(c.url, client, 'before the fold');
  await c.core.sweep();
  assert.equal(await changes(), 0, 'folded');
  assert.deepEqual(await agrees(c.url, client, 'after the fold'), before);

  // a status change whose transaction is still open while the sweeper folds
  const other = await pgClient(t, url);
  await other.query('BEGIN');
  await other.query("UPDATE jobs SET status = 'failed' WHERE id = $1", [ids[0]]);
  await c.core.sweep();
  await other.query('COMMIT');
  assert.equal(await changes(), 1, 'not seen by that fold');
  const failed = await agrees(c.url, client, 'committed after the fold');
  assert.equal(failed.failed, 1);
  await c.core.sweep();
  assert.equal(await changes(), 0);
  assert.deepEqual(await agrees(c.url, client, 'after the next fold'), failed);
});

test('PostgreSQL: a database at schema version 4 gets its jobs counted by status by the upgrade', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const first = await startTest(t, { databaseUrl: url });
  const l = await fakeLauncher(first.client);
  const done = await start(first.client, 'done');
  const stopped = await start(first.client, 'stopped');
  await start(first.client, 'waiting');
  await l.poll({ capacity: 2, batch: true });
  await l.started(done.job_id);
  await l.completed(done.job_id, 'ok');
  await first.client.stopJob(stopped.job_id);
  const listed = await listedCounts(first.client);
  await first.client.close();
  await first.c.close();
  // back to version 4, as an older build left it
  const db = await pgClient(t, url);
  await db.query(
    'ALTER TABLE jobs DROP COLUMN lost_claims; ALTER TABLE idempotency DROP COLUMN answer; ALTER TABLE launchers DROP COLUMN registration_key; DROP INDEX sessions_roots; DROP TABLE job_counts, job_count_changes; DROP FUNCTION agentq_count_job_status() CASCADE; UPDATE agentq_schema SET version = 4',
  );

  const second = await startTest(t, { databaseUrl: url });
  assert.deepEqual(await scrapedCounts(second.c.url), listed);
  assert.deepEqual(await listedCounts(second.client), listed);
});
