import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AgentqClient, SseMessage } from '@agentq/client';
import type { Session } from '@agentq/protocol';
import { ManualClock } from '../src/core/clock.js';
import { eventSession, fakeLauncher, openEvents, resume, start, startTest } from './helpers.js';

// A session's `job_ids` and `children` were unbounded: 30,000 children under one parent made
// GET /sessions/{parent} a 6 MB answer (no part of the answer budget), and four such reads held
// the event loop for 3 s. Every session object now carries the newest MAX_SESSION_LIST_ITEMS of
// each list, with the full count and a flag; the whole lists are paged elsewhere. The bound is
// made small here so that a handful of sessions passes it (runs on every store: AGENTQ_TEST_STORE).

const MAX = 3;

/** Every page of GET /jobs?session_name= and GET /sessions?parent=: the whole lists, oldest first. */
async function pagedLists(client: AgentqClient, name: string): Promise<{ jobs: string[]; children: string[] }> {
  const jobs: string[] = [];
  const children: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listJobs({ session_name: name, limit: 2, ...(cursor !== undefined ? { cursor } : {}) });
    jobs.push(...page.jobs.map((j) => j.job_id));
    cursor = page.next_cursor ?? undefined;
  } while (cursor !== undefined);
  do {
    const page = await client.listSessions({ parent: name, limit: 2, ...(cursor !== undefined ? { cursor } : {}) });
    children.push(...page.sessions.map((s) => s.session_name));
    cursor = page.next_cursor ?? undefined;
  } while (cursor !== undefined);
  return { jobs: jobs.reverse(), children: children.reverse() };
}

function assertCut(s: Pick<Session, 'job_ids' | 'job_ids_count' | 'job_ids_truncated' | 'children' | 'children_count' | 'children_truncated'>, jobs: string[], children: string[]) {
  assert.deepEqual(s.job_ids, jobs.slice(-MAX), 'the newest jobs, oldest first');
  assert.equal(s.job_ids_count, jobs.length);
  assert.equal(s.job_ids_truncated, jobs.length > MAX);
  assert.deepEqual(s.children, children.slice(-MAX), 'the newest children, oldest first');
  assert.equal(s.children_count, children.length);
  assert.equal(s.children_truncated, children.length > MAX);
}

test('a session with more jobs and children than MAX_SESSION_LIST_ITEMS carries the newest of each, their counts and a truncated flag', async (t) => {
  const { client, c } = await startTest(t, { maxSessionListItems: MAX });
  const l = await fakeLauncher(client);
  // five turns of the parent, one after the other (a fake launcher takes each), then five children left pending
  const jobs: string[] = [];
  for (let i = 0; i < 5; i++) {
    const job = i === 0 ? await start(client, 'parent') : await resume(client, 'parent');
    jobs.push(job.job_id);
    assert.equal((await l.take()).job_id, job.job_id);
    await l.completed(job.job_id, `turn ${i}`);
  }
  const children: string[] = [];
  for (let i = 0; i < 5; i++) {
    const name = `child-${i}`;
    await start(client, name, 'p', { parent_session_name: 'parent' });
    children.push(name);
  }

  // the whole lists are where the documentation sends a reader of a cut one
  assert.deepEqual(await pagedLists(client, 'parent'), { jobs, children });

  // GET /sessions/{name}
  assertCut(await client.getSession('parent'), jobs, children);
  // a session under the bound: whole lists, not truncated
  const child = await client.getSession('child-0');
  assert.equal(child.job_ids.length, 1);
  assertCut(child, child.job_ids, []);

  // GET /sessions: every item of a page
  const page = await client.listSessions({ root: 'true' });
  const listed = page.sessions.find((s) => s.session_name === 'parent');
  assert.ok(listed, 'the parent is on the page of roots');
  assertCut(listed, jobs, children);

  // session events: the parent's lists as of the event's commit, cut the same way
  const ev = openEvents(t, c.url);
  const isParent = (m: SseMessage) => m.event === 'session.updated' && eventSession(m).session_name === 'parent';
  const untilParent = ev.until(isParent);
  await ev.opened;
  await start(client, 'child-5', 'p', { parent_session_name: 'parent' });
  children.push('child-5');
  const seen = await untilParent;
  assertCut(eventSession(seen[seen.length - 1]!), jobs, children);

  const more = await resume(client, 'parent');
  jobs.push(more.job_id);
  const updated = await ev.until((m) => isParent(m) && eventSession(m).job_ids_count === jobs.length);
  assertCut(eventSession(updated[updated.length - 1]!), jobs, children);

  assert.deepEqual(await pagedLists(client, 'parent'), { jobs, children });
});

test('a tree stop reaches every child, not only the ones a cut `children` lists', async (t) => {
  const { client } = await startTest(t, { maxSessionListItems: MAX });
  await start(client, 'root');
  const names: string[] = [];
  for (let i = 0; i < MAX + 2; i++) {
    names.push(`leaf-${i}`);
    await start(client, `leaf-${i}`, 'p', { parent_session_name: 'root' });
  }
  assert.equal((await client.getSession('root')).children_truncated, true);
  const answer = await client.stopSession('root', { tree: true });
  assert.deepEqual(new Set(answer.stopped.map((s) => s.session_name)), new Set(['root', ...names]));
  for (const name of names) assert.equal((await client.getSession(name)).status, 'idle', `${name} was stopped`);
});

