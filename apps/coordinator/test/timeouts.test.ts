import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../src/core/clock.js';
import { fakeLauncher, parked, resume, start, startTest, watching } from './helpers.js';

test('a pending job still pending at its timeout ends as timed_out, and no launcher gets it', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, {}, { clock });
  const job = await start(client, 'expires', 'x', { timeout_ms: 5_000 });
  assert.equal(job.timeout_ms, 5_000);
  clock.advance(4_999);
  await c.core.sweep();
  assert.equal((await client.getJob(job.job_id)).status, 'pending', 'not before its deadline');
  clock.advance(1);
  await c.core.sweep();
  const after = await client.getJob(job.job_id);
  assert.equal(after.status, 'timed_out');
  assert.equal(after.terminal, true);
  assert.equal(after.stop_reason, 'timeout');
  assert.match(after.error ?? '', /timed out/);
  assert.equal((await client.getSession('expires')).status, 'idle');

  const next = await start(client, 'fresh');
  const l = await fakeLauncher(client);
  assert.equal((await l.take()).job_id, next.job_id);
});

test('a running job at its timeout is stopped through the launcher and ends as timed_out', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 }, { clock });
  const l = await fakeLauncher(client);
  const job = await start(client, 'overrun', 'x', { timeout_ms: 10_000 });
  await l.take();
  await l.started(job.job_id);
  const isParked = parked(c.core, l.id);
  const poll = l.poll();
  await isParked;

  clock.advance(10_000);
  await c.core.sweep();
  assert.deepEqual(await poll, { stop_jobs: [job.job_id] }, 'the parked poll is woken with the stop');
  const stopping = await client.getJob(job.job_id);
  assert.equal(stopping.status, 'stopping');
  assert.equal(stopping.stop_reason, 'timeout');
  assert.deepEqual((await l.heartbeat()).stop_jobs, [job.job_id]);

  await l.stopped(job.job_id, 'SIGKILL');
  const done = await client.getJob(job.job_id);
  assert.equal(done.status, 'timed_out');
  assert.equal(done.terminal, true);
  assert.match(done.error ?? '', /timed out after 10000 ms.*SIGKILL/);
});

test('a wait parked on a job is woken by its timeout', { timeout: 20_000 }, async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, {}, { clock });
  const job = await start(client, 'watched', 'x', { timeout_ms: 1_000 });
  const isParked = watching(c.core, job.job_id);
  const waiting = client.waitJob(job.job_id, 600_000);
  await isParked;
  clock.advance(1_000);
  await c.core.sweep();
  assert.equal((await waiting).status, 'timed_out');
});

test('a timed-out child notifies its parent with outcome timed_out', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, {}, { clock });
  const l = await fakeLauncher(client);
  const own = await start(client, 'dad');
  await l.take();
  await l.completed(own.job_id);
  const child = await start(client, 'kid', 'x', { parent_session_name: 'dad', timeout_ms: 3_000 });
  await l.take();
  await l.started(child.job_id);
  clock.advance(3_000);
  await c.core.sweep();
  await l.stopped(child.job_id, 'SIGTERM');

  const dad = await client.getSession('dad');
  assert.ok(dad.callback_job_id);
  const cb = await client.getJob(dad.callback_job_id);
  assert.deepEqual(cb.callback_of, [child.job_id]);
  assert.match(cb.prompt, /<status>timed_out<\/status>/);
  assert.match(cb.prompt, /<error>timed out after 3000 ms/);
});

test('the configured default timeout applies to jobs that do not set one; none by default', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { defaultJobTimeoutMs: 2_000 }, { clock });
  const defaulted = await start(client, 'defaulted');
  const own = await start(client, 'own-limit', 'x', { timeout_ms: 60_000 });
  const optedOut = await start(client, 'no-limit', 'x', { timeout_ms: null });
  assert.equal(defaulted.timeout_ms, 2_000);
  assert.equal(optedOut.timeout_ms, null, 'timeout_ms: null opts out of the default');
  clock.advance(2_000);
  await c.core.sweep();
  assert.equal((await client.getJob(defaulted.job_id)).status, 'timed_out');
  assert.equal((await client.getJob(own.job_id)).status, 'pending');
  assert.equal((await client.getJob(optedOut.job_id)).status, 'pending');

  const plain = await startTest(t, {}, { clock });
  const forever = await start(plain.client, 'forever');
  assert.equal(forever.timeout_ms, null);
  clock.advance(365 * 24 * 3600 * 1000);
  await plain.c.core.sweep();
  assert.equal((await plain.client.getJob(forever.job_id)).status, 'pending');
});

test('a job waiting behind its busy session times out without disturbing the job ahead or after it', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, {}, { clock });
  const l = await fakeLauncher(client);
  const first = await start(client, 'queue');
  await l.take();
  const impatient = await resume(client, 'queue', 'x', { timeout_ms: 1_000 });
  const patient = await resume(client, 'queue');
  clock.advance(1_000);
  await c.core.sweep();
  assert.equal((await client.getJob(impatient.job_id)).status, 'timed_out');
  assert.equal((await client.getJob(first.job_id)).status, 'claimed');
  await l.completed(first.job_id);
  assert.equal((await l.take()).job_id, patient.job_id);
});

test('a stop requested before the deadline stays a stop: the job ends stopped, not timed_out', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, {}, { clock });
  const l = await fakeLauncher(client);
  const job = await start(client, 'cancelled-first', 'x', { timeout_ms: 5_000 });
  await l.take();
  await l.started(job.job_id);
  assert.equal((await client.stopJob(job.job_id)).outcome, 'stopping');
  // the launcher is still killing the executor when the deadline passes
  clock.advance(5_000);
  await c.core.sweep();
  assert.equal((await client.getJob(job.job_id)).stop_reason, 'requested');
  await l.stopped(job.job_id, 'SIGKILL');
  assert.equal((await client.getJob(job.job_id)).status, 'stopped');
});
