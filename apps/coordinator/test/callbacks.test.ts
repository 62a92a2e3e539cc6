import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AgentqClient } from '@agentq/client';
import type { Job } from '@agentq/protocol';
import { ManualClock } from '../src/core/clock.js';
import { busySession, fakeLauncher, type FakeLauncher, resume, start, startTest } from './helpers.js';

/** Start `name` and run its first job to completion, so the session is idle. */
async function idleSession(client: AgentqClient, l: FakeLauncher, name: string): Promise<Job> {
  const job = await start(client, name);
  assert.equal((await l.take()).job_id, job.job_id);
  await l.completed(job.job_id, `${name} ready`);
  return job;
}

/** The session's jobs that are not terminal. */
async function activeJobs(client: AgentqClient, session: string): Promise<Job[]> {
  return (await client.listJobs({ session_name: session, terminal: 'false' })).jobs;
}

test('a child that completes while its parent is idle resumes the parent at once with name, outcome and result', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await idleSession(client, l, 'parent');
  const child = await start(client, 'child', 'count the files', { parent_session_name: 'parent' });
  assert.equal(child.parent_session_name, 'parent');
  assert.equal((await l.take()).job_id, child.job_id);
  await l.completed(child.job_id, 'there are 42 files');

  const p = await client.getSession('parent');
  assert.equal(p.status, 'busy');
  assert.ok(p.callback_job_id, 'a callback resume is in flight');
  assert.deepEqual(p.pending_callbacks, []);
  const cb = await client.getJob(p.callback_job_id);
  assert.equal(cb.type, 'resume_session');
  assert.equal(cb.session_name, 'parent');
  assert.equal(cb.status, 'pending');
  assert.deepEqual(cb.callback_of, [child.job_id]);
  assert.match(cb.prompt, /<session>child<\/session>/);
  assert.match(cb.prompt, /<status>completed<\/status>/);
  assert.match(cb.prompt, /<result>there are 42 files<\/result>/);
  assert.ok(cb.prompt.includes(child.job_id));

  // the launcher gets it like any resume, and finishing it leaves the parent idle
  assert.equal((await l.take()).job_id, cb.job_id);
  await l.completed(cb.job_id, 'noted');
  const after = await client.getSession('parent');
  assert.equal(after.status, 'idle');
  assert.equal(after.callback_job_id, null);
  assert.deepEqual(await activeJobs(client, 'parent'), []);
});

test('children that end while the parent is busy are queued, then delivered as one aggregated resume', async (t) => {
  const { client } = await startTest(t);
  const { l, own } = await busySession(client, 'boss');
  const c1 = await start(client, 'helper-1', 'a', { parent_session_name: 'boss' });
  const c2 = await start(client, 'helper-2', 'b', { parent_session_name: 'boss' });
  assert.equal((await l.take()).job_id, c1.job_id);
  assert.equal((await l.take()).job_id, c2.job_id);
  await l.completed(c1.job_id, 'result one');
  await l.failed(c2.job_id, 'tool crashed');

  const busy = await client.getSession('boss');
  assert.equal(busy.callback_job_id, null, 'no callback while the parent runs its own job');
  assert.deepEqual(
    busy.pending_callbacks.map((n) => [n.child_session_name, n.job_id, n.outcome, n.result, n.error]),
    [
      ['helper-1', c1.job_id, 'completed', 'result one', null],
      ['helper-2', c2.job_id, 'failed', null, 'tool crashed'],
    ],
  );
  assert.deepEqual((await activeJobs(client, 'boss')).map((j) => j.job_id), [own.job_id]);

  await l.completed(own.job_id, 'my own work');
  const jobs = await activeJobs(client, 'boss');
  assert.equal(jobs.length, 1, 'exactly one aggregated resume');
  const cb = jobs[0]!;
  assert.deepEqual(cb.callback_of, [c1.job_id, c2.job_id]);
  assert.match(cb.prompt, /2 child sessions/);
  assert.match(cb.prompt, /<session>helper-1<\/session>[\s\S]*<result>result one<\/result>/);
  assert.match(cb.prompt, /<session>helper-2<\/session>[\s\S]*<status>failed<\/status>[\s\S]*<error>tool crashed<\/error>/);
  const s = await client.getSession('boss');
  assert.deepEqual(s.pending_callbacks, []);
  assert.equal(s.callback_job_id, cb.job_id);
});