test('a session event replayed after more children and jobs were added has its cut lists as of its commit', async (t) => {
  const { client, c } = await startTest(t, { maxSessionListItems: MAX });
  await start(client, 'hub');
  for (let i = 0; i < 4; i++) await start(client, `old-${i}`, 'p', { parent_session_name: 'hub' });
  const mark = c.core.events.lastId;
  await start(client, 'then', 'p', { parent_session_name: 'hub' });
  // after the event: a read of the lists made now, not bounded by the commit, would name these
  for (let i = 0; i < 3; i++) await start(client, `later-${i}`, 'p', { parent_session_name: 'hub' });
  await resume(client, 'hub');

  const ev = openEvents(t, c.url, mark);
  const replayed = await ev.until((m) => m.event === 'session.updated' && eventSession(m).session_name === 'hub');
  const hub = eventSession(replayed.at(-1)!);
  assert.deepEqual(hub.children, ['old-2', 'old-3', 'then']);
  assert.equal(hub.children_count, 5);
  assert.equal(hub.children_truncated, true);
  assert.equal(hub.job_ids_count, 1, 'the resume came after');
});

// A session's cut lists, read again after each kind of change (a job's start and end change its
// session's row, not its lists; jobs and children added, removed by retention, a name started
// again), are the lists as they are then, as paged.
test('a session read after each kind of change carries its lists as they are then: jobs and children added, ended, removed by retention, a name started again', async (t) => {
  const clock = new ManualClock();
  const retention = 60_000;
  const { client, c } = await startTest(
    t,
    { maxSessionListItems: MAX, jobRetentionMs: retention, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 },
    { clock },
  );
  const l = await fakeLauncher(client);
  const check = async (when: string): Promise<{ jobs: string[]; children: string[] }> => {
    const lists = await pagedLists(client, 'hub');
    const hub = await client.getSession('hub');
    assert.deepEqual({ jobs: hub.job_ids, children: hub.children }, { jobs: lists.jobs.slice(-MAX), children: lists.children.slice(-MAX) }, when);
    assertCut(hub, lists.jobs, lists.children);
    return lists;
  };

  // its turns: each added, taken, started and ended, the session read at every step
  for (let i = 0; i < MAX + 1; i++) {
    const job = i === 0 ? await start(client, 'hub') : await resume(client, 'hub');
    await check(`turn ${i} queued`);
    assert.equal((await l.take()).job_id, job.job_id);
    await check(`turn ${i} taken`);
    await l.started(job.job_id);
    await check(`turn ${i} running`);
    await l.completed(job.job_id, `turn ${i}`);
    assert.equal((await check(`turn ${i} ended`)).jobs.at(-1), job.job_id);
  }
  // children, each run to its end, and the turns of the hub that tell it (deliveries)
  for (let i = 0; i < MAX + 1; i++) {
    await start(client, `kid-${i}`, 'p', { parent_session_name: 'hub' });
    await check(`child ${i} started`);
    const kid = await l.take();
    assert.equal(kid.session_name, `kid-${i}`);
    await l.completed(kid.job_id);
    await check(`child ${i} ended`);
    // the hub's turn that tells it, taken and ended
    assert.equal((await client.getSession('hub')).status, 'busy', 'a delivery is queued');
    const delivery = await l.take();
    assert.equal(delivery.session_name, 'hub');
    await l.completed(delivery.job_id);
    await check(`child ${i} told`);
  }
  // one turn left running: the hub outlives retention
  const last = await resume(client, 'hub');
  await l.take();
  await l.started(last.job_id);
  // and a child left waiting: it outlives retention too
  await start(client, 'stay', 'p', { parent_session_name: 'hub' });
  const before = await check('last turn running');
  assert.equal(before.jobs.length, 2 * MAX + 3, 'its turns and deliveries');
  assert.equal(before.children.length, MAX + 2);

  clock.advance(retention);
  await c.core.sweep(); // the ended jobs go, the hub's own and its children's
  assert.deepEqual((await check('ended jobs removed')).jobs, [last.job_id]);
  await c.core.sweep(); // then the children, which have nothing left
  assert.deepEqual((await check('children removed')).children, ['stay']);

  // a child's name started again: in the list again
  const ev = openEvents(t, c.url);
  const untilHub = ev.until((m) => m.event === 'session.updated' && eventSession(m).session_name === 'hub');
  await ev.opened;
  await start(client, 'kid-0', 'p', { parent_session_name: 'hub' });
  assert.deepEqual(await check('a name started again'), { jobs: [last.job_id], children: ['stay', 'kid-0'] });
  const seen = await untilHub;
  const hub = eventSession(seen.at(-1)!);
  assert.deepEqual({ jobs: hub.job_ids, children: hub.children }, { jobs: [last.job_id], children: ['stay', 'kid-0'] }, 'its event too');
});
