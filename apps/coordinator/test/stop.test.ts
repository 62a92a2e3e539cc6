import assert from 'node:assert/strict';
import { test } from 'node:test';
import { busySession, fakeLauncher, parked, rejectsWith, resume, start, startTest } from './helpers.js';

test('stopping a pending job ends it as stopped at once; no launcher ever gets it', async (t) => {
  const { client } = await startTest(t);
  const job = await start(client, 'never-run');
  const answer = await client.stopJob(job.job_id);
  assert.equal(answer.job_id, job.job_id);
  assert.equal(answer.outcome, 'stopped');
  assert.equal(answer.status, 'stopped');
  assert.equal(answer.job.terminal, true);
  assert.equal(answer.job.stop_reason, 'requested');
  assert.ok(answer.job.stop_requested_at);
  const after = await client.getJob(job.job_id);
  assert.equal(after.status, 'stopped');
  assert.ok(after.completed_at);
  assert.equal((await client.getSession('never-run')).status, 'idle');

  const next = await start(client, 'runs');
  const l = await fakeLauncher(client);
  assert.equal((await l.take()).job_id, next.job_id, 'the stopped job left the queue');
});

test('stopping the queued head of a busy session lets the job behind it run next', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const first = await start(client, 'seq');
  await l.take();
  const second = await resume(client, 'seq');
  const third = await resume(client, 'seq');
  assert.equal((await client.stopJob(second.job_id)).outcome, 'stopped');
  await l.completed(first.job_id);
  assert.equal((await l.take()).job_id, third.job_id);
});

test('stopping a running job wakes the owning launcher\'s parked poll with stop_jobs; its stopped report ends it', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const l = await fakeLauncher(client);
  const job = await start(client, 'long-run');
  await l.take();
  await l.started(job.job_id);

  const isParked = parked(c.core, l.id);
  const poll = l.poll();
  await isParked;
  const answer = await client.stopJob(job.job_id);
  assert.equal(answer.outcome, 'stopping');
  assert.equal(answer.status, 'stopping');
  assert.equal(answer.job.terminal, false);
  assert.deepEqual(await poll, { stop_jobs: [job.job_id] });
  assert.equal((await client.getSession('long-run')).status, 'busy', 'a stopping job still holds its session');

  // asking again while it stops changes nothing
  assert.equal((await client.stopJob(job.job_id)).outcome, 'stopping');

  await l.stopped(job.job_id, 'SIGTERM');
  const done = await client.getJob(job.job_id);
  assert.equal(done.status, 'stopped');
  assert.equal(done.terminal, true);
  assert.match(done.error ?? '', /SIGTERM/);
  assert.equal((await client.getSession('long-run')).status, 'idle');
});

test('a stop requested while the launcher is not polling is delivered on its next poll', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'later');
  await l.take();
  await l.started(job.job_id);
  await client.stopJob(job.job_id);
  assert.deepEqual(await l.poll(), { stop_jobs: [job.job_id] });
});

test('stopping a claimed job that was not started yet also goes through the launcher', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'just-claimed');
  await l.take();
  assert.equal((await client.stopJob(job.job_id)).outcome, 'stopping');
  assert.deepEqual(await l.poll(), { stop_jobs: [job.job_id] });
  await l.stopped(job.job_id, null);
  assert.equal((await client.getJob(job.job_id)).status, 'stopped');
});

test('a heartbeat answers stop_jobs for the launcher\'s stopping jobs', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const other = await fakeLauncher(client, 'other-host');
  const a = await start(client, 'hb-a');
  const b = await start(client, 'hb-b');
  await l.take();
  await l.take();
  await l.started(a.job_id);
  await l.started(b.job_id);
  assert.deepEqual((await l.heartbeat()).stop_jobs, []);
  await client.stopJob(b.job_id);
  assert.deepEqual((await l.heartbeat()).stop_jobs, [b.job_id]);
  assert.deepEqual((await other.heartbeat()).stop_jobs, [], 'only the owner is told');
  await l.stopped(b.job_id);
  assert.deepEqual((await l.heartbeat()).stop_jobs, []);
});

test('stopping a terminal job answers already_completed and leaves it unchanged', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'finished');
  await l.take();
  await l.completed(job.job_id, 'the answer');
  const before = await client.getJob(job.job_id);
  const answer = await client.stopJob(job.job_id);
  assert.equal(answer.outcome, 'already_completed');
  assert.equal(answer.status, 'completed');
  assert.deepEqual(answer.job, before);
  assert.deepEqual(await client.getJob(job.job_id), before);
});

