import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { AgentqClient } from '@agentq/client';
import type { Job } from '@agentq/protocol';
import { ManualClock } from '../src/core/clock.js';
import { startCoordinator } from '../src/start.js';
import { startAuthTest } from './auth-helpers.js';
import { droppingProxy } from './dropping-proxy.js';
import { closeAfter, fakeLauncher, rejectsWith, start, startTest, tempDir } from './helpers.js';

/* `Idempotency-Key` on `POST /jobs`, and the client that sends one and retries a lost answer. */

const body = (session_name: string, prompt = 'p') => ({ type: 'start_session' as const, session_name, prompt });

async function post(url: string, payload: unknown, key?: string, path = '/jobs'): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'idempotency-key': key }) },
    body: JSON.stringify(payload),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

test('the same key with the same body twice: one job; the second answer is 200 with the first job', async (t) => {
  const { c, client } = await startTest(t);
  const first = await post(c.url, body('once'), 'key-1');
  assert.equal(first.status, 201);
  const again = await post(c.url, { prompt: 'p', session_name: 'once', type: 'start_session' }, 'key-1');
  assert.equal(again.status, 200, 'the same body in another key order is the same request');
  assert.equal(again.json['job_id'], first.json['job_id']);
  assert.equal((await client.listJobs()).jobs.length, 1);
});

test('the same key and body sent several times at once: one job, the others replay it (no 409)', async (t) => {
  // on PostgreSQL the copies run at once on the pool's connections, each reading the key before
  // another commits it (AGENTQ_TEST_STORE=postgres); the other stores run them one after another
  const { c, client } = await startTest(t);
  const keys = Array.from({ length: 40 }, (_, i) => `race-${i}`);
  const answers = await Promise.all(keys.map((key) => Promise.all([1, 2, 3, 4].map(() => post(c.url, body(key), key)))));
  for (const [i, copies] of answers.entries()) {
    assert.deepEqual(copies.map((a) => a.status).sort(), [200, 200, 200, 201], `${keys[i]}: ${JSON.stringify(copies.map((a) => a.json))}`);
    assert.equal(new Set(copies.map((a) => a.json['job_id'])).size, 1);
  }
  assert.equal((await client.listJobs({ limit: 1000 })).jobs.length, keys.length);
});

