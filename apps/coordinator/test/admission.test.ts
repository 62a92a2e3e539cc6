import assert from 'node:assert/strict';
import { join } from 'node:path';
import { getHeapStatistics } from 'node:v8';
import { test } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { request } from 'undici';
import { ManualClock } from '../src/core/clock.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { queuedBytesLimit } from '../src/limits.js';
import { startCoordinator } from '../src/start.js';
import { busySession, closeAfter, fakeLauncher, rejectsWith, resume, start, startTest, tempDir } from './helpers.js';

// issue 11, item 1: a flood of large prompts must not take the heap; admission is memory-aware

const KIB = 1024;
const prompt = (n: number, c = 'p') => c.repeat(n);

/** A client that reports a 503 at once instead of honouring its Retry-After. */
function noRetryClient(t: import('node:test').TestContext, url: string): AgentqClient {
  const client = new AgentqClient({ url, overloadRetries: 0 });
  t.after(() => client.close());
  return client;
}

async function batch(url: string, jobs: object[]): Promise<{ status: number; code?: string }> {
  const res = await request(`${url}/jobs/batch`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jobs }) });
  const body = (await res.body.json()) as { error?: { code: string } };
  return { status: res.statusCode, ...(body.error ? { code: body.error.code } : {}) };
}

