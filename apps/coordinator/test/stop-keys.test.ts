import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startCoordinator } from '../src/start.js';
import { startAuthTest } from './auth-helpers.js';
import { fakeLauncher, post, rejectsWith, resume, start, startTest, stopSession } from './helpers.js';

/*
 * `Idempotency-Key` on the stops. A session stop names no jobs: sent again after its answer was
 * lost, it must not stop what the session started in between (a message, a child's outcome
 * delivered); the same key answers the first answer again and stops nothing more.
 */

test('a session stop sent again with its key after a new job started stops nothing more: it answers the first answer', async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const active = await start(client, 'a');
  await l.take();
  await l.started(active.job_id);
  const queued = await resume(client, 'a');
  const first = await client.stopSession('a', { idempotencyKey: 'stop-a' });
  assert.deepEqual(first.stopped, [
    { job_id: queued.job_id, outcome: 'stopped', status: 'stopped', session_name: 'a' },
    { job_id: active.job_id, outcome: 'stopping', status: 'stopping', session_name: 'a' },
  ]);
  assert.equal(first.replayed, undefined, 'the first answer is not a replay');
  assert.deepEqual(await l.poll(), { stop_jobs: [active.job_id] });
  await l.stopped(active.job_id);
  // between the lost answer and the stop sent again, a message starts a new turn
  const sent = await client.sendMessage('a', { text: 'go on' });
  assert.ok(sent.job_id);

  const again = await client.stopSession('a', { idempotencyKey: 'stop-a' });
  assert.deepEqual(again, {
    session_name: 'a',
    stopped: [
      { job_id: queued.job_id, outcome: 'stopped', status: 'stopped', session_name: 'a' },
      // the first outcome, with the status the job has now
      { job_id: active.job_id, outcome: 'stopping', status: 'stopped', session_name: 'a' },
    ],
    replayed: true,
  });
  assert.equal((await client.getJob(sent.job_id)).status, 'pending', 'the job started in between runs on');
  assert.equal((await l.take()).job_id, sent.job_id);

  // another key is another stop
  const other = await stopSession(c.url, 'a', 'stop-a-later');
  assert.equal(other.status, 200, JSON.stringify(other.json));
  assert.deepEqual((other.json['stopped'] as Array<{ job_id: string }>).map((s) => s.job_id), [sent.job_id]);
});

test('a session stop that found nothing to stop, sent again with its key after a job started, is still 409 session_idle', async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'idle');
  await l.take();
  await l.completed(job.job_id);
  const first = await stopSession(c.url, 'idle', 'stop-idle');
  assert.equal(first.status, 409);
  const sent = await client.sendMessage('idle', { text: 'wake up' });
  assert.ok(sent.job_id);

  const again = await stopSession(c.url, 'idle', 'stop-idle');
  assert.equal(again.status, 409, JSON.stringify(again.json));
  const error = again.json['error'] as { code: string; details: Record<string, unknown> };
  assert.equal(error.code, 'session_idle');
  assert.deepEqual(error.details, { session_name: 'idle', current_status: 'idle', replayed: true });
  assert.equal((await client.getJob(sent.job_id)).status, 'pending', 'not stopped');

  // the same for a session that did not exist yet
  assert.equal((await stopSession(c.url, 'later', 'stop-later')).status, 404);
  const created = await start(client, 'later');
  const notYet = await stopSession(c.url, 'later', 'stop-later');
  assert.equal(notYet.status, 404, JSON.stringify(notYet.json));
  assert.equal((await client.getJob(created.job_id)).status, 'pending');
});

test('a tree stop sent again with its key answers the first answer and leaves a job started since in the tree alone', async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const lead = await start(client, 'lead');
  await l.take();
  await l.started(lead.job_id);
  const child = await start(client, 'child', 'x', { parent_session_name: 'lead' });
  await l.take();
  await l.started(child.job_id);
  const first = await stopSession(c.url, 'lead', 'stop-tree', '?tree=true');
  assert.equal(first.status, 200, JSON.stringify(first.json));
  const want = [
    { job_id: lead.job_id, outcome: 'stopping', session_name: 'lead' },
    { job_id: child.job_id, outcome: 'stopping', session_name: 'child' },
  ];
  for (const job of [child, lead]) await l.stopped(job.job_id);
  const shape = (answer: Record<string, unknown>) =>
    (answer['stopped'] as Array<Record<string, unknown>>).map(({ job_id, outcome, session_name }) => ({ job_id, outcome, session_name }));
  assert.deepEqual(shape(first.json), want);
  const sent = await client.sendMessage('child', { text: 'again' });
  assert.ok(sent.job_id);

  const again = await stopSession(c.url, 'lead', 'stop-tree', '?tree=true');
  assert.equal(again.status, 200, JSON.stringify(again.json));
  assert.deepEqual(shape(again.json), want);
  assert.equal(again.json['replayed'], true);
  assert.equal((await client.getJob(sent.job_id)).status, 'pending');
  // the key names the request: without tree=true it is another one
  const plain = await stopSession(c.url, 'lead', 'stop-tree');
  assert.equal(plain.status, 409);
  assert.equal((plain.json['error'] as { code: string }).code, 'idempotency_key_reused');
});

