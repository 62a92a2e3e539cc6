import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { fakeLauncher, parked, resume, startTest } from './helpers.js';
import { freshDatabaseUrl } from './pg-server.js';

/*
 * The PostgreSQL store's pipelined transactions (pg-pipeline.ts) where they could go wrong: the
 * reads a create sends ahead (Tx.aheadOfCreates) lock what they read, taken or not.
 */

test('PostgreSQL: a replay of a create locks its session\'s ready job (read ahead); a poll that skipped it meanwhile is woken at its commit', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const { c, client } = await startTest(t, { databaseUrl: url, pollTimeoutSeconds: 600, sweepIntervalMs: 600_000 });
  const body = { type: 'start_session' as const, session_name: 'replayed', prompt: 'go' };
  const first = await client.createJob(body, { idempotencyKey: 'k-replayed' });
  const l = await fakeLauncher(client);
  assert.equal((await l.take()).job_id, first.job_id);
  await l.started(first.job_id);
  await l.completed(first.job_id, 'done');
  const next = await resume(client, 'replayed'); // ready: the session is idle

  // another connection holds the first job's row: the replay, which reads it again, waits there,
  // after its reads sent ahead have locked the session's live jobs (the ready one)
  const holder = new pg.Client({ connectionString: url });
  await holder.connect();
  t.after(() => holder.end());
  await holder.query('BEGIN');
  await holder.query('SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE', [first.job_id]);
  const replay = client.createJob(body, { idempotencyKey: 'k-replayed' });
  for (;;) {
    const { rows } = await holder.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.pid <> pg_backend_pid()`,
    );
    if (rows[0]!.n > 0) break;
    await sleep(10);
  }
  // the poll skips the locked job (SKIP LOCKED) and parks
  const isParked = parked(c.core, l.id);
  const taken = l.take();
  await isParked;
  await holder.query('COMMIT');
  assert.equal((await replay).job_id, first.job_id);
  // the replay's commit says the job it held is ready: the parked poll takes it (not after its 600 s hold)
  const job = await Promise.race([taken, sleep(10_000).then(() => null)]);
  assert.equal(job?.job_id, next.job_id, 'the parked poll was not woken when the replay released the ready job');
});
