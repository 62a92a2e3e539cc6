import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { AgentqClient } from '@agentq/client';
import { ManualClock } from '../src/core/clock.js';
import { fakeLauncher, resume, start, startTest } from './helpers.js';
import { freshDatabaseUrl, pgRoundTripsDuring } from './pg-server.js';

/*
 * How many times a create waits for PostgreSQL (round trips, not time): the transaction pipelines
 * its statements (pg-pipeline.ts) and sends the reads its creates will make ahead
 * (Tx.aheadOfCreates). Before, every statement was a round trip: 12 for the client's create of a
 * new session (BEGIN, 9 statements, the COMMIT with its log entry, the job read again).
 */

/** A coordinator on a fresh schema, its clock still (the online launchers' copy never expires), warmed up. */
async function warmed(t: TestContext): Promise<AgentqClient | null> {
  const url = await freshDatabaseUrl(t);
  if (url === null) return null;
  const { client } = await startTest(t, { databaseUrl: url, sweepIntervalMs: 600_000 }, { clock: new ManualClock() });
  // the pool's connections open, each statement prepared once
  for (let i = 0; i < 3; i++) await start(client, `warm-${i}`);
  return client;
}

async function roundTrips(fn: () => Promise<unknown>): Promise<{ roundTrips: number; statements: string[] }> {
  return pgRoundTripsDuring(async () => {
    await fn();
  });
}

test('PostgreSQL: a create of a new session waits for the database twice (its reads, then its writes with the COMMIT), however many statements', async (t) => {
  const client = await warmed(t);
  if (!client) return;
  const created = await roundTrips(() => client.createJob({ type: 'start_session', session_name: 'fresh', prompt: 'go' }, { idempotencyKey: 'k-1' }));
  assert.ok(created.statements.length >= 9, `the create's statements (${created.statements.length}) are all counted`);
  assert.ok(created.roundTrips <= 2, `${created.roundTrips} round trips for a create of a new session:\n${created.statements.join('\n')}`);

  // the same key and body again: the first job, answered from the key's row
  const replayed = await roundTrips(() => client.createJob({ type: 'start_session', session_name: 'fresh', prompt: 'go' }, { idempotencyKey: 'k-1' }));
  assert.ok(replayed.roundTrips <= 3, `${replayed.roundTrips} round trips for a replay:\n${replayed.statements.join('\n')}`);
});

test('PostgreSQL: a resume of an idle session and one of a busy session take at most five round trips', async (t) => {
  const client = await warmed(t);
  if (!client) return;
  await start(client, 'idle-then-busy');
  const l = await fakeLauncher(client);
  const first = await l.take();
  await l.started(first.job_id, 'conversation-1');
  await l.completed(first.job_id, 'done');
  await start(client, 'after-the-launcher'); // the online launchers read again once, here
  const idle = await roundTrips(() => resume(client, 'idle-then-busy'));
  assert.ok(idle.roundTrips <= 5, `${idle.roundTrips} round trips for a resume of an idle session:\n${idle.statements.join('\n')}`);
  const busy = await roundTrips(() => resume(client, 'idle-then-busy'));
  assert.ok(busy.roundTrips <= 5, `${busy.roundTrips} round trips for a resume of a busy session:\n${busy.statements.join('\n')}`);
});

test('PostgreSQL: a batch of ten new sessions takes as many round trips as one create', async (t) => {
  const client = await warmed(t);
  if (!client) return;
  const jobs = Array.from({ length: 10 }, (_, i) => ({ type: 'start_session' as const, session_name: `batch-${i}`, prompt: 'go' }));
  let made: unknown[] = [];
  const batch = await roundTrips(async () => {
    made = await client.createJobs(jobs);
  });
  assert.equal(made.length, 10);
  assert.ok(batch.roundTrips <= 2, `${batch.roundTrips} round trips for a batch of 10:\n${batch.statements.join('\n')}`);
});
