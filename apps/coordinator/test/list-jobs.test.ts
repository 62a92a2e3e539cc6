import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { ManualClock } from '../src/core/clock.js';
import type { AgentqClient } from '@agentq/client';
import type { Job, ListJobsQuery } from '@agentq/protocol';
import { eventJob, eventSession, fakeLauncher, openEvents, rejectsWith, resume, start, startTest, tempDir } from './helpers.js';

const ids = (jobs: Job[]) => jobs.map((j) => j.job_id);

/** Follow next_cursor to the end; every page's ids, in order. */
async function allPages(client: AgentqClient, query: ListJobsQuery): Promise<string[][]> {
  const pages: string[][] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await client.listJobs({ ...query, ...(cursor ? { cursor } : {}) });
    pages.push(ids(page.jobs));
    if (page.next_cursor === null) return pages;
    cursor = page.next_cursor;
  }
}

/**
 * A small world: `a` completed, `b` failed (both on launcher l1), `c` running on l2, `d` pending,
 * `a` resumed (pending).
 */
async function world(client: AgentqClient) {
  const l1 = await fakeLauncher(client, 'one');
  const l2 = await fakeLauncher(client, 'two');
  const a = await start(client, 'a');
  const b = await start(client, 'b');
  const c = await start(client, 'c');
  await l1.take();
  await l1.take();
  await l2.take();
  await l1.completed(a.job_id, 'ok');
  await l1.failed(b.job_id, 'no');
  await l2.started(c.job_id);
  const d = await start(client, 'd');
  const a2 = await resume(client, 'a');
  return { l1, l2, a, b, c, d, a2 };
}

test('GET /jobs lists jobs newest first, each with a terminal flag', async (t) => {
  const { client } = await startTest(t);
  const w = await world(client);
  const { jobs, next_cursor } = await client.listJobs();
  assert.deepEqual(ids(jobs), ids([w.a2, w.d, w.c, w.b, w.a]));
  assert.equal(next_cursor, null);
  assert.deepEqual(
    jobs.map((j) => [j.status, j.terminal]),
    [
      ['pending', false],
      ['pending', false],
      ['running', false],
      ['failed', true],
      ['completed', true],
    ],
  );
});

test('GET /jobs filters by status (a comma list), session, launcher and terminal', async (t) => {
  const { client } = await startTest(t);
  const w = await world(client);
  assert.deepEqual(ids((await client.listJobs({ status: 'pending' })).jobs), ids([w.a2, w.d]));
  assert.deepEqual(ids((await client.listJobs({ status: 'completed,failed' })).jobs), ids([w.b, w.a]));
  assert.deepEqual(ids((await client.listJobs({ status: 'running, pending' })).jobs), ids([w.a2, w.d, w.c]));
  assert.deepEqual(ids((await client.listJobs({ session_name: 'a' })).jobs), ids([w.a2, w.a]));
  assert.deepEqual(ids((await client.listJobs({ session_name: 'unknown' })).jobs), []);
  assert.deepEqual(ids((await client.listJobs({ launcher_id: w.l1.id })).jobs), ids([w.b, w.a]));
  assert.deepEqual(ids((await client.listJobs({ launcher_id: w.l2.id })).jobs), ids([w.c]));
  assert.deepEqual(ids((await client.listJobs({ terminal: 'true' })).jobs), ids([w.b, w.a]));
  assert.deepEqual(ids((await client.listJobs({ terminal: 'false' })).jobs), ids([w.a2, w.d, w.c]));
  assert.deepEqual(ids((await client.listJobs({ session_name: 'a', terminal: 'false' })).jobs), ids([w.a2]));
  assert.deepEqual(ids((await client.listJobs({ status: 'pending', session_name: 'd' })).jobs), ids([w.d]));
});

test('GET /jobs with an unknown status, a bad terminal value or a bad cursor is 400', async (t) => {
  const { client } = await startTest(t);
  const details = await rejectsWith(client.listJobs({ status: 'pending,sleeping' }), 400, 'validation_failed');
  assert.equal(details.field, 'status');
  await rejectsWith(client.listJobs({ terminal: 'yes' as never }), 400, 'validation_failed');
  await rejectsWith(client.listJobs({ cursor: 'not-a-cursor' }), 400, 'validation_failed');
  await rejectsWith(client.listJobs({ limit: 0 }), 400, 'validation_failed');
});

