import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { CoordinatorError } from '../src/core/errors.js';
import { sqlState } from '../src/core/store/pg-sql.js';
import { fakeLauncher, parked, recordingLogger, resume, start, startTest } from './helpers.js';
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
    await holder.query('SELECT pg_stat_clear_snapshot()'); // a fresh pg_stat_activity (pg-races.test.ts, lockWaitsNow)
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

test('PostgreSQL: a pipelined write that failed comes before the error the transaction throws next: a unique key taken runs it again, and its failure is what the caller gets once it may not', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const { c, client } = await startTest(t, { databaseUrl: url, sweepIntervalMs: 600_000 });
  await start(client, 'taken');
  const store = c.core.store;
  const taken = (await store.getSession('taken'))!;
  const refusal = () => new CoordinatorError('session_exists', 'the body refused after its write (before its next read)');

  // the INSERT is sent and not waited for (pg-pipeline.ts); the body throws before its next read,
  // when the server has refused the INSERT (unique key on the name): the transaction runs again
  let runs = 0;
  const result = await store.transaction(async (tx) => {
    if (++runs > 1) return 'ran again';
    await tx.insertSession({ ...taken, seq: taken.seq + 1000 });
    throw refusal();
  });
  assert.deepEqual([result, runs], ['ran again', 2], 'the failed write was masked by the error the body threw after it');

  // a write that fails every time: run again as a unique violation is (twice), then its failure
  // (not the body's error, which came after it) is what the caller gets
  runs = 0;
  await assert.rejects(
    store.transaction(async (tx) => {
      runs++;
      await tx.insertSession({ ...taken, seq: taken.seq + 2000 });
      throw refusal();
    }),
    (err: unknown) => {
      assert.equal(sqlState(err), '23505', `the body's error came out, not the write's: ${String(err)}`);
      return true;
    },
  );
  assert.equal(runs, 3);
});

test('PostgreSQL: a replay of a child\'s start locks the parent before the child, as a tree stop of the parent does (they cannot deadlock)', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const { client } = await startTest(t, { databaseUrl: url, sweepIntervalMs: 600_000 });
  await start(client, 'parent');
  const body = { type: 'start_session' as const, session_name: 'child', parent_session_name: 'parent', prompt: 'go' };
  const first = await client.createJob(body, { idempotencyKey: 'k-child' });

  // another connection holds the parent, as a tree stop of it does before it locks the children
  const stop = new pg.Client({ connectionString: url });
  await stop.connect();
  t.after(() => stop.end());
  await stop.query('BEGIN');
  await stop.query("SELECT 1 FROM sessions WHERE name = 'parent' FOR UPDATE");
  const replay = client.createJob(body, { idempotencyKey: 'k-child' });
  replay.catch(() => undefined); // awaited below
  // the replay's locking reads (sent ahead with its key's) wait for the parent: a backend waits
  // for this connection (pg_locks alone would show any wait on the server, of any test)
  for (;;) {
    await stop.query('SELECT pg_stat_clear_snapshot()'); // a fresh pg_stat_activity (pg-races.test.ts, lockWaitsNow)
    const { rows } = await stop.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))',
    );
    if (rows[0]!.n > 0) break;
    await sleep(10);
  }
  // the stop goes on to the child: the replay, waiting for the parent, holds nothing of the tree
  // (it held the child: a deadlock, which the store ran again after the server's deadlock_timeout)
  await assert.doesNotReject(
    stop.query("SELECT 1 FROM sessions WHERE name = 'child' FOR UPDATE NOWAIT"),
    'the replay locked the child before the parent',
  );
  await stop.query('COMMIT');
  const replayed = await replay;
  assert.equal(replayed.job_id, first.job_id);
});

test('PostgreSQL: the error a transaction threw after one of its writes had failed is logged when the write\'s failure replaces it (error for a bug, debug for a coded refusal)', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const { log, lines } = recordingLogger();
  const { c, client } = await startTest(t, { databaseUrl: url, sweepIntervalMs: 600_000 }, { logger: log });
  await start(client, 'taken');
  const store = c.core.store;
  const taken = (await store.getSession('taken'))!;
  const setAside = () =>
    lines
      .map((l) => JSON.parse(l) as { level: number; msg: string; err?: { type: string; message: string }; write_error?: { code: string } })
      .filter((l) => l.msg.startsWith('transaction threw after one of its writes had failed'))
      .map((l) => [l.level, l.err?.type, l.err?.message, l.write_error?.code]);

  // a bug met after the failed write (a unique key taken): the run after it succeeds, and the
  // bug is said at error level, not dropped
  let runs = 0;
  const result = await store.transaction(async (tx) => {
    if (++runs > 1) return 'ran again';
    await tx.insertSession({ ...taken, seq: taken.seq + 1000 });
    throw new TypeError('a bug after the write');
  });
  assert.deepEqual([result, runs], ['ran again', 2]);
  assert.deepEqual(setAside(), [[50, 'TypeError', 'a bug after the write', '23505']]);

  // a coded refusal set aside the same way: at debug
  runs = 0;
  await store.transaction(async (tx) => {
    if (++runs > 1) return;
    await tx.insertSession({ ...taken, seq: taken.seq + 2000 });
    throw new CoordinatorError('session_exists', 'refused after the write');
  });
  assert.deepEqual(setAside().slice(1), [[20, 'CoordinatorError', 'refused after the write', '23505']]);
});