test('past MAX_QUEUED_BYTES a create is 503 queue_full with Retry-After; what was accepted is untouched and runs', async (t) => {
  const { c } = await startTest(t, { maxQueuedBytes: 10 * KIB, overloadRetryAfterSeconds: 7 });
  const client = noRetryClient(t, c.url);
  const accepted = [];
  for (let i = 0; i < 4; i++) accepted.push(await start(client, `s${i}`, prompt(2 * KIB)));
  // 8 KiB queued: 2 KiB more fits exactly, one byte more does not
  const details = await rejectsWith(start(client, 'too-much', prompt(2 * KIB + 1)), 503, 'queue_full');
  assert.deepEqual(details, { queued_bytes: 8 * KIB, request_bytes: 2 * KIB + 1, max_queued_bytes: 10 * KIB, retry_after_seconds: 7 });
  await rejectsWith(client.getSession('too-much'), 404, 'session_not_found'); // refused whole: no session either

  // the raw answer: the standard error shape, and the header
  const raw = await request(`${c.url}/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'start_session', session_name: 'raw', prompt: prompt(3 * KIB) }),
  });
  assert.equal(raw.statusCode, 503);
  assert.equal(raw.headers['retry-after'], '7');
  assert.equal(((await raw.body.json()) as { error: { code: string } }).error.code, 'queue_full');

  // a batch is all or none, measured as a whole
  assert.deepEqual(
    await batch(c.url, [
      { type: 'start_session', session_name: 'b1', prompt: prompt(KIB) },
      { type: 'start_session', session_name: 'b2', prompt: prompt(KIB + 1) },
    ]),
    { status: 503, code: 'queue_full' },
  );
  await rejectsWith(client.getSession('b1'), 404, 'session_not_found');

  const fits = await start(client, 'fits', prompt(2 * KIB)); // exactly at the limit
  assert.equal(fits.status, 'pending');
  await rejectsWith(start(client, 'one-byte', 'x'), 503, 'queue_full');

  // nothing accepted was harmed: every job is still pending, and a launcher runs them all
  for (const j of [...accepted, fits]) assert.equal((await client.getJob(j.job_id)).status, 'pending');
  const l = await fakeLauncher(client);
  const taken = await l.take();
  assert.equal(taken.job_id, accepted[0]!.job_id);
  // taking a job frees its bytes: creates are accepted again without any restart
  const after = await start(client, 'after', prompt(2 * KIB));
  assert.equal(after.status, 'pending');
  await l.completed(taken.job_id);
  for (const j of [...accepted.slice(1), fits, after]) {
    assert.equal((await l.take()).job_id, j.job_id);
    await l.completed(j.job_id);
  }
  assert.equal((await client.health()).queue_depth, 0);
});

test('jobs the coordinator makes itself (resumes waiting behind a busy session, callbacks) count but are never refused', async (t) => {
  const { c } = await startTest(t, { maxQueuedBytes: 4 * KIB });
  const client = noRetryClient(t, c.url);
  const l = await fakeLauncher(client);
  await start(client, 'parent', 'p');
  const own = await l.take();
  await l.started(own.job_id);
  const child = await start(client, 'child', prompt(3 * KIB), { parent_session_name: 'parent' });
  // a queued resume of the busy parent fills the queue up to the limit
  await resume(client, 'parent', prompt(KIB - 1));
  await rejectsWith(start(client, 'refused', prompt(2)), 503, 'queue_full');
  // the child runs and completes: its outcome is queued for the parent, which is busy
  assert.equal((await l.take()).job_id, child.job_id);
  await l.completed(child.job_id, prompt(5 * KIB, 'r'));
  assert.equal((await client.getSession('parent')).pending_callbacks.length, 1);
  // the parent's turn ends: its queued resume runs, then the callback resume is created even
  // though its prompt (the child's 5 KiB result) is past the limit on its own
  await l.completed(own.job_id);
  const next = await l.take();
  await l.completed(next.job_id);
  const callback = await l.take();
  assert.deepEqual(callback.callback_of, [child.job_id]);
  assert.ok(Buffer.byteLength(callback.prompt) > 4 * KIB);
});

test('MAX_QUEUED_BYTES defaults to a quarter of the heap limit and is read from the environment', () => {
  assert.equal(queuedBytesLimit(loadConfig({})), Math.floor(getHeapStatistics().heap_size_limit / 4));
  assert.equal(queuedBytesLimit(loadConfig({ MAX_QUEUED_BYTES: '5000000' })), 5_000_000);
  assert.throws(() => loadConfig({ MAX_QUEUED_BYTES: '0' }), (e: Error) => e instanceof ConfigError && e.variable === 'MAX_QUEUED_BYTES');
  assert.throws(() => loadConfig({ MAX_QUEUED_BYTES: 'lots' }), /MAX_QUEUED_BYTES: expected a decimal number/);
});

test('messages to a busy session count against MAX_QUEUED_BYTES and are refused past it; delivered, they free their bytes', async (t) => {
  const { c } = await startTest(t, { maxQueuedBytes: 16 * KIB, overloadRetryAfterSeconds: 7 });
  const client = noRetryClient(t, c.url);
  const { l, own } = await busySession(client, 'busy', 'p');
  // the session is busy: messages wait in it, held in memory until its next turn
  for (let i = 0; i < 3; i++) assert.equal((await client.sendMessage('busy', { text: prompt(4 * KIB, 'm') })).outcome, 'queued');
  assert.equal(c.core.store.pendingMessageBytes?.(), 12 * KIB);
  const details = await rejectsWith(client.sendMessage('busy', { text: prompt(4 * KIB + 1, 'm') }), 503, 'queue_full');
  assert.equal(details.retry_after_seconds, 7);
  assert.equal(details.queued_bytes, 12 * KIB);
  // and creates see them too
  await rejectsWith(start(client, 'other', prompt(5 * KIB)), 503, 'queue_full');
  assert.equal((await client.getSession('busy')).pending_messages.length, 3, 'the refused message was not kept');

  // the turn ends: the messages go in one delivery (a pending job's prompt), then to its launcher
  await l.completed(own.job_id);
  assert.equal(c.core.store.pendingMessageBytes?.(), 0);
  const delivery = await l.take();
  assert.ok(delivery.prompt.includes(prompt(4 * KIB, 'm')));
  assert.equal((await start(client, 'other', prompt(5 * KIB))).status, 'pending');
});

test('child outcomes a busy parent holds count against MAX_QUEUED_BYTES: creates are refused past it; delivered and done, they free their bytes', async (t) => {
  // Before, a parent that stayed busy held every child's result (up to the body limit each) in
  // memory, uncounted: a flood of children could grow the heap without bound
  const { c } = await startTest(t, { maxQueuedBytes: 16 * KIB, overloadRetryAfterSeconds: 7 });
  const client = noRetryClient(t, c.url);
  const { l, own } = await busySession(client, 'parent', 'p');
  const kids = [];
  for (let i = 0; i < 2; i++) kids.push(await start(client, `kid${i}`, 'k', { parent_session_name: 'parent' }));
  for (const kid of kids) {
    assert.equal((await l.take()).job_id, kid.job_id);
    await l.completed(kid.job_id, prompt(6 * KIB, 'r'));
  }
  const failing = await start(client, 'kid-failing', 'k', { parent_session_name: 'parent' });
  assert.equal((await l.take()).job_id, failing.job_id);
  await l.failed(failing.job_id, prompt(KIB, 'e'));
  // the parent is busy: the three outcomes wait in it, 13 KiB of results and errors
  assert.equal((await client.getSession('parent')).pending_callbacks.length, 3);
  assert.equal(c.core.store.heldOutcomeBytes?.(), 13 * KIB);
  const details = await rejectsWith(start(client, 'other', prompt(3 * KIB + 1)), 503, 'queue_full');
  assert.equal(details.queued_bytes, 13 * KIB);
  assert.equal(details.retry_after_seconds, 7);
  await rejectsWith(client.sendMessage('parent', { text: prompt(3 * KIB + 1, 'm') }), 503, 'queue_full');

  // the parent's turn ends: the outcomes go in one delivery, and count until it completes (a
  // delivery that does not complete queues them again)
  await l.completed(own.job_id);
  const delivery = await l.take();
  assert.deepEqual(delivery.callback_of?.length, 3);
  assert.equal(c.core.store.heldOutcomeBytes?.(), 13 * KIB);
  await l.started(delivery.job_id);
  await l.completed(delivery.job_id);
  assert.equal(c.core.store.heldOutcomeBytes?.(), 0);
  assert.equal((await start(client, 'other', prompt(3 * KIB + 1))).status, 'pending');
});

test('held child outcomes are counted once however they move: a delivery that fails queues them again, and a closed parent deleted by retention takes them with it', async (t) => {
  const clock = new ManualClock();
  const retention = 60_000;
  // only the test sweeps; the launcher stays alive across the clock's jump
  const { c, client } = await startTest(t, { jobRetentionMs: retention, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const held = () => c.core.store.heldOutcomeBytes?.();
  const { l, own } = await busySession(client, 'parent', 'p');
  const kid = await start(client, 'kid', 'k', { parent_session_name: 'parent' });
  assert.equal((await l.take()).job_id, kid.job_id);
  await l.completed(kid.job_id, prompt(4 * KIB, 'r'));
  assert.equal(held(), 4 * KIB);

  // the delivery that carries the outcome fails: the outcome is queued again, and counted once
  await l.completed(own.job_id);
  const failing = await l.take();
  assert.deepEqual(failing.callback_of, [kid.job_id]);
  await l.failed(failing.job_id, 'the parent could not take it');
  assert.equal((await client.getSession('parent')).pending_callbacks.length, 1);
  assert.equal(held(), 4 * KIB);
  // the next child's outcome wakes the held delivery: both go, and are done with once it completes
  const kid2 = await start(client, 'kid2', 'k', { parent_session_name: 'parent' });
  assert.equal((await l.take()).job_id, kid2.job_id);
  await l.failed(kid2.job_id, prompt(2 * KIB, 'e'));
  assert.equal(held(), 6 * KIB);
  const delivery = await l.take();
  assert.deepEqual(delivery.callback_of, [kid.job_id, kid2.job_id]);
  assert.equal(held(), 6 * KIB, 'carried by the delivery in flight: counted until it completes');
  await l.completed(delivery.job_id);
  assert.equal(held(), 0);

  // a closed session (its start stopped before it ran) holds its child's outcome until retention
  // deletes it with what it holds
  const never = await start(client, 'never-ran');
  const orphan = await start(client, 'orphan', 'k', { parent_session_name: 'never-ran' });
  await client.stopJob(never.job_id);
  assert.equal((await l.take()).job_id, orphan.job_id);
  await l.completed(orphan.job_id, prompt(3 * KIB, 'r'));
  assert.equal((await client.getSession('never-ran')).accepts_input, false);
  assert.equal(held(), 3 * KIB);
  clock.advance(retention);
  await c.core.sweep(); // the jobs
  await c.core.sweep(); // the child session
  await c.core.sweep(); // the closed parent, with the outcome it could never take
  await rejectsWith(client.getSession('never-ran'), 404, 'session_not_found');
  assert.equal(held(), 0);
});

test('SQLite: after a restart the outcomes sessions hold are counted again from the rows, queued and carried by a delivery in flight', async (t) => {
  const config = { databaseUrl: `sqlite:${join(tempDir(t), 'agentq.db')}`, maxQueuedBytes: 16 * KIB, sweepIntervalMs: 600_000, logLevel: 'silent' } as const;
  let c = closeAfter(t, await startCoordinator(config));
  let client = noRetryClient(t, c.url);
  const { l } = await busySession(client, 'busy', 'p');
  const kid = await start(client, 'kid', 'k', { parent_session_name: 'busy' });
  assert.equal((await l.take()).job_id, kid.job_id);
  await l.completed(kid.job_id, prompt(5 * KIB, 'r'));
  // a second parent whose delivery is in flight (taken, not ended)
  const other = await start(client, 'delivering', 'p');
  assert.equal((await l.take()).job_id, other.job_id);
  await l.started(other.job_id);
  const kid2 = await start(client, 'kid2', 'k', { parent_session_name: 'delivering' });
  assert.equal((await l.take()).job_id, kid2.job_id);
  await l.failed(kid2.job_id, prompt(3 * KIB, 'e'));
  await l.completed(other.job_id);
  const delivery = await l.take();
  assert.deepEqual(delivery.callback_of, [kid2.job_id]);
  await l.started(delivery.job_id); // running: a restart leaves it with its launcher
  assert.equal(c.core.store.heldOutcomeBytes?.(), 8 * KIB);
  await client.close();
  await c.close();

  c = closeAfter(t, await startCoordinator(config));
  client = noRetryClient(t, c.url);
  assert.equal(c.core.store.heldOutcomeBytes?.(), 8 * KIB, 'counted again from the rows, as before the restart');
  // and admission sees them (nothing is pending: the parents' own jobs and the delivery run)
  const details = await rejectsWith(start(client, 'refused', prompt(8 * KIB + 1)), 503, 'queue_full');
  assert.equal(details.queued_bytes, 8 * KIB);
  // the delivery completes: its outcome is done with; the one queued stays
  await client.reportCompleted(delivery.job_id, { launcher_id: l.id, status: 'success' });
  assert.equal(c.core.store.heldOutcomeBytes?.(), 5 * KIB);
});

test('one session holds at most 4 prompts of MAX_PROMPT_BYTES in messages for its next turn, then 503 queue_full', async (t) => {
  const maxPromptBytes = 8 * KIB;
  const { c } = await startTest(t, { maxPromptBytes, overloadRetryAfterSeconds: 7 });
  const client = noRetryClient(t, c.url);
  const { l } = await busySession(client, 'busy', 'p');
  const text = prompt(5 * KIB, 'm');
  for (let i = 0; i < 6; i++) await client.sendMessage('busy', { text }); // 30 KiB of 32
  const details = await rejectsWith(client.sendMessage('busy', { text }), 503, 'queue_full');
  assert.deepEqual(
    [details.session_name, details.pending_messages, details.pending_message_bytes, details.retry_after_seconds],
    ['busy', 6, 30 * KIB, 7],
  );
  assert.equal(c.core.admission.refused, 1, 'counted in agentq_requests_refused_total{reason="queue_full"}');
  // another session is not held back by this one
  const other = await start(client, 'other', 'p');
  await l.take();
  await l.started(other.job_id);
  assert.equal((await client.sendMessage('other', { text })).outcome, 'queued');
});