test('two children ending at the same moment start exactly one callback resume; the other follows it', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await idleSession(client, l, 'hub');
  const c1 = await start(client, 'spoke-1', 'a', { parent_session_name: 'hub' });
  const c2 = await start(client, 'spoke-2', 'b', { parent_session_name: 'hub' });
  await l.take();
  await l.take();
  await Promise.all([l.completed(c1.job_id, 'r1'), l.completed(c2.job_id, 'r2')]);

  const first = await activeJobs(client, 'hub');
  assert.equal(first.length, 1, 'never two callback resumes in flight for one parent');
  assert.equal(first[0]!.callback_of!.length, 1);
  const hub = await client.getSession('hub');
  assert.equal(hub.callback_job_id, first[0]!.job_id);
  assert.equal(hub.pending_callbacks.length, 1, 'the other outcome waits for the first resume');

  assert.equal((await l.take()).job_id, first[0]!.job_id);
  await l.completed(first[0]!.job_id);
  const second = await activeJobs(client, 'hub');
  assert.equal(second.length, 1);
  assert.notEqual(second[0]!.job_id, first[0]!.job_id);
  assert.deepEqual(
    [...first[0]!.callback_of!, ...second[0]!.callback_of!].sort(),
    [c1.job_id, c2.job_id].sort(),
    'each child is delivered exactly once',
  );
});

test('failed, stopped and timed-out children reach the parent with that outcome', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, {}, { clock });
  const l = await fakeLauncher(client);
  const own = await start(client, 'lead');
  await l.take(); // the parent stays busy, so outcomes queue up where we can read them
  const failing = await start(client, 'k-fail', 'a', { parent_session_name: 'lead' });
  const stopping = await start(client, 'k-stop', 'b', { parent_session_name: 'lead' });
  const slow = await start(client, 'k-slow', 'c', { parent_session_name: 'lead', timeout_ms: 60_000 });
  assert.equal((await l.take()).job_id, failing.job_id);
  await l.failed(failing.job_id, 'exit code 2');
  await client.stopJob(stopping.job_id); // pending: stopped at once
  clock.advance(60_000);
  await c.core.sweep(); // k-slow is still pending: timed out

  const queued = (await client.getSession('lead')).pending_callbacks;
  assert.deepEqual(
    queued.map((n) => [n.child_session_name, n.outcome]),
    [
      ['k-fail', 'failed'],
      ['k-stop', 'stopped'],
      ['k-slow', 'timed_out'],
    ],
  );
  assert.equal(queued[0]!.error, 'exit code 2');
  assert.ok(queued[1]!.error);
  assert.equal(queued[2]!.job_id, slow.job_id);

  await l.completed(own.job_id);
  const [cb] = await activeJobs(client, 'lead');
  assert.ok(cb);
  assert.deepEqual(cb.callback_of, [failing.job_id, stopping.job_id, slow.job_id]);
  for (const outcome of ['failed', 'stopped', 'timed_out']) assert.ok(cb.prompt.includes(`<status>${outcome}</status>`), outcome);
});

test('a failed callback resume keeps its notifications and delivers them after the parent\'s next own job', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await idleSession(client, l, 'mother');
  const child = await start(client, 'daughter', 'x', { parent_session_name: 'mother' });
  await l.take();
  await l.completed(child.job_id, 'done, mum');
  const cb1 = (await client.getSession('mother')).callback_job_id!;
  assert.equal((await l.take()).job_id, cb1);
  await l.failed(cb1, 'the parent executor crashed');

  // not lost, not retried in a loop: back in the queue, parent idle
  let m = await client.getSession('mother');
  assert.equal(m.status, 'idle');
  assert.equal(m.callback_job_id, null);
  assert.deepEqual(m.pending_callbacks.map((n) => n.job_id), [child.job_id]);
  assert.deepEqual(await activeJobs(client, 'mother'), []);

  // the parent's next own turn ends: the kept notification goes out again
  const own = await resume(client, 'mother', 'carry on');
  assert.equal((await l.take()).job_id, own.job_id);
  await l.completed(own.job_id);
  m = await client.getSession('mother');
  assert.ok(m.callback_job_id);
  assert.notEqual(m.callback_job_id, cb1);
  assert.deepEqual(m.pending_callbacks, []);
  const cb2 = await client.getJob(m.callback_job_id);
  assert.deepEqual(cb2.callback_of, [child.job_id]);
  assert.match(cb2.prompt, /<result>done, mum<\/result>/);
});

test('a failed callback resume is delivered again together with the next child outcome', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await idleSession(client, l, 'root');
  const c1 = await start(client, 'first-born', 'x', { parent_session_name: 'root' });
  const c2 = await start(client, 'second-born', 'y', { parent_session_name: 'root' });
  assert.equal((await l.take()).job_id, c1.job_id);
  await l.completed(c1.job_id, 'one');
  const cb1 = (await client.getSession('root')).callback_job_id!;
  // the callback resume is older than nothing that waits, so the next take may be c2 or cb1
  const next = await l.take();
  const other = await l.take();
  assert.deepEqual([next.job_id, other.job_id].sort(), [c2.job_id, cb1].sort());
  await l.failed(cb1, 'crash');
  assert.deepEqual(await activeJobs(client, 'root'), []);
  await l.completed(c2.job_id, 'two');

  const [cb2] = await activeJobs(client, 'root');
  assert.ok(cb2);
  assert.deepEqual(cb2.callback_of, [c1.job_id, c2.job_id]);
  assert.match(cb2.prompt, /<result>one<\/result>[\s\S]*<result>two<\/result>/);
});