test('an empty or non-decimal cursor and an empty status list are 400, not an empty page', async (t) => {
  const { client, c } = await startTest(t);
  await start(client, 'listed');
  for (const [path, field] of [
    ['/jobs?cursor=', 'cursor'],
    ['/jobs?cursor=%20', 'cursor'],
    ['/jobs?cursor=0x3', 'cursor'],
    ['/jobs?cursor=1e3', 'cursor'],
    ['/jobs?status=', 'status'],
    ['/jobs?status=,', 'status'],
    ['/sessions?cursor=', 'cursor'],
    ['/sessions?cursor=-1', 'cursor'],
  ] as const) {
    const res = await fetch(`${c.url}${path}`);
    assert.equal(res.status, 400, path);
    assert.equal(((await res.json()) as { error: { details: { field: string } } }).error.details.field, field, path);
  }
});

test('cursor pages do not overlap and together cover every job, newest first', async (t) => {
  const { client } = await startTest(t);
  const created: Job[] = [];
  for (let i = 0; i < 7; i++) created.push(await start(client, `page-${i}`));
  const pages = await allPages(client, { limit: 3 });
  assert.deepEqual(
    pages.map((p) => p.length),
    [3, 3, 1],
  );
  assert.deepEqual(pages.flat(), ids(created).reverse());
});

test('a page boundary exactly at the end gives next_cursor null, not an empty page', async (t) => {
  const { client } = await startTest(t);
  for (let i = 0; i < 4; i++) await start(client, `even-${i}`);
  const pages = await allPages(client, { limit: 2 });
  assert.deepEqual(
    pages.map((p) => p.length),
    [2, 2],
  );
});

test('cursor pagination applies after the filters and ignores jobs created meanwhile', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  // a busy session whose resumes stay pending, interleaved with jobs that complete
  const blocker = await start(client, 'blocker');
  assert.equal((await l.take()).job_id, blocker.job_id);
  const done: Job[] = [];
  for (let i = 0; i < 5; i++) {
    const j = await start(client, `mixed-${i}`);
    assert.equal((await l.take()).job_id, j.job_id);
    await l.completed(j.job_id);
    done.push(j);
    await resume(client, 'blocker');
  }
  const first = await client.listJobs({ terminal: 'true', limit: 2 });
  assert.deepEqual(ids(first.jobs), ids([done[4]!, done[3]!]));
  // new jobs on top do not shift the next page
  await start(client, 'late-comer');
  const second = await client.listJobs({ terminal: 'true', limit: 2, cursor: first.next_cursor! });
  assert.deepEqual(ids(second.jobs), ids([done[2]!, done[1]!]));
  const third = await client.listJobs({ terminal: 'true', limit: 2, cursor: second.next_cursor! });
  assert.deepEqual(ids(third.jobs), ids([done[0]!]));
  assert.equal(third.next_cursor, null);
  assert.equal((await allPages(client, { session_name: 'blocker', limit: 4 })).flat().length, 6);
});

test('lists stay exact after more than a thousand jobs are evicted (the newest-first index is swept)', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { jobRetentionMs: 60_000, sweepIntervalMs: 600_000 }, { clock });
  // created and ended on the core directly: 1,500 HTTP round trips would only slow the test
  for (let i = 0; i < 1500; i++) {
    const { job } = await c.core.createJob({ type: 'start_session', session_name: `old-${i}`, prompt: 'x' });
    await c.core.stopJob(job.job_id);
  }
  clock.advance(30_000);
  const kept = [];
  for (let i = 0; i < 5; i++) kept.push((await c.core.createJob({ type: 'start_session', session_name: `new-${i}`, prompt: 'x' })).job);
  clock.advance(30_000);
  // evicts the 1,500 stopped jobs, not the 5 pending ones (history goes in batches of 1,000 a sweep)
  await c.core.sweep();
  await c.core.sweep();
  const first = await client.listJobs({ limit: 3 });
  assert.deepEqual(first.jobs.map((j) => j.job_id), kept.slice(2).reverse().map((j) => j.job_id));
  const rest = await client.listJobs({ limit: 3, cursor: first.next_cursor! });
  assert.deepEqual(rest.jobs.map((j) => j.job_id), kept.slice(0, 2).reverse().map((j) => j.job_id));
  assert.equal(rest.next_cursor, null);
});