test('stopping an unknown job is 404 job_not_found', async (t) => {
  const { client } = await startTest(t);
  const details = await rejectsWith(client.stopJob('job_000000000000'), 404, 'job_not_found');
  assert.equal(details.job_id, 'job_000000000000');
});

test('POST /sessions/{name}/stop stops the active job and the queued ones', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const active = await start(client, 'busy-bee');
  await l.take();
  await l.started(active.job_id);
  const queued1 = await resume(client, 'busy-bee');
  const queued2 = await resume(client, 'busy-bee');
  const answer = await client.stopSession('busy-bee');
  assert.equal(answer.session_name, 'busy-bee');
  const byId = new Map(answer.stopped.map((s) => [s.job_id, s]));
  assert.deepEqual(byId.get(active.job_id), { job_id: active.job_id, outcome: 'stopping', status: 'stopping', session_name: 'busy-bee' });
  assert.deepEqual(byId.get(queued1.job_id), { job_id: queued1.job_id, outcome: 'stopped', status: 'stopped', session_name: 'busy-bee' });
  assert.deepEqual(byId.get(queued2.job_id), { job_id: queued2.job_id, outcome: 'stopped', status: 'stopped', session_name: 'busy-bee' });
  assert.equal(answer.stopped.length, 3);
  assert.deepEqual(await l.poll(), { stop_jobs: [active.job_id] });
  await l.stopped(active.job_id);
  const s = await client.getSession('busy-bee');
  assert.equal(s.status, 'idle');
  assert.equal(s.last_job_status, 'stopped');
});

test('stopping an idle session is 409 session_idle; an unknown one is 404', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'resting');
  await l.take();
  await l.completed(job.job_id);
  const details = await rejectsWith(client.stopSession('resting'), 409, 'session_idle');
  assert.equal(details.session_name, 'resting');
  await rejectsWith(client.stopSession('nobody'), 404, 'session_not_found');
});

test('a stop wakes only the parked poll of the launcher that holds the job', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const owner = await fakeLauncher(client, 'owner');
  const bystander = await fakeLauncher(client, 'bystander');
  const job = await start(client, 'owned');
  await owner.take();
  await owner.started(job.job_id);
  const bothParked = Promise.all([parked(c.core, owner.id), parked(c.core, bystander.id)]);
  const ownerPoll = owner.poll();
  const bystanderPoll = bystander.poll();
  await bothParked;
  await client.stopJob(job.job_id);
  assert.deepEqual(await ownerPoll, { stop_jobs: [job.job_id] });
  // the bystander is still parked: a new job goes to it
  const next = await start(client, 'for-bystander');
  assert.equal((await bystanderPoll)?.job?.job_id, next.job_id);
});

test('stopping a parent session does not restart it with queued child outcomes', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const own = await start(client, 'parent');
  await l.take();
  await l.started(own.job_id);
  const child = await start(client, 'child', 'x', { parent_session_name: 'parent' });
  await l.take();
  await l.completed(child.job_id, 'child result');
  assert.equal((await client.getSession('parent')).pending_callbacks.length, 1);
  await client.stopSession('parent');
  await l.stopped(own.job_id);
  const p = await client.getSession('parent');
  assert.equal(p.status, 'idle', 'the stop is not undone by a callback resume');
  assert.deepEqual(p.pending_callbacks.map((n) => n.job_id), [child.job_id], 'the outcome is kept for later');

  // the parent's next own turn ends: the kept outcome is delivered then
  const next = await resume(client, 'parent');
  assert.equal((await l.take()).job_id, next.job_id);
  await l.completed(next.job_id);
  const after = await client.getSession('parent');
  assert.ok(after.callback_job_id);
  assert.deepEqual((await client.getJob(after.callback_job_id)).callback_of, [child.job_id]);
});

test('a stopped parent whose turn finished before the kill (completed or failed) is not restarted by queued child outcomes either', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  for (const end of ['completed', 'failed'] as const) {
    const parent = `parent-${end}`;
    const own = await start(client, parent);
    await l.take();
    await l.started(own.job_id);
    const child = await start(client, `child-${end}`, 'x', { parent_session_name: parent });
    await l.take();
    await l.completed(child.job_id, 'child result');
    await client.stopSession(parent);
    // the executor had already given its answer when the stop reached it: the answer stands
    if (end === 'completed') await l.completed(own.job_id, 'done anyway');
    else await l.failed(own.job_id, 'crashed anyway');
    assert.equal((await client.getJob(own.job_id)).status, end);
    const p = await client.getSession(parent);
    assert.equal(p.callback_job_id, null, `${end}: the stop is not undone by a callback resume`);
    assert.equal(p.status, 'idle');
    assert.deepEqual(p.pending_callbacks.map((n) => n.job_id), [child.job_id], `${end}: the outcome is kept for later`);
  }
});