test('a stopped callback resume keeps its notifications too', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await idleSession(client, l, 'p');
  const child = await start(client, 'c', 'x', { parent_session_name: 'p' });
  await l.take();
  await l.completed(child.job_id, 'r');
  const cb = (await client.getSession('p')).callback_job_id!;
  assert.equal((await client.stopJob(cb)).outcome, 'stopped');
  const s = await client.getSession('p');
  assert.equal(s.callback_job_id, null);
  assert.deepEqual(s.pending_callbacks.map((n) => n.job_id), [child.job_id]);
});

test('a callback resume that completes before the stop of its session reaches it does not resume the session again at once', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await idleSession(client, l, 'p');
  const c1 = await start(client, 'c1', 'x', { parent_session_name: 'p' });
  const c2 = await start(client, 'c2', 'y', { parent_session_name: 'p' });
  await l.take();
  await l.take();
  await l.completed(c1.job_id, 'one');
  const cb = await l.take();
  assert.deepEqual(cb.callback_of, [c1.job_id]);
  await l.started(cb.job_id);
  await l.completed(c2.job_id, 'two');
  await client.stopSession('p');
  // the turn finished just as the stop was on its way
  await l.completed(cb.job_id, 'noted');

  const s = await client.getSession('p');
  assert.equal(s.status, 'idle', 'a session someone stopped is not resumed at once by its children');
  assert.equal(s.callback_job_id, null);
  assert.deepEqual(s.pending_callbacks.map((n) => n.job_id), [c2.job_id]);
  // new input releases it: the outcome goes with the message
  const sent = await client.sendMessage('p', { text: 'go on' });
  assert.ok(sent.job_id);
  assert.deepEqual((await client.getJob(sent.job_id)).callback_of, [c2.job_id]);
});

test('a child interrupted by the loss of its launcher reaches the parent as interrupted', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { heartbeatIntervalSeconds: 10, heartbeatTimeoutSeconds: 30 }, { clock });
  const keeper = await fakeLauncher(client, 'keeper');
  await idleSession(client, keeper, 'up');
  const doomed = await fakeLauncher(client, 'doomed');
  const child = await start(client, 'down', 'x', { parent_session_name: 'up' });
  await doomed.take();
  await doomed.started(child.job_id);
  clock.advance(31_000);
  await keeper.heartbeat(); // the keeper is alive; the doomed launcher is not heard from
  await c.core.sweep();
  assert.equal((await client.getJob(child.job_id)).status, 'interrupted');
  const up = await client.getSession('up');
  assert.ok(up.callback_job_id);
  const cb = await client.getJob(up.callback_job_id);
  assert.deepEqual(cb.callback_of, [child.job_id]);
  assert.match(cb.prompt, /<status>interrupted<\/status>/);
});

test('a parent\'s callback turn is itself reported to the grandparent, so results flow up the chain', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await idleSession(client, l, 'grand');
  const mid = await start(client, 'mid', 'delegate', { parent_session_name: 'grand' });
  await l.take();
  const leaf = await start(client, 'leaf', 'work', { parent_session_name: 'mid' });
  await l.take();
  await l.completed(mid.job_id, 'mid: waiting for leaf');
  // grand is told about mid's first turn
  const first = (await client.getSession('grand')).callback_job_id!;
  assert.equal((await l.take()).job_id, first);
  await l.completed(first);

  await l.completed(leaf.job_id, 'leaf: 7');
  const midCb = (await client.getSession('mid')).callback_job_id!;
  assert.match((await client.getJob(midCb)).prompt, /leaf: 7/);
  assert.equal((await l.take()).job_id, midCb);
  await l.completed(midCb, 'mid: the answer is 7');
  const grandCb = await client.getJob((await client.getSession('grand')).callback_job_id!);
  assert.deepEqual(grandCb.callback_of, [midCb]);
  assert.match(grandCb.prompt, /<session>mid<\/session>[\s\S]*mid: the answer is 7/);
});

test('a closed parent (its start stopped before it ran) is not sent its children\'s outcomes: they stay queued', async (t) => {
  const { client } = await startTest(t);
  // the parent waits for a launcher that never comes; its child runs
  const parent = await client.createJob({ type: 'start_session', session_name: 'p', prompt: 'p', requires: { gpu: 'none' } });
  const l = await fakeLauncher(client);
  const child = await start(client, 'k', 'p', { parent_session_name: 'p' });
  assert.equal((await l.take()).job_id, child.job_id);
  await client.stopJob(parent.job_id);
  assert.equal((await client.getSession('p')).accepts_input, false);
  await l.completed(child.job_id, 'r');
  const s = await client.getSession('p');
  assert.equal(s.callback_job_id, null);
  assert.deepEqual(
    s.pending_callbacks.map((n) => n.job_id),
    [child.job_id],
  );
});
