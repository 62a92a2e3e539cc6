import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { ManualClock } from '../src/core/clock.js';
import { scopedKey } from '../src/core/idempotency.js';
import type { Store } from '../src/core/store/store.js';
import { droppingProxy } from './dropping-proxy.js';
import { failTreeStopSecondPass, fakeLauncher, post, rejectsWith, resume, start, startTest, stopSession } from './helpers.js';

/*
 * A stop with an Idempotency-Key sent again: after a tree stop failed half way, after history
 * retention deleted what it stopped, and by the client itself after a lost answer.
 */

const shape = (answer: Record<string, unknown>) =>
  (answer['stopped'] as Array<Record<string, unknown>>).map(({ job_id, outcome, session_name }) => ({ job_id, outcome, session_name }));

test('a tree stop that failed after its first pass: the same key stops the child a later pass finds, and leaves alone what started since in the sessions already stopped', async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const lead = await start(client, 'lead');
  await l.take();
  await l.started(lead.job_id);

  // The stop's first pass misses a child started just after it read the tree, and its second
  // pass, which finds the child, fails: the stop answers 503 (see failTreeStopSecondPass).
  const injected = failTreeStopSecondPass(c.core.store, client);

  const failed = await stopSession(c.url, 'lead', 'tree-once', '?tree=true');
  assert.equal(failed.status, 503, JSON.stringify(failed.json));
  const { child, reads } = injected;
  assert.ok(child);
  assert.equal(reads, 2, 'the second pass read the tree');
  assert.equal((await client.getJob(child.job_id)).status, 'pending', 'the failed pass stopped nothing');
  assert.equal((await client.getJob(lead.job_id)).status, 'stopping', 'the first pass stopped the lead');
  // the lead ends, and a message starts a new turn of it before the stop is sent again
  assert.deepEqual(await l.poll(), { stop_jobs: [lead.job_id] });
  await l.stopped(lead.job_id);
  const sent = await client.sendMessage('lead', { text: 'go on' });
  assert.ok(sent.job_id);
  // the key, unfinished, with another request (the child's tree, the lead without its tree): 409, nothing stopped
  for (const other of ['/sessions/child/stop?tree=true', '/sessions/lead/stop']) {
    const reused = await post(c.url, other, undefined, 'tree-once');
    assert.deepEqual([reused.status, (reused.json['error'] as { code: string }).code], [409, 'idempotency_key_reused'], other);
  }
  assert.equal((await client.getJob(child.job_id)).status, 'pending');
  assert.equal((await client.getJob(sent.job_id)).status, 'pending');

  const again = await stopSession(c.url, 'lead', 'tree-once', '?tree=true');
  assert.equal(again.status, 200, JSON.stringify(again.json));
  const whole = [
    { job_id: lead.job_id, outcome: 'stopping', session_name: 'lead' },
    { job_id: child.job_id, outcome: 'stopped', session_name: 'child' },
  ];
  assert.deepEqual(shape(again.json), whole, 'the whole stop: the first attempt\'s lead and the child stopped now');
  assert.equal(again.json['replayed'], undefined, 'this attempt stopped something: not a replay');
  assert.equal((await client.getJob(child.job_id)).status, 'stopped');
  assert.equal((await client.getJob(sent.job_id)).status, 'pending', 'the lead was stopped by the first attempt: its new turn runs on');

  // the stop is finished now: sent again, the same answer, and nothing more
  const third = await stopSession(c.url, 'lead', 'tree-once', '?tree=true');
  assert.equal(third.status, 200, JSON.stringify(third.json));
  assert.deepEqual(shape(third.json), whole);
  assert.equal(third.json['replayed'], true);
  assert.equal((await client.getJob(sent.job_id)).status, 'pending');
});