test('SQLite: a status filter takes live jobs from memory and ended ones from the file, merged newest first and paged', async (t) => {
  const dir = tempDir(t, 'agentq-list-jobs-');
  // hotJobs 0: every ended job is read from the file, every live one is in memory
  const { client } = await startTest(t, { databaseUrl: `sqlite:${join(dir, 'agentq.db')}`, hotJobs: 0 });
  const w = await world(client);
  const e = await start(client, 'e');
  assert.equal((await w.l2.take()).job_id, w.d.job_id);
  await w.l2.completed(w.d.job_id, 'ok');
  // newest first: e (pending), a2 (pending), d (completed), c (running), b (failed), a (completed)
  assert.deepEqual(ids((await client.listJobs({ status: 'pending,completed' })).jobs), ids([e, w.a2, w.d, w.a]));
  assert.deepEqual(await allPages(client, { status: 'pending,completed,running', limit: 2 }), [
    [e.job_id, w.a2.job_id],
    [w.d.job_id, w.c.job_id],
    [w.a.job_id],
  ]);
  assert.deepEqual(ids((await client.listJobs({ status: 'running' })).jobs), ids([w.c]));
  assert.deepEqual(ids((await client.listJobs({ status: 'running,failed' })).jobs), ids([w.c, w.b]));
  assert.deepEqual(ids((await client.listJobs({ terminal: 'true' })).jobs), ids([w.d, w.b, w.a]));
  assert.deepEqual(ids((await client.listJobs({ terminal: 'false' })).jobs), ids([e, w.a2, w.c]));
  assert.deepEqual(ids((await client.listJobs({ status: 'completed', launcher_id: w.l2.id })).jobs), ids([w.d]));
});

test('jobs and sessions created at one instant carry seq: the lists page by it, newest first, and their events carry it too', async (t) => {
  const clock = new ManualClock(Date.now());
  const { client, c } = await startTest(t, {}, { clock });
  const created = await client.createJobs(['x', 'y', 'z'].map((name) => ({ type: 'start_session' as const, session_name: `same-${name}`, prompt: 'p' })));
  assert.equal(new Set(created.map((j) => j.created_at)).size, 1, 'one instant');
  const page = await client.listJobs({ limit: 2 });
  assert.deepEqual(ids(page.jobs), ids(created).slice(1).reverse());
  const [newest, next] = page.jobs.map((j) => j.seq!);
  assert.ok(Number.isSafeInteger(newest) && Number.isSafeInteger(next) && newest! > next!, `seq ${newest} then ${next}`);
  assert.equal(page.next_cursor, String(next), "a page's cursor is its last row's seq");
  assert.equal(created[2]!.seq, newest, 'the created job says it too');

  const sessions = await client.listSessions({ limit: 2 });
  assert.deepEqual(sessions.sessions.map((s) => s.session_name), ['same-z', 'same-y']);
  assert.ok(sessions.sessions[0]!.seq! > sessions.sessions[1]!.seq!);
  assert.equal(sessions.next_cursor, String(sessions.sessions[1]!.seq));

  const events = openEvents(t, c.url, 0);
  const replayed = await events.until((m) => m.event === 'job.created' && eventJob(m).job_id === created[2]!.job_id);
  assert.equal(eventJob(replayed.at(-1)!).seq, newest);
  const sessionEvent = replayed.find((m) => m.event.startsWith('session.') && eventSession(m).session_name === 'same-z');
  assert.ok(sessionEvent, `a session event of same-z among ${replayed.map((m) => m.event).join(', ')}`);
  assert.equal(eventSession(sessionEvent).seq, sessions.sessions[0]!.seq);
});
