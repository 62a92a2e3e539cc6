import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { maxMessageBytes } from '../src/core/callbacks.js';
import { ManualClock } from '../src/core/clock.js';
import { startAuthTest } from './auth-helpers.js';
import { busySession, fakeLauncher, rejectsWith, start, startTest } from './helpers.js';

/*
 * `POST /sessions/{name}/messages` (docs/sessions.md, "Messages"): queued for the session's next
 * turn — delivered now as a resume job when it is idle, together with waiting child outcomes when
 * it is busy — 404 for an unknown session, 409 `session_closed` for one that takes no more input.
 */

test('a message to an idle session is delivered now: one resume job carrying it', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const first = await start(client, 'helper');
  await l.take();
  await l.completed(first.job_id, 'ready');

  const sent = await client.sendMessage('helper', { text: 'also check the <tests> & docs' });
  assert.equal(sent.outcome, 'queued');
  assert.equal(sent.session_name, 'helper');
  assert.match(sent.message_id, /^msg_[0-9a-f]{12}$/);
  assert.ok(sent.job_id, 'a resume job was created at once');
  const job = await client.getJob(sent.job_id);
  assert.equal(job.type, 'resume_session');
  assert.deepEqual(job.message_ids, [sent.message_id]);
  assert.equal(job.callback_of, null);
  assert.equal(
    job.prompt,
    `You have a new message:\n\n<message id="${sent.message_id}">\nalso check the &lt;tests&gt; &amp; docs\n</message>`,
  );
  const session = await client.getSession('helper');
  assert.equal(session.status, 'busy');
  assert.deepEqual(session.pending_messages, [], 'nothing left waiting: it is in flight');
  // the launcher gets it like any resume
  assert.equal((await l.take()).job_id, sent.job_id);
});

test('messages to a busy session wait, and go with its next turn together with child outcomes: one resume', async (t) => {
  const { client } = await startTest(t);
  const { l, own } = await busySession(client, 'boss');
  const child = await start(client, 'helper', 'look', { parent_session_name: 'boss' });
  await l.take();

  const m1 = await client.sendMessage('boss', { text: 'first' });
  assert.equal(m1.job_id, null, 'busy: no job yet');
  await l.completed(child.job_id, 'found it');
  const m2 = await client.sendMessage('boss', { text: 'second' });
  assert.equal(m2.job_id, null);
  const waiting = await client.getSession('boss');
  assert.deepEqual(waiting.pending_messages.map((m) => [m.message_id, m.text]), [
    [m1.message_id, 'first'],
    [m2.message_id, 'second'],
  ]);
  assert.deepEqual(waiting.pending_callbacks.map((n) => n.job_id), [child.job_id]);

  // the session's own turn ends: everything waiting goes as ONE delivery
  await l.completed(own.job_id, 'mine');
  const after = await client.getSession('boss');
  assert.deepEqual(after.pending_messages, []);
  assert.deepEqual(after.pending_callbacks, []);
  const delivery = await client.getJob(after.callback_job_id!);
  assert.deepEqual(delivery.message_ids, [m1.message_id, m2.message_id]);
  assert.deepEqual(delivery.callback_of, [child.job_id]);
  assert.match(delivery.prompt, /^You have 2 new messages, oldest first:\n\n<message id="msg_\w+">\nfirst\n<\/message>\n<message id="msg_\w+">\nsecond\n<\/message>\n\nA child session you started has finished/);
  assert.match(delivery.prompt, /<result>found it<\/result>/);
  assert.deepEqual((await client.listJobs({ session_name: 'boss', terminal: 'false' })).jobs.map((j) => j.job_id), [delivery.job_id]);
});

test('a message sent while the turn is being stopped goes when the stopped turn ends; the child outcomes held by the stop go with it', async (t) => {
  const { client } = await startTest(t);
  const { l, own } = await busySession(client, 'boss');
  const child = await start(client, 'helper', 'look', { parent_session_name: 'boss' });
  assert.equal((await l.take()).job_id, child.job_id);
  await l.completed(child.job_id, 'found it');
  assert.equal((await client.stopJob(own.job_id)).outcome, 'stopping');
  // stop, then say what to do instead: the message is new input for the next turn
  const sent = await client.sendMessage('boss', { text: 'do this instead' });
  assert.equal(sent.job_id, null, 'busy: it waits for the stopped turn to end');
  await l.stopped(own.job_id);

  const after = await client.getSession('boss');
  assert.ok(after.callback_job_id, 'the message is delivered, not held with the outcomes the stop held');
  assert.deepEqual(after.pending_messages, []);
  assert.deepEqual(after.pending_callbacks, []);
  const delivery = await client.getJob(after.callback_job_id);
  assert.deepEqual(delivery.message_ids, [sent.message_id]);
  assert.deepEqual(delivery.callback_of, [child.job_id]);
});