test('a stop sent again with its key after history retention deleted the jobs it stopped answers the first answer, not 404', async (t) => {
  const RETENTION = 60_000;
  const clock = new ManualClock();
  // only the test sweeps
  const { c, client } = await startTest(t, { jobRetentionMs: RETENTION, sweepIntervalMs: 600_000 }, { clock });
  const job = await start(client, 'gone-job');
  const jobStop = await client.stopJob(job.job_id, { idempotencyKey: 'stop-gone-job' });
  await start(client, 'gone-session');
  await resume(client, 'gone-session');
  const sessionStop = await client.stopSession('gone-session', { idempotencyKey: 'stop-gone-session' });
  await start(client, 'gone-tree');
  const treeStop = await client.stopSession('gone-tree', { idempotencyKey: 'stop-gone-tree', tree: true });

  clock.advance(RETENTION);
  await c.core.sweep();
  await c.core.sweep(); // sessions go one sweep after their last job
  await rejectsWith(client.getJob(job.job_id), 404, 'job_not_found');
  await rejectsWith(client.getSession('gone-session'), 404, 'session_not_found');
  await rejectsWith(client.getSession('gone-tree'), 404, 'session_not_found');

  assert.deepEqual(await client.stopJob(job.job_id, { idempotencyKey: 'stop-gone-job' }), { ...jobStop, replayed: true });
  assert.deepEqual(await client.stopSession('gone-session', { idempotencyKey: 'stop-gone-session' }), { ...sessionStop, replayed: true });
  assert.deepEqual(await client.stopSession('gone-tree', { idempotencyKey: 'stop-gone-tree', tree: true }), { ...treeStop, replayed: true });
  // a new key is a new stop, of a job that is no more
  await rejectsWith(client.stopJob(job.job_id), 404, 'job_not_found');
});

test("a job stop's key keeps a bounded copy of the job: a 1 MiB prompt or result is not stored again per key; after retention the copy is answered, marked cut", async (t) => {
  const RETENTION = 60_000;
  const clock = new ManualClock();
  const { c, client } = await startTest(t, { jobRetentionMs: RETENTION, sweepIntervalMs: 600_000 }, { clock });
  const MiB = 1024 * 1024;
  const store: Store = c.core.store;
  const kept = async (key: string) => {
    const row = await store.transaction((tx) => tx.idempotency(scopedKey(null, key)));
    assert.ok(row, `the key ${key} is stored`);
    return JSON.stringify(row).length;
  };

  // a pending job with a 1 MiB prompt, stopped with many keys (each stop makes a key)
  const big = await start(client, 'big-prompt', 'p'.repeat(MiB - 64));
  const first = await client.stopJob(big.job_id, { idempotencyKey: 'big-0' });
  assert.equal(first.job.prompt.length, MiB - 64, 'the answer itself carries the whole job');
  for (let i = 1; i < 5; i++) await client.stopJob(big.job_id, { idempotencyKey: `big-${i}` });
  for (let i = 0; i < 5; i++) assert.ok((await kept(`big-${i}`)) < 4096, `key big-${i}: ${await kept(`big-${i}`)} characters stored`);

  // a job that ended with a 1 MiB result (and error-free), stopped after: already_completed
  const l = await fakeLauncher(client);
  const done = await start(client, 'big-result');
  await l.take();
  await l.started(done.job_id);
  await l.completed(done.job_id, 'r'.repeat(MiB - 64));
  const late = await client.stopJob(done.job_id, { idempotencyKey: 'late' });
  assert.equal(late.outcome, 'already_completed');
  assert.ok((await kept('late')) < 4096, `key late: ${await kept('late')} characters stored`);

  // while the job exists, a replay answers it whole, as it is now
  const again = await client.stopJob(big.job_id, { idempotencyKey: 'big-0' });
  assert.deepEqual([again.replayed, again.job.prompt.length, again.job_truncated], [true, MiB - 64, undefined]);

  // once retention deleted it, the key's copy, cut and said so
  clock.advance(RETENTION);
  await c.core.sweep();
  await rejectsWith(client.getJob(big.job_id), 404, 'job_not_found');
  await rejectsWith(client.getJob(done.job_id), 404, 'job_not_found');
  const gone = await client.stopJob(big.job_id, { idempotencyKey: 'big-0' });
  assert.deepEqual(gone, { ...first, job: { ...first.job, prompt: 'p'.repeat(512) }, replayed: true, job_truncated: true });
  const goneResult = await client.stopJob(done.job_id, { idempotencyKey: 'late' });
  assert.deepEqual(goneResult, { ...late, job: { ...late.job, result: 'r'.repeat(512) }, replayed: true, job_truncated: true });
});

