import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { ManualClock } from '../src/core/clock.js';
import { startCoordinator } from '../src/start.js';
import { tempDir } from './auth-helpers.js';
import { closeAfter, eventJob, eventSession, fakeLauncher, openEvents, rejectsWith, resume, start, startTest } from './helpers.js';

const RETENTION = 60_000;

test('terminal jobs older than jobRetentionMs are evicted; active jobs of the same age are kept', async (t) => {
  const clock = new ManualClock();
  // a launcher that stays alive (no staleness) across the long clock jumps below
  // only the test sweeps (sessions go one sweep after their last job: a timer sweep would race)
  const { client, c } = await startTest(t, { jobRetentionMs: RETENTION, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const l = await fakeLauncher(client);
  const done = await start(client, 'done');
  const running = await start(client, 'running');
  await l.take();
  await l.take();
  await l.completed(done.job_id, 'old news');
  await l.started(running.job_id);
  const stopped = await start(client, 'stopped');
  await client.stopJob(stopped.job_id);
  const pending = await resume(client, 'running'); // waits behind the running job

  clock.advance(RETENTION - 1);
  await c.core.sweep();
  assert.equal((await client.getJob(done.job_id)).status, 'completed', 'kept until it is old enough');

  clock.advance(1);
  await c.core.sweep();
  for (const gone of [done, stopped]) {
    await rejectsWith(client.getJob(gone.job_id), 404, 'job_not_found');
    await rejectsWith(client.waitJob(gone.job_id, 0), 404, 'job_not_found');
    await rejectsWith(client.getOutput(gone.job_id), 404, 'job_not_found');
    await rejectsWith(client.stopJob(gone.job_id), 404, 'job_not_found');
  }
  const listed = (await client.listJobs()).jobs.map((j) => j.job_id);
  assert.deepEqual(listed, [pending.job_id, running.job_id], 'evicted jobs are gone from lists');
  assert.deepEqual((await client.listJobs({ terminal: 'true' })).jobs, []);
  assert.deepEqual((await client.getSession('done')).job_ids, [], 'and from their session');
  assert.equal((await client.getSession('done')).last_result, 'old news', 'the session outlives its jobs...');
  const w = await client.waitJobs({ job_ids: [done.job_id, running.job_id], timeout_ms: 0 });
  assert.deepEqual(w.not_found, [done.job_id]);
  await c.core.sweep();
  await rejectsWith(client.getSession('done'), 404, 'session_not_found'); // ...until the next sweep: it has nothing left
  assert.equal((await client.getSession('running')).status, 'busy', 'a busy session is kept');
  assert.deepEqual(
    (await client.listSessions()).sessions.map((s) => s.session_name).sort(),
    ['running'],
    'idle sessions with no jobs left are gone from lists too',
  );

  // active jobs are never evicted, however old
  clock.advance(100 * RETENTION); // 100 minutes, still inside the heartbeat timeout
  await c.core.sweep();
  assert.equal((await client.getJob(running.job_id)).status, 'running');
  assert.equal((await client.getJob(pending.job_id)).status, 'pending');
  // ...until they end and age
  await l.completed(running.job_id);
  clock.advance(RETENTION);
  await c.core.sweep();
  await rejectsWith(client.getJob(running.job_id), 404, 'job_not_found');
  assert.equal((await client.getJob(pending.job_id)).status, 'pending', 'now claimable, still kept');
});

test('retention counts from when a job ended, not from when it was created', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { jobRetentionMs: RETENTION }, { clock });
  const l = await fakeLauncher(client);
  const job = await start(client, 'late-finisher');
  await l.take();
  clock.advance(50_000);
  await l.completed(job.job_id);
  clock.advance(RETENTION - 1);
  await c.core.sweep();
  assert.equal((await client.getJob(job.job_id)).status, 'completed');
  clock.advance(1);
  await c.core.sweep();
  await rejectsWith(client.getJob(job.job_id), 404, 'job_not_found');
});

test('an eviction is announced on the event stream as job.evicted', { timeout: 20_000 }, async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { jobRetentionMs: RETENTION }, { clock });
  const ev = openEvents(t, c.url, c.core.events.lastId);
  const job = await start(client, 'short-lived');
  await client.stopJob(job.job_id);
  clock.advance(RETENTION);
  await c.core.sweep();
  const seen = await ev.until((m) => m.event === 'job.evicted');
  assert.equal(eventJob(seen.at(-1)!).job_id, job.job_id);
});

test('a session deleted by retention is announced as session.evicted, with its last version, live and replayed', { timeout: 20_000 }, async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { jobRetentionMs: RETENTION, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const from = c.core.events.lastId;
  const ev = openEvents(t, c.url, from);
  const l = await fakeLauncher(client);
  const job = await start(client, 'short-lived');
  await l.take();
  await l.completed(job.job_id, 'its last words');
  clock.advance(RETENTION);
  await c.core.sweep(); // the job goes
  await c.core.sweep(); // then its session, which has nothing left
  await rejectsWith(client.getSession('short-lived'), 404, 'session_not_found');
  const seen = await ev.until((m) => m.event === 'session.evicted');
  const evicted = eventSession(seen.at(-1)!);
  assert.equal(evicted.session_name, 'short-lived');
  assert.equal(evicted.last_result, 'its last words');
  assert.ok(
    seen.findIndex((m) => m.event === 'job.evicted') < seen.length - 1,
    'after the eviction of its job',
  );
  // a reader that missed it gets it replayed (Last-Event-ID)
  const replay = openEvents(t, c.url, from);
  const replayed = await replay.until((m) => m.event === 'session.evicted');
  assert.deepEqual(eventSession(replayed.at(-1)!), evicted);
});