test('a message sent before the stop is held with the child outcomes: a stopped session is not resumed at once', async (t) => {
  const { client } = await startTest(t);
  const { l, own } = await busySession(client, 'boss');
  const sent = await client.sendMessage('boss', { text: 'later' });
  await client.stopJob(own.job_id);
  await l.stopped(own.job_id);
  const after = await client.getSession('boss');
  assert.equal(after.callback_job_id, null);
  assert.deepEqual(after.pending_messages.map((m) => m.message_id), [sent.message_id]);
});

/** Session `boss`, idle after its start, whose child's outcome is being delivered to it (`d1` runs). */
async function deliveryRunning(client: Parameters<typeof fakeLauncher>[0]) {
  const l = await fakeLauncher(client);
  const first = await start(client, 'boss');
  await l.take();
  await l.completed(first.job_id, 'ready');
  const child = await start(client, 'helper', 'look', { parent_session_name: 'boss' });
  assert.equal((await l.take()).job_id, child.job_id);
  await l.completed(child.job_id, 'found it');
  const d1 = await l.take();
  assert.deepEqual(d1.callback_of, [child.job_id]);
  await l.started(d1.job_id);
  return { l, child, d1 };
}

test('a message sent while a delivery runs goes at once when that delivery fails, with the outcomes it carried', async (t) => {
  const { client } = await startTest(t);
  const { l, child, d1 } = await deliveryRunning(client);
  const sent = await client.sendMessage('boss', { text: 'and then this' });
  assert.equal(sent.job_id, null);
  await l.failed(d1.job_id, 'rate limited');

  const after = await client.getSession('boss');
  assert.ok(after.callback_job_id, 'the message is not held by the failure of a delivery it was not part of');
  const d2 = await client.getJob(after.callback_job_id);
  assert.deepEqual(d2.message_ids, [sent.message_id]);
  assert.deepEqual(d2.callback_of, [child.job_id], 'the outcome the failed delivery carried goes again, once');
  // that one fails too, with no new input: held now (no loop)
  assert.equal((await l.take()).job_id, d2.job_id);
  await l.failed(d2.job_id, 'rate limited');
  const held = await client.getSession('boss');
  assert.equal(held.callback_job_id, null);
  assert.deepEqual(held.pending_messages.map((m) => m.message_id), [sent.message_id]);
  assert.deepEqual(held.pending_callbacks.map((n) => n.job_id), [child.job_id]);
});

test('a message sent while a delivery runs, which is then stopped, waits with what it carried: the stop holds both', async (t) => {
  const { client } = await startTest(t);
  const { l, child, d1 } = await deliveryRunning(client);
  const sent = await client.sendMessage('boss', { text: 'and then this' });
  await client.stopJob(d1.job_id);
  await l.stopped(d1.job_id);
  const after = await client.getSession('boss');
  assert.equal(after.callback_job_id, null);
  assert.deepEqual(after.pending_messages.map((m) => m.message_id), [sent.message_id]);
  assert.deepEqual(after.pending_callbacks.map((n) => n.job_id), [child.job_id]);
});