test('the same session stop sent several times at once: one stop, the others answer it (no session_idle)', async (t) => {
  // on PostgreSQL the copies run at once on the pool's connections (AGENTQ_TEST_STORE=postgres)
  const { c, client } = await startTest(t);
  const names = Array.from({ length: 20 }, (_, i) => `race-${i}`);
  for (const name of names) {
    await start(client, name);
    await resume(client, name);
  }
  const answers = await Promise.all(names.map((name) => Promise.all([1, 2, 3, 4].map(() => stopSession(c.url, name, `key-${name}`)))));
  for (const [i, copies] of answers.entries()) {
    const what = JSON.stringify(copies.map((a) => a.json));
    assert.deepEqual(copies.map((a) => a.status), [200, 200, 200, 200], what);
    assert.deepEqual(copies.map((a) => a.json['replayed'] ?? false).sort(), [false, true, true, true], what);
    const stopped = copies.map((a) => JSON.stringify(a.json['stopped']));
    assert.equal(new Set(stopped).size, 1, what);
    assert.equal((copies[0]!.json['stopped'] as unknown[]).length, 2, `${names[i]}: both jobs`);
  }
});

test('a job stop sent again with its key answers the first outcome (stopped), not already_completed', async (t) => {
  const { client } = await startTest(t);
  const job = await start(client, 'j');
  const first = await client.stopJob(job.job_id, { idempotencyKey: 'stop-j' });
  assert.deepEqual([first.outcome, first.status, first.replayed], ['stopped', 'stopped', undefined]);
  const again = await client.stopJob(job.job_id, { idempotencyKey: 'stop-j' });
  assert.deepEqual([again.outcome, again.status, again.replayed, again.job.job_id], ['stopped', 'stopped', true, job.job_id]);
  const fresh = await client.stopJob(job.job_id);
  assert.deepEqual([fresh.outcome, fresh.replayed], ['already_completed', undefined], 'a new key is a new stop');
});

test('a stop key used for another request is 409 idempotency_key_reused, whichever request used it first', async (t) => {
  const { client } = await startTest(t);
  const a = await start(client, 'ka');
  await start(client, 'kb');
  await client.stopSession('ka', { idempotencyKey: 'k1' });
  const details = await rejectsWith(client.stopSession('kb', { idempotencyKey: 'k1' }), 409, 'idempotency_key_reused');
  assert.deepEqual(details, { idempotency_key: 'k1', job_id: a.job_id });
  await rejectsWith(client.stopJob(a.job_id, { idempotencyKey: 'k1' }), 409, 'idempotency_key_reused');
  await rejectsWith(client.createJob({ type: 'resume_session', session_name: 'kb', prompt: 'p' }, { idempotencyKey: 'k1' }), 409, 'idempotency_key_reused');
  // and a create's key cannot stop
  const created = await client.createJob({ type: 'resume_session', session_name: 'kb', prompt: 'p' }, { idempotencyKey: 'k2' });
  await rejectsWith(client.stopSession('kb', { idempotencyKey: 'k2' }), 409, 'idempotency_key_reused');
  assert.equal((await client.getJob(created.job_id)).status, 'pending');
});

test('a malformed Idempotency-Key on a stop is 400 naming the header', async (t) => {
  const { c, client } = await startTest(t);
  const job = await start(client, 'bad');
  const res = await stopSession(c.url, 'bad', 'has space');
  assert.equal(res.status, 400);
  assert.equal((res.json['error'] as { details: Record<string, unknown> }).details['field'], 'idempotency-key');
  assert.equal((await client.getJob(job.job_id)).status, 'pending', 'nothing was stopped');
});

test('stop keys are scoped per token', async (t) => {
  const a = await startAuthTest(t);
  await start(a.as.admin, 's1');
  const s2 = await start(a.as.admin, 's2');
  const one = await a.as.admin.stopSession('s1', { idempotencyKey: 'shared' });
  // the same key from another token is that token's own stop
  const two = await a.as.client.stopSession('s2', { idempotencyKey: 'shared' });
  assert.equal(one.stopped.length, 1);
  assert.deepEqual([two.stopped.map((s) => s.job_id), two.replayed], [[s2.job_id], undefined]);
});

test('a stop key survives a restart on the same SQLite file', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-stop-key-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const databaseUrl = `sqlite:${join(dir, 'agentq.db')}`;
  const first = await startCoordinator({ databaseUrl });
  await post(first.url, '/jobs', { type: 'start_session', session_name: 'durable', prompt: 'p' });
  const stopped = await stopSession(first.url, 'durable', 'key-d');
  assert.equal(stopped.status, 200);
  await first.close();
  const second = await startCoordinator({ databaseUrl });
  t.after(() => second.close());
  // without the key's row this would be 409 session_idle
  const again = await stopSession(second.url, 'durable', 'key-d');
  assert.deepEqual(again.json, { ...stopped.json, replayed: true });
});

test('two stops through the client without a key given are two stops: each call sends a new key, so the second stops what started since', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const started = await start(client, 'twice');
  await l.take();
  await l.completed(started.job_id);
  const job = await client.sendMessage('twice', { text: 'go' });
  assert.ok(job.job_id);
  const first = await client.stopSession('twice');
  assert.deepEqual(first.stopped.map((s) => [s.job_id, s.outcome]), [[job.job_id, 'stopped']]);
  // a new turn after the first stop (the user stops it again: a new call, not a retry)
  const sent = await client.sendMessage('twice', { text: 'again' });
  assert.ok(sent.job_id);
  const second = await client.stopSession('twice');
  assert.deepEqual([second.stopped.map((s) => [s.job_id, s.outcome]), second.replayed], [[[sent.job_id, 'stopped']], undefined]);
  assert.equal((await client.getJob(sent.job_id)).status, 'stopped');

  // a job stop: the second call is answered as a new stop (already over), not the first one again
  const running = await resume(client, 'twice');
  await l.take();
  await l.started(running.job_id);
  assert.equal((await client.stopJob(running.job_id)).outcome, 'stopping');
  await l.stopped(running.job_id);
  const again = await client.stopJob(running.job_id);
  assert.deepEqual([again.outcome, again.status, again.replayed], ['already_completed', 'stopped', undefined]);
});