test('the client sends a stop whose answer was lost again, with the same key: the first answer, replayed, and nothing more stopped', async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const active = await start(client, 'lost');
  await l.take();
  await l.started(active.job_id);
  const queued = await resume(client, 'lost');

  // a session stop: the coordinator makes it, its answer is lost on the way back
  const px = await droppingProxy(t, c.url, 1, '/sessions/lost/stop');
  const viaProxy = new AgentqClient({ url: px.url, createRetryBackoff: { baseMs: 5, maxMs: 20 } });
  t.after(() => viaProxy.close());
  const answer = await viaProxy.stopSession('lost');
  assert.equal(px.dropped(), 1);
  assert.equal(px.keys.length, 2, 'sent twice');
  assert.ok(px.keys[0] && px.keys[1] === px.keys[0], `one key for both attempts: ${px.keys.join(', ')}`);
  assert.deepEqual(answer, {
    session_name: 'lost',
    stopped: [
      { job_id: queued.job_id, outcome: 'stopped', status: 'stopped', session_name: 'lost' },
      { job_id: active.job_id, outcome: 'stopping', status: 'stopping', session_name: 'lost' },
    ],
    replayed: true,
  });
  // (the second attempt stopped nothing: had it, the active job's outcome would be `stopping` again
  // but the queued one's `already_completed`)

  // a job stop, and a tree stop
  const pending = await start(client, 'lost-job');
  const jobProxy = await droppingProxy(t, c.url, 1, `/jobs/${pending.job_id}/stop`);
  const jobClient = new AgentqClient({ url: jobProxy.url, createRetryBackoff: { baseMs: 5, maxMs: 20 } });
  t.after(() => jobClient.close());
  const stopped = await jobClient.stopJob(pending.job_id);
  assert.deepEqual([stopped.outcome, stopped.status, stopped.replayed, jobProxy.keys.length], ['stopped', 'stopped', true, 2]);
  assert.equal(jobProxy.keys[0], jobProxy.keys[1]);

  await start(client, 'lost-tree');
  const child = await start(client, 'lost-child', 'x', { parent_session_name: 'lost-tree' });
  const treeProxy = await droppingProxy(t, c.url, 1, '/sessions/lost-tree/stop?tree=true');
  const treeClient = new AgentqClient({ url: treeProxy.url, createRetryBackoff: { baseMs: 5, maxMs: 20 } });
  t.after(() => treeClient.close());
  const tree = await treeClient.stopSession('lost-tree', { tree: true });
  assert.deepEqual([tree.stopped.map((s) => s.session_name), tree.replayed, treeProxy.keys.length], [['lost-tree', 'lost-child'], true, 2]);
  assert.equal((await client.getJob(child.job_id)).status, 'stopped');
});

test('a stop refused for a reason of its own is not sent again; stopRetries: 0 sends a lost one once', async (t) => {
  const { c } = await startTest(t);
  const px = await droppingProxy(t, c.url, 1, '/sessions/nobody/stop');
  const viaProxy = new AgentqClient({ url: px.url, stopRetries: 0 });
  t.after(() => viaProxy.close());
  await assert.rejects(viaProxy.stopSession('nobody'), { name: 'AgentqConnectionError' });
  await rejectsWith(viaProxy.stopSession('nobody'), 404, 'session_not_found');
  assert.equal(px.keys.length, 2, 'each call sent once');
  assert.notEqual(px.keys[0], px.keys[1], 'each call its own key');
});