test('a session that can take no more input: 409 session_closed, for messages and resumes alike; unknown sessions are 404', async (t) => {
  const { client } = await startTest(t);
  // its start job ends before any launcher took it (stopped while pending)
  const never = await start(client, 'never');
  await client.stopJob(never.job_id);
  const closed = await client.getSession('never');
  assert.equal(closed.accepts_input, false);
  let d = await rejectsWith(client.sendMessage('never', { text: 'hello?' }), 409, 'session_closed');
  assert.equal(d.current_status, 'closed');
  assert.equal(d.session_name, 'never');
  // the refusal says what does work: a start of the same name under the same parent opens it again
  await assert.rejects(client.createJob({ type: 'resume_session', session_name: 'never', prompt: 'again' }), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'session_closed');
    assert.match(err.message, /start_session of this name \(parent_session_name none\)/);
    return true;
  });
  // starting it under another parent is refused, and says how: not "use a resume_session job",
  // which is refused as closed (a client would go from one 409 to the other)
  const boss = await start(client, 'boss');
  try {
    await client.createJob({ type: 'start_session', session_name: 'never', prompt: 'again', parent_session_name: 'boss' });
    assert.fail('a start of a closed session under another parent was accepted');
  } catch (err) {
    const e = err as { status?: number; code?: string; details?: Record<string, unknown>; message: string };
    assert.equal(e.status, 409);
    assert.equal(e.code, 'session_exists');
    assert.equal(e.details?.current_status, 'closed');
    assert.doesNotMatch(e.message, /resume_session/);
    assert.match(e.message, /another name/);
  }
  await client.stopJob(boss.job_id);
  d = await rejectsWith(client.sendMessage('nobody', { text: 'hello?' }), 404, 'session_not_found');
  assert.equal(d.session_name, 'nobody');

  // a session whose start did run stays open, whatever became of its jobs
  const l = await fakeLauncher(client);
  const ran = await start(client, 'ran');
  await l.take();
  await l.started(ran.job_id);
  await l.failed(ran.job_id, 'crashed');
  assert.equal((await client.getSession('ran')).accepts_input, true);
  assert.equal((await client.sendMessage('ran', { text: 'try again' })).outcome, 'queued');
});

test('a closed session may be started again under its parent: it takes input again, and the message it held is delivered after the new start', async (t) => {
  const { client } = await startTest(t);
  const first = await client.createJob({ type: 'start_session', session_name: 'retry', prompt: 'one', requires: { zone: 'nowhere' } });
  await client.stopJob(first.job_id); // stopped before any launcher ran it: closed
  assert.equal((await client.getSession('retry')).accepts_input, false);

  const again = await client.createJob({ type: 'start_session', session_name: 'retry', prompt: 'two', agent_name: 'helper' });
  const session = await client.getSession('retry');
  assert.equal(session.accepts_input, true);
  assert.equal(session.agent_name, 'helper');
  assert.equal(session.requires, null, 'what the new start asks for replaces the first');
  assert.deepEqual(session.job_ids, [first.job_id, again.job_id]);
  assert.equal((await client.sendMessage('retry', { text: 'and then this' })).outcome, 'queued');

  const l = await fakeLauncher(client);
  assert.equal((await l.take()).job_id, again.job_id);
  await l.started(again.job_id);
  await l.completed(again.job_id);
  const delivery = await l.take();
  assert.equal(delivery.type, 'resume_session');
  assert.match(delivery.prompt, /and then this/);
});

test('a session closed by its start ending before it ran ends the resumes queued behind that start: none runs', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, {}, { clock });
  // sent while the start waited: accepted, queued behind it
  const first = await start(client, 'early', 'begin', { timeout_ms: 1_000 });
  const queued = await client.createJob({ type: 'resume_session', session_name: 'early', prompt: 'and then' });
  assert.equal(queued.status, 'pending');
  clock.advance(1_000);
  await c.core.sweep(); // the start times out before any launcher took it: the session closes
  assert.equal((await client.getJob(first.job_id)).status, 'timed_out');
  const s = await client.getSession('early');
  assert.equal(s.accepts_input, false);
  assert.equal(s.status, 'idle');
  // its summary tells why it closed: the start's end, not the resume's
  assert.equal(s.last_job_status, 'timed_out');
  assert.match(s.last_error ?? '', /timed out/);
  const ended = await client.getJob(queued.job_id);
  assert.equal(ended.status, 'failed');
  assert.equal(ended.error_code, 'session_closed');
  // a launcher that comes now finds nothing of that session to run
  const l = await fakeLauncher(client);
  const other = await start(client, 'other');
  assert.equal((await l.take()).job_id, other.job_id);
});

test('a start given back to the queue (its claim lapsed) and then stopped while pending closes its session: it never ran either', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { claimLeaseSeconds: 20, heartbeatIntervalSeconds: 10, heartbeatTimeoutSeconds: 120 }, { clock });
  const l = await fakeLauncher(client);
  const job = await start(client, 'requeued');
  assert.equal((await l.take()).job_id, job.job_id);
  clock.advance(21_000);
  await l.heartbeat();
  await c.core.sweep(); // never started within the lease: back to the queue
  const back = await client.getJob(job.job_id);
  assert.equal(back.status, 'pending');
  assert.equal(back.attempts, 1);
  await client.stopJob(job.job_id);
  const s = await client.getSession('requeued');
  assert.equal(s.accepts_input, false, 'no conversation exists to continue');
  await rejectsWith(client.sendMessage('requeued', { text: 'hello?' }), 409, 'session_closed');
  await rejectsWith(client.createJob({ type: 'resume_session', session_name: 'requeued', prompt: 'again' }), 409, 'session_closed');
});

