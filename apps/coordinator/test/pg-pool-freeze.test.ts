import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import pg from 'pg';
import { AgentqClient } from '@agentq/client';
import { spawnCoordinatorProcess } from './coordinator-process.js';
import { start } from './helpers.js';
import { cuttableProxy, freshDatabaseUrl } from './pg-server.js';

/*
 * The PostgreSQL store's pooled connections against a database host that freezes (packets
 * dropped, nothing reset) while the coordinator stops: a statement the host never answers is
 * given up on by the shutdown, rather than waited for DATABASE_QUERY_TIMEOUT_MS.
 */

test('PostgreSQL freezing under a sweep: SIGTERM gives the sweep\'s statement up and the coordinator drains and exits 0 (not 1, its 10 s run out waiting DATABASE_QUERY_TIMEOUT_MS), its jobs left in the database as they were', { timeout: 60_000 }, async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const proxy = await cuttableProxy(t, direct);
  t.after(() => proxy.thaw());
  // the first sweep's look for jobs past their timeout is sent to the database and never answered
  const stalled = proxy.stallAt('created_at + timeout_ms <= $1');
  // DATABASE_QUERY_TIMEOUT_MS left at its 30 s: more than main's 10 s to drain
  const coordinator = await spawnCoordinatorProcess(t, { DATABASE_URL: proxy.url, SWEEP_INTERVAL_MS: '50' });
  const client = new AgentqClient({ url: coordinator.url, overloadRetries: 0 });
  t.after(() => client.destroy());
  await stalled;
  // the other connections of the pool still answer
  const job = await start(client, 'kept');
  await client.destroy();

  const exited = once(coordinator.child, 'exit');
  coordinator.child.kill('SIGTERM');
  const [code, signal] = await exited;
  assert.deepEqual({ code, signal }, { code: 0, signal: null }, coordinator.stderr());
  assert.ok(coordinator.lines.some((l) => l.msg === 'sweep given up on at shutdown'));
  assert.ok(!coordinator.lines.some((l) => l.msg === 'shutdown took too long: exiting'));

  // nothing lost: the job is in the database as it was
  const db = new pg.Client({ connectionString: direct });
  await db.connect();
  try {
    const { rows } = await db.query<{ status: string }>('SELECT status FROM jobs WHERE id = $1', [job.job_id]);
    assert.deepEqual(rows, [{ status: 'pending' }]);
  } finally {
    await db.end();
  }
});