/** lead (its own turn over, waiting) ─┬─ c1 (running) ── g1 (running)
 *                                      └─ c2 (queued behind c2's running turn) */
async function tree(client: Parameters<typeof start>[0]) {
  const l = await fakeLauncher(client);
  const lead = await start(client, 'lead');
  await l.take();
  await l.started(lead.job_id);
  const c1 = await start(client, 'c1', 'x', { parent_session_name: 'lead' });
  const c2 = await start(client, 'c2', 'y', { parent_session_name: 'lead' });
  const g1 = await start(client, 'g1', 'z', { parent_session_name: 'c1' });
  for (const job of [c1, c2, g1]) {
    assert.equal((await l.take()).job_id, job.job_id);
    await l.started(job.job_id);
  }
  await l.completed(lead.job_id, 'started my helpers');
  const c2queued = await resume(client, 'c2', 'and then');
  return { l, lead, c1, c2, g1, c2queued };
}

test('POST /sessions/{name}/stop?tree=true stops every session under it, and none of them is resumed by its stopped children', async (t) => {
  const { client } = await startTest(t);
  const { l, c1, c2, g1, c2queued } = await tree(client);

  const answer = await client.stopSession('lead', { tree: true });
  assert.equal(answer.session_name, 'lead');
  const got = answer.stopped.map((s) => [s.session_name, s.job_id, s.outcome]).sort();
  const want = [
    ['c1', c1.job_id, 'stopping'],
    ['c2', c2.job_id, 'stopping'],
    ['c2', c2queued.job_id, 'stopped'],
    ['g1', g1.job_id, 'stopping'],
  ].sort();
  assert.deepEqual(got, want);
  // the launcher ends them; their outcomes climb the tree, and wake nobody
  for (const job of [g1, c1, c2]) await l.stopped(job.job_id);
  for (const name of ['lead', 'c1', 'c2', 'g1']) {
    const s = await client.getSession(name);
    assert.equal(s.status, 'idle', `${name} stays stopped`);
    assert.equal(s.callback_job_id, null, `${name}: no callback resume`);
  }
  assert.deepEqual((await client.getSession('lead')).pending_callbacks.map((n) => n.job_id).sort(), [c1.job_id, c2.job_id, c2queued.job_id].sort());
  assert.deepEqual((await client.getSession('c1')).pending_callbacks.map((n) => n.job_id), [g1.job_id]);
  assert.equal(await l.poll(), null, 'nothing to run');

  // new input wakes one session, with what its children reported
  const sent = await client.sendMessage('lead', { text: 'go on' });
  assert.ok(sent.job_id);
  assert.deepEqual(((await client.getJob(sent.job_id)).callback_of ?? []).sort(), [c1.job_id, c2.job_id, c2queued.job_id].sort());
  assert.equal((await client.getSession('c1')).callback_job_id, null, 'c1 still waits for its own input');
});

test('a tree stop: 409 session_idle when nothing under it runs, 404 for an unknown session, 400 for a bad tree value', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const lead = await start(client, 'quiet');
  await l.take();
  const child = await start(client, 'quiet-child', 'x', { parent_session_name: 'quiet' });
  await l.completed(lead.job_id);
  await l.take();
  await l.completed(child.job_id);
  const delivery = (await client.getSession('quiet')).callback_job_id!;
  await l.take();
  await l.completed(delivery);
  const details = await rejectsWith(client.stopSession('quiet', { tree: true }), 409, 'session_idle');
  assert.equal(details.session_name, 'quiet');
  await rejectsWith(client.stopSession('nobody', { tree: true }), 404, 'session_not_found');
  const res = await fetch(`${client.url}/sessions/quiet/stop?tree=yes`, { method: 'POST' });
  assert.equal(res.status, 400);
  assert.match(JSON.stringify(await res.json()), /tree/);
});

test('stopping one child does not keep its parent from hearing of it: only a stopped parent holds stopped outcomes', async (t) => {
  const { client } = await startTest(t);
  const { l, c2 } = await tree(client);
  await client.stopSession('c2');
  await l.stopped(c2.job_id);
  const lead = await client.getSession('lead');
  assert.ok(lead.callback_job_id, 'the idle parent is told at once');
});