test('a start its launcher failed before it started (project_dir missing there) closes its session; one that named its conversation does not', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const refused = await start(client, 'nowhere');
  assert.equal((await l.take()).job_id, refused.job_id);
  await client.reportFailed(refused.job_id, { launcher_id: l.id, error: 'project_dir /x does not exist on this host', error_code: 'project_dir_not_found' });
  assert.equal((await client.getSession('nowhere')).accepts_input, false, 'no conversation exists to continue');
  await rejectsWith(client.createJob({ type: 'resume_session', session_name: 'nowhere', prompt: 'again' }), 409, 'session_closed');

  // failed at once too, but the executor had begun a conversation and said so: it can go on
  const begun = await start(client, 'begun');
  assert.equal((await l.take()).job_id, begun.job_id);
  await client.reportFailed(begun.job_id, { launcher_id: l.id, error: 'crashed', executor_session_id: 'conv-1' });
  assert.equal((await client.getSession('begun')).accepts_input, true);
  assert.equal((await client.createJob({ type: 'resume_session', session_name: 'begun', prompt: 'again' })).status, 'pending');
});

test('messages: the text is validated (400 naming the field), and records who sent it', async (t) => {
  const a = await startAuthTest(t);
  await start(a.as.client, 'target');
  const res = await request(`${a.c.url}/sessions/target/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${a.secrets.client}`, 'content-type': 'application/json' },
    body: JSON.stringify({ text: '' }),
  });
  const body = (await res.body.json()) as { error: { code: string; details: { field: string } } };
  assert.equal(res.statusCode, 400);
  assert.equal(body.error.code, 'validation_failed');
  assert.equal(body.error.details.field, 'text');
  await rejectsWith(a.as.reader.sendMessage('target', { text: 'hi' }), 403, 'forbidden');
  await a.as.client.sendMessage('target', { text: 'from the client' });
  const [m] = (await a.as.reader.getSession('target')).pending_messages;
  assert.equal(m?.created_by, 'client-token');
});

// a child's name is 200 characters at most, and up to 1,000 bytes escaped (`&` is `&amp;`)
for (const kid of ['kid', '&'.repeat(200)]) {
  test(`a message is bounded as it appears in the prompt (escaped), leaving room for a child outcome: both arrive whole (a child named ${kid.slice(0, 5)}…)`, async (t) => {
    const maxPromptBytes = 8 * 1024;
    const { client } = await startTest(t, { maxPromptBytes });
    const { l, own } = await busySession(client, 'boss', 'p');
    const child = await start(client, kid, 'p', { parent_session_name: 'boss' });
    await l.take();
    await l.completed(child.job_id, 'THE-RESULT');
    // 3,000 '<' are 12,000 bytes once escaped: refused with the field, not cut in the prompt
    await rejectsWith(client.sendMessage('boss', { text: `${'<'.repeat(3000)}END` }), 400, 'validation_failed');
    await rejectsWith(client.sendMessage('boss', { text: 'x'.repeat(8000) }), 400, 'validation_failed');
    // a message near the bound (its tags take under 100 bytes) still leaves the outcome its room
    const sent = await client.sendMessage('boss', { text: `${'x'.repeat(maxMessageBytes(maxPromptBytes) - 120)}END-OF-MESSAGE` });
    await l.completed(own.job_id);
    const delivery = await l.take();
    assert.deepEqual(delivery.callback_of, [child.job_id]);
    assert.deepEqual(delivery.message_ids, [sent.message_id]);
    assert.ok(Buffer.byteLength(delivery.prompt) <= maxPromptBytes);
    assert.ok(delivery.prompt.includes('END-OF-MESSAGE'), 'the message whole');
    assert.ok(delivery.prompt.includes('THE-RESULT'), 'the outcome whole');
    assert.deepEqual((await client.getSession('boss')).pending_callbacks, []);
  });
}