test('the same key after history retention deleted its job: 404 job_not_found, not a second run of the request', async (t) => {
  const clock = new ManualClock();
  const retention = 60_000; // shorter than the key's 24 h
  const { c, client } = await startTest(t, { jobRetentionMs: retention, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const l = await fakeLauncher(client);
  await start(client, 'r');
  await l.completed((await l.take()).job_id);
  const resume = { type: 'resume_session' as const, session_name: 'r', prompt: 'once only' };
  const first = await post(c.url, resume, 'key-evicted');
  assert.equal(first.status, 201);
  await l.completed((await l.take()).job_id, 'ran once');
  clock.advance(retention);
  await c.core.sweep();
  await rejectsWith(client.getJob(first.json['job_id'] as string), 404, 'job_not_found');

  const again = await post(c.url, resume, 'key-evicted');
  assert.equal(again.status, 404, JSON.stringify(again.json));
  const error = again.json['error'] as { code: string; details: Record<string, unknown> };
  assert.equal(error.code, 'job_not_found');
  assert.deepEqual(error.details, { job_id: first.json['job_id'], idempotency_key: 'key-evicted' });
  assert.deepEqual((await client.listJobs()).jobs, [], 'nothing was created');
});

test('the same key with another body is 409 idempotency_key_reused, naming the first job', async (t) => {
  const { c, client } = await startTest(t);
  const first = await post(c.url, body('k'), 'key-2');
  const other = await post(c.url, body('k', 'another prompt'), 'key-2');
  assert.equal(other.status, 409);
  const error = other.json['error'] as { code: string; details: Record<string, unknown> };
  assert.equal(error.code, 'idempotency_key_reused');
  assert.equal(error.details['idempotency_key'], 'key-2');
  assert.equal(error.details['job_id'], first.json['job_id']);
  assert.equal((await client.listJobs()).jobs.length, 1);
  // without a key nothing is deduplicated: the same body is a second create (here: refused, the session exists)
  assert.equal((await post(c.url, body('k'))).status, 409);
});

test('POST /jobs/batch: the same key and jobs twice create them once (200 with the same jobs); other jobs, or a key used for one job, are 409', async (t) => {
  const { c, client } = await startTest(t);
  await client.createJob(body('busy'));
  // resumes: without the key, every copy of the batch would queue two more turns
  const resumes = { jobs: [1, 2].map((i) => ({ type: 'resume_session' as const, session_name: 'busy', prompt: `turn ${i}` })) };
  const first = await post(c.url, resumes, 'batch-1', '/jobs/batch');
  assert.equal(first.status, 201, JSON.stringify(first.json));
  const again = await post(c.url, resumes, 'batch-1', '/jobs/batch');
  assert.equal(again.status, 200, JSON.stringify(again.json));
  const ids = (r: typeof first) => (r.json['jobs'] as Job[]).map((j) => j.job_id);
  assert.deepEqual(ids(again), ids(first));
  assert.equal((await client.listJobs({ session_name: 'busy' })).jobs.length, 3);

  const other = await post(c.url, { jobs: resumes.jobs.slice(1) }, 'batch-1', '/jobs/batch');
  assert.equal(other.status, 409);
  assert.equal((other.json['error'] as { code: string }).code, 'idempotency_key_reused');
  assert.equal((await post(c.url, body('single'), 'one-job')).status, 201);
  const reused = await post(c.url, { jobs: [body('single')] }, 'one-job', '/jobs/batch');
  assert.equal(reused.status, 409);
  assert.equal((reused.json['error'] as { code: string }).code, 'idempotency_key_reused');
});

test('a malformed Idempotency-Key is 400 naming the header', async (t) => {
  const { c } = await startTest(t);
  for (const key of ['x'.repeat(201), 'has space']) {
    const res = await post(c.url, body('bad-key'), key);
    assert.equal(res.status, 400);
    const error = res.json['error'] as { code: string; details: Record<string, unknown> };
    assert.equal(error.code, 'validation_failed');
    assert.equal(error.details['field'], 'idempotency-key');
  }
});

test('keys are scoped per token: two tokens may use the same key for different jobs', async (t) => {
  const a = await startAuthTest(t);
  const one = await a.as.admin.createJob(body('scoped-1'), { idempotencyKey: 'shared' });
  const two = await a.as.client.createJob(body('scoped-2'), { idempotencyKey: 'shared' });
  assert.notEqual(one.job_id, two.job_id);
  assert.equal(one.created_by, 'admin-token');
  assert.equal(two.created_by, 'client-token');
  // each token still gets its own job back
  assert.equal((await a.as.client.createJob(body('scoped-2'), { idempotencyKey: 'shared' })).job_id, two.job_id);
});

test('a key survives a restart on the same SQLite file', async (t) => {
  const databaseUrl = `sqlite:${join(tempDir(t, 'agentq-idem-'), 'agentq.db')}`;
  const first = closeAfter(t, await startCoordinator({ databaseUrl }));
  const created = await post(first.url, body('durable'), 'key-3');
  await first.close();
  const second = closeAfter(t, await startCoordinator({ databaseUrl }));
  const again = await post(second.url, body('durable'), 'key-3');
  assert.equal(again.status, 200);
  assert.equal(again.json['job_id'], created.json['job_id']);
});

test('the client retries a create whose answer was lost, with the same key: exactly one job', async (t) => {
  const { c, client } = await startTest(t);
  const px = await droppingProxy(t, c.url, 2);
  const viaProxy = new AgentqClient({ url: px.url, createRetryBackoff: { baseMs: 5, maxMs: 20 } });
  t.after(() => viaProxy.close());
  const job: Job = await viaProxy.createJob(body('lost-answer'));
  assert.equal(px.dropped(), 2);
  assert.equal(px.keys.length, 3, 'sent three times');
  assert.ok(px.keys[0] && px.keys.every((k) => k === px.keys[0]), `one key for every attempt: ${px.keys.join(', ')}`);
  const { jobs } = await client.listJobs();
  assert.deepEqual(
    jobs.map((j) => j.job_id),
    [job.job_id],
  );
  // another call is another logical create: a new key
  await viaProxy.createJob(body('next'));
  assert.notEqual(px.keys[3], px.keys[0]);
});

test('the client retries a batch whose answer was lost, with the same key: the jobs exist once', async (t) => {
  const { c, client } = await startTest(t);
  await client.createJob(body('many'));
  const px = await droppingProxy(t, c.url, 1, '/jobs/batch');
  const viaProxy = new AgentqClient({ url: px.url, createRetryBackoff: { baseMs: 5, maxMs: 20 } });
  t.after(() => viaProxy.close());
  const jobs = await viaProxy.createJobs([1, 2, 3].map((i) => ({ type: 'resume_session' as const, session_name: 'many', prompt: `turn ${i}` })));
  assert.equal(px.dropped(), 1);
  assert.equal(px.keys.length, 2, 'sent twice');
  assert.ok(px.keys[0] && px.keys[1] === px.keys[0], `one key for both attempts: ${px.keys.join(', ')}`);
  const listed = (await client.listJobs({ session_name: 'many' })).jobs.filter((j) => j.type === 'resume_session');
  assert.deepEqual(listed.map((j) => j.job_id).sort(), jobs.map((j) => j.job_id).sort());
});

test('the client gives up after its retries, with the connection error', async (t) => {
  const { c, client } = await startTest(t);
  const px = await droppingProxy(t, c.url, 10);
  const viaProxy = new AgentqClient({ url: px.url, createRetries: 2, createRetryBackoff: { baseMs: 5, maxMs: 20 } });
  t.after(() => viaProxy.close());
  await assert.rejects(viaProxy.createJob(body('never-heard')), { name: 'AgentqConnectionError' });
  assert.equal(px.keys.length, 3);
  // the job exists once, whatever the client concluded
  assert.equal((await client.listJobs()).jobs.length, 1);
});

test('a create refused for a reason of its own is not retried', async (t) => {
  const { c } = await startTest(t);
  const px = await droppingProxy(t, c.url, 0);
  const viaProxy = new AgentqClient({ url: px.url, createRetryBackoff: { baseMs: 5, maxMs: 20 } });
  t.after(() => viaProxy.close());
  await viaProxy.createJob(body('taken'));
  await rejectsWith(viaProxy.createJob(body('taken')), 409, 'session_exists');
  assert.equal(px.keys.length, 2);
});