test('a parent whose callback resume failed hears of its next child, also one stopped by request: it was not stopped', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const own = await start(client, 'waiter');
  await l.take();
  const c1 = await start(client, 'w-c1', 'x', { parent_session_name: 'waiter' });
  const c2 = await start(client, 'w-c2', 'y', { parent_session_name: 'waiter' });
  await l.completed(own.job_id, 'started my helpers');
  assert.equal((await l.take()).job_id, c1.job_id);
  assert.equal((await l.take()).job_id, c2.job_id);
  await l.started(c2.job_id);
  await l.completed(c1.job_id, 'c1 result');
  // the delivery of c1's outcome fails: it is kept, for the next child outcome to take along
  const delivery = (await client.getSession('waiter')).callback_job_id!;
  assert.equal((await l.take()).job_id, delivery);
  await l.failed(delivery, 'crashed');
  assert.deepEqual((await client.getSession('waiter')).pending_callbacks.map((n) => n.job_id), [c1.job_id]);
  // someone stops the other child: the parent, which nobody stopped, is told of both
  await client.stopJob(c2.job_id);
  await l.stopped(c2.job_id);
  const p = await client.getSession('waiter');
  assert.ok(p.callback_job_id, 'the parent is resumed with both outcomes');
  assert.deepEqual(((await client.getJob(p.callback_job_id)).callback_of ?? []).sort(), [c1.job_id, c2.job_id].sort());
});

test('a session whose turn is being stopped starts no child: 409 parent_stopping, until the turn has ended', async (t) => {
  const { client } = await startTest(t);
  const { l, own } = await busySession(client, 'dying');
  await client.stopSession('dying', { tree: true });
  const details = await rejectsWith(start(client, 'late-child', 'x', { parent_session_name: 'dying' }), 409, 'parent_stopping');
  assert.equal(details.parent_session_name, 'dying');
  assert.equal(details.current_status, 'stopping');
  await rejectsWith(client.createJobs([{ type: 'start_session', session_name: 'late-child', prompt: 'x', parent_session_name: 'dying' }]), 409, 'parent_stopping');
  await l.stopped(own.job_id);
  assert.equal((await start(client, 'late-child', 'x', { parent_session_name: 'dying' })).status, 'pending', 'once it has ended, it may');
});

test('a tree stop of a child already stopping by request: its outcome does not wake the stopped tree either', async (t) => {
  const { client } = await startTest(t);
  const { l, c1 } = await tree(client);
  await client.stopSession('c1');
  await client.stopSession('lead', { tree: true });
  await l.stopped(c1.job_id);
  assert.equal((await client.getSession('lead')).callback_job_id, null, 'lead stays stopped');
  assert.equal((await client.getJob(c1.job_id)).stop_reason, 'requested', 'on the wire, a stop by request');
});

test('a tree stop that ends many children of one parent sends one session.updated for the parent, not one per child', async (t) => {
  const { client, c } = await startTest(t);
  await start(client, 'root');
  await client.createJobs(Array.from({ length: 50 }, (_, i) => ({ type: 'start_session' as const, session_name: `kid-${i}`, prompt: 'p', parent_session_name: 'root' })));
  const updates: number[] = [];
  const off = c.core.events.subscribe((e) => {
    if (e.type === 'session.updated' && e.session.session_name === 'root') updates.push(e.id);
  });
  t.after(off);
  const r = await client.stopSession('root', { tree: true });
  assert.equal(r.stopped.length, 51);
  // every event carries the session as committed: the 51 updates of one transaction are one
  assert.equal(updates.length, 1, JSON.stringify(updates));
  const root = await client.getSession('root');
  assert.equal(root.pending_callbacks.length, 50, 'the outcomes are all there, held');
});

test('a poll of the original shape (no batch=true) gets stop requests alone: the job waiting is not claimed beside them, and its next poll takes it', async (t) => {
  // launchers of the original API read `deregistered`, then `stop_jobs`, then `job`: a job
  // claimed in an answer that also carries stop_jobs would be dropped and sit claimed until its lease
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const running = await start(client, 'to-stop');
  await l.take();
  await l.started(running.job_id);
  assert.equal((await client.stopJob(running.job_id)).outcome, 'stopping');
  const waiting = await start(client, 'next-one');

  assert.deepEqual(await l.poll(), { stop_jobs: [running.job_id] });
  const still = await client.getJob(waiting.job_id);
  assert.equal(still.status, 'pending');
  assert.equal(still.launcher_id, null);
  assert.equal((await l.take()).job_id, waiting.job_id);
});

test('a batch poll (batch=true) gets stop requests and jobs in one answer', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const running = await start(client, 'to-stop');
  await l.take();
  await l.started(running.job_id);
  await client.stopJob(running.job_id);
  const waiting = await start(client, 'next-one');

  const answer = await l.poll({ capacity: 2, batch: true });
  assert.deepEqual(answer?.stop_jobs, [running.job_id]);
  assert.deepEqual(answer?.jobs?.map((j) => j.job_id), [waiting.job_id]);
});