test('a session chosen for deletion is kept when work for it commits before the deletion (a resume)', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { jobRetentionMs: RETENTION, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const l = await fakeLauncher(client);
  const first = await start(client, 'old');
  await l.take();
  await l.completed(first.job_id);
  clock.advance(RETENTION);
  await c.core.sweep(); // the job goes; the session goes at the next sweep
  clock.advance(RETENTION);
  // a client resumes the session between the sweep's choice and its deletion
  const store = c.core.store;
  const historyDue = store.historyDue.bind(store);
  let resumed: string | undefined;
  store.historyDue = async (before, limit) => {
    const due = await historyDue(before, limit);
    if (due.sessions.includes('old') && resumed === undefined) resumed = (await resume(client, 'old', 'again')).job_id;
    return due;
  };
  t.after(() => (store.historyDue = historyDue));
  await c.core.sweep();
  assert.ok(resumed, 'the session was chosen');
  assert.equal((await client.getSession('old')).session_name, 'old');
  // and its job runs
  assert.equal((await l.take()).job_id, resumed);
});

test('a closed session is removed once old, with the outcomes and messages it can never take', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { jobRetentionMs: RETENTION, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const l = await fakeLauncher(client);
  const parent = await start(client, 'never-ran');
  const child = await start(client, 'its-child', 'do it', { parent_session_name: 'never-ran' });
  await client.sendMessage('never-ran', { text: 'when you start' }); // waits behind the pending job
  await client.stopJob(parent.job_id); // stopped before any launcher took it: the session is closed
  await l.take();
  await l.completed(child.job_id, 'done anyway');
  const closed = await client.getSession('never-ran');
  assert.equal(closed.accepts_input, false);
  assert.equal(closed.pending_callbacks.length, 1, 'the outcome waits, readable, where no delivery takes it');
  assert.equal(closed.pending_messages.length, 1);

  clock.advance(RETENTION);
  await c.core.sweep(); // both jobs go
  await c.core.sweep(); // then the child session, which has nothing left
  await rejectsWith(client.getSession('its-child'), 404, 'session_not_found');
  await c.core.sweep(); // then the parent: nothing will ever take what it holds
  await rejectsWith(client.getSession('never-ran'), 404, 'session_not_found');
});

test('a child session of a tree that spent its budget is removed once old, with the message it can never take', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { jobRetentionMs: RETENTION, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const l = await fakeLauncher(client);
  const root = await start(client, 'budgeted', 'plan', { budget_usd: 1 });
  await l.take();
  await l.completed(root.job_id);
  const kid = await start(client, 'spender', 'spend', { parent_session_name: 'budgeted' });
  await l.take();
  await l.started(kid.job_id);
  await client.sendMessage('spender', { text: 'after this turn' }); // busy: the message waits
  await client.reportCompleted(kid.job_id, { launcher_id: l.id, status: 'success', result: 'spent', cost_usd: 2 });
  // the root is told (roots are never refused); the child's message can never go
  const delivery = await l.take();
  assert.equal(delivery.session_name, 'budgeted');
  await l.completed(delivery.job_id);
  assert.equal((await client.getSession('spender')).pending_messages.length, 1);

  clock.advance(RETENTION);
  await c.core.sweep(); // the jobs go
  await c.core.sweep(); // then the child session, whose message no delivery can take
  await rejectsWith(client.getSession('spender'), 404, 'session_not_found');
  await c.core.sweep(); // and the root, left with nothing
  await rejectsWith(client.getSession('budgeted'), 404, 'session_not_found');
});

test('SQLite: numbers of jobs and sessions retention deleted are not given again after a restart (an old cursor stays old)', async (t) => {
  const databaseUrl = `sqlite:${join(tempDir(t), 'agentq.db')}`;
  const clock = new ManualClock();
  const config = { databaseUrl, jobRetentionMs: RETENTION, sweepIntervalMs: 600_000, logLevel: 'silent' } as const;
  let c = closeAfter(t, await startCoordinator(config, { clock }));
  let client = new AgentqClient({ url: c.url });
  for (const name of ['a', 'b', 'c']) await client.stopJob((await start(client, name)).job_id);
  const page = await client.listJobs({ limit: 1 });
  const sessionPage = await client.listSessions({ limit: 1 });
  assert.ok(page.next_cursor && sessionPage.next_cursor);
  clock.advance(RETENTION);
  await c.core.sweep(); // the jobs
  await c.core.sweep(); // then their sessions
  assert.deepEqual((await client.listJobs()).jobs, []);
  assert.deepEqual((await client.listSessions()).sessions, []);
  await client.close();
  await c.close();

  c = closeAfter(t, await startCoordinator(config, { clock }));
  client = new AgentqClient({ url: c.url });
  t.after(() => client.close());
  const fresh = await start(client, 'fresh');
  // paging on from before the restart reaches older jobs only, never one created since
  assert.deepEqual((await client.listJobs({ cursor: page.next_cursor! })).jobs, []);
  assert.deepEqual((await client.listJobs()).jobs.map((j) => j.job_id), [fresh.job_id]);
  assert.deepEqual((await client.listSessions({ cursor: sessionPage.next_cursor! })).sessions, []);
  assert.deepEqual((await client.listSessions()).sessions.map((x) => x.session_name), ['fresh']);
});
