import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_SESSION_DEPTH } from '@agentq/protocol';
import { fakeLauncher, rejectsWith, resume, start, startTest } from './helpers.js';

test('start_session creates the session; starting the same name again is 409 session_exists', async (t) => {
  const { client } = await startTest(t);
  const job = await start(client, 'alpha', 'plan the work', { agent_name: 'planner', project_dir: '/srv/alpha' });
  const s = await client.getSession('alpha');
  assert.equal(s.session_name, 'alpha');
  assert.equal(s.agent_name, 'planner');
  assert.equal(s.project_dir, '/srv/alpha');
  assert.equal(s.parent_session_name, null);
  assert.equal(s.depth, 0);
  assert.equal(s.status, 'busy', 'a session with a pending job is busy');
  assert.deepEqual(s.job_ids, [job.job_id]);
  assert.deepEqual(s.children, []);
  assert.deepEqual(s.pending_callbacks, []);

  const details = await rejectsWith(start(client, 'alpha'), 409, 'session_exists');
  assert.equal(details.session_name, 'alpha');
  assert.deepEqual((await client.getSession('alpha')).job_ids, [job.job_id], 'the refused start left no job behind');
});

test('resume_session of an unknown session is 404 session_not_found and creates nothing', async (t) => {
  const { client } = await startTest(t);
  const details = await rejectsWith(resume(client, 'ghost'), 404, 'session_not_found');
  assert.equal(details.session_name, 'ghost');
  await rejectsWith(client.getSession('ghost'), 404, 'session_not_found');
  assert.deepEqual((await client.listJobs()).jobs, []);
});

test('a resume inherits the session agent and project dir', async (t) => {
  const { client } = await startTest(t);
  await start(client, 'inherit', 'first', { agent_name: 'coder', project_dir: '/p' });
  const r = await resume(client, 'inherit');
  assert.equal(r.agent_name, 'coder');
  assert.equal(r.project_dir, '/p');
});

test('a session records the executor session id, last result, last error and its job ids', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const first = await start(client, 'worker');
  await l.take();
  await l.started(first.job_id, 'exec-sess-1');
  let s = await client.getSession('worker');
  assert.equal(s.executor_session_id, 'exec-sess-1');
  assert.equal(s.status, 'busy');
  assert.equal(s.active_job_id, first.job_id);
  await l.completed(first.job_id, 'first answer');
  s = await client.getSession('worker');
  assert.equal(s.status, 'idle');
  assert.equal(s.active_job_id, null);
  assert.equal(s.last_result, 'first answer');
  assert.equal(s.last_error, null);
  assert.equal(s.last_job_status, 'completed');

  const second = await resume(client, 'worker');
  const claimed = await l.take();
  assert.equal(claimed.job_id, second.job_id);
  assert.equal(claimed.executor_session_id, 'exec-sess-1', 'a resume carries the executor session to continue');
  await l.failed(second.job_id, 'model overloaded');
  s = await client.getSession('worker');
  assert.equal(s.status, 'idle');
  assert.equal(s.last_error, 'model overloaded');
  assert.equal(s.last_result, 'first answer', 'last_result is the last successful answer');
  assert.equal(s.last_job_status, 'failed');
  assert.deepEqual(s.job_ids, [first.job_id, second.job_id]);
});

test('a resume created while its session is busy waits; other sessions are not blocked and FIFO order holds', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const a1 = await start(client, 'A');
  const a2 = await resume(client, 'A');
  const b1 = await start(client, 'B');
  const c1 = await start(client, 'C');

  assert.equal((await l.take()).job_id, a1.job_id);
  // a2 is older than b1 but its session is busy: b1 goes first
  assert.equal((await l.take()).job_id, b1.job_id);
  assert.equal((await client.getJob(a2.job_id)).status, 'pending');
  await l.completed(a1.job_id);
  // now a2 is claimable and, being older than c1, comes before it
  assert.equal((await l.take()).job_id, a2.job_id);
  assert.equal((await l.take()).job_id, c1.job_id);
  const sA = await client.getSession('A');
  assert.equal(sA.active_job_id, a2.job_id);
  assert.deepEqual(sA.job_ids, [a1.job_id, a2.job_id]);
});

test('only one job of a session is active: a second resume waits behind the first', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const s1 = await start(client, 'solo');
  const s2 = await resume(client, 'solo');
  const s3 = await resume(client, 'solo');
  const other = await start(client, 'other');
  assert.equal((await l.take()).job_id, s1.job_id);
  assert.equal((await l.take()).job_id, other.job_id, 'the next claim skips the busy session');
  await l.completed(s1.job_id);
  assert.equal((await l.take()).job_id, s2.job_id);
  await l.completed(s2.job_id);
  assert.equal((await l.take()).job_id, s3.job_id);
});

test('GET /sessions filters by status and parent; an unknown session is 404', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const root = await start(client, 'root');
  await l.take();
  await l.completed(root.job_id); // root is idle
  await start(client, 'kid-1', 'x', { parent_session_name: 'root' });
  await start(client, 'kid-2', 'y', { parent_session_name: 'root' });
  await start(client, 'loner');

  const names = (xs: { session_name: string }[]) => xs.map((s) => s.session_name).sort();
  assert.deepEqual(names((await client.listSessions()).sessions), ['kid-1', 'kid-2', 'loner', 'root']);
  assert.deepEqual(names((await client.listSessions({ status: 'idle' })).sessions), ['root']);
  assert.deepEqual(names((await client.listSessions({ status: 'busy' })).sessions), ['kid-1', 'kid-2', 'loner']);
  assert.deepEqual(names((await client.listSessions({ parent: 'root' })).sessions), ['kid-1', 'kid-2']);
  assert.deepEqual(names((await client.listSessions({ parent: 'nobody' })).sessions), []);
  assert.deepEqual((await client.getSession('root')).children, ['kid-1', 'kid-2']);
  assert.equal((await client.getSession('kid-1')).parent_session_name, 'root');
  await rejectsWith(client.listSessions({ status: 'sleeping' as never }), 400, 'validation_failed');
  await rejectsWith(client.getSession('nope'), 404, 'session_not_found');
});

test(`a parent chain may be ${MAX_SESSION_DEPTH} children deep; one more is 422 depth_exceeded`, async (t) => {
  const { client } = await startTest(t);
  await start(client, 'level-0');
  for (let depth = 1; depth <= MAX_SESSION_DEPTH; depth++) {
    await start(client, `level-${depth}`, 'go deeper', { parent_session_name: `level-${depth - 1}` });
    assert.equal((await client.getSession(`level-${depth}`)).depth, depth);
  }
  const details = await rejectsWith(
    start(client, 'too-deep', 'one more', { parent_session_name: `level-${MAX_SESSION_DEPTH}` }),
    422,
    'depth_exceeded',
  );
  assert.equal(details.max_depth, MAX_SESSION_DEPTH);
  await rejectsWith(client.getSession('too-deep'), 404, 'session_not_found');
  assert.deepEqual((await client.getSession(`level-${MAX_SESSION_DEPTH}`)).children, []);
});

test('a session cannot be its own parent: 400 validation_failed on parent_session_name', async (t) => {
  const { client } = await startTest(t);
  const details = await rejectsWith(start(client, 'narcissus', 'x', { parent_session_name: 'narcissus' }), 400, 'validation_failed');
  assert.equal(details.field, 'parent_session_name');
  await rejectsWith(client.getSession('narcissus'), 404, 'session_not_found');
});

test('an unknown parent is 404 parent_session_not_found and the child is not created', async (t) => {
  const { client } = await startTest(t);
  const details = await rejectsWith(start(client, 'orphan', 'x', { parent_session_name: 'missing' }), 404, 'parent_session_not_found');
  assert.equal(details.field, 'parent_session_name');
  await rejectsWith(client.getSession('orphan'), 404, 'session_not_found');
});

test('a start of a session that exists under a parent that does not is 409 session_exists, as before a start read its parent first', async (t) => {
  const { client } = await startTest(t);
  await start(client, 'taken');
  const details = await rejectsWith(start(client, 'taken', 'x', { parent_session_name: 'missing' }), 409, 'session_exists');
  assert.equal(details.session_name, 'taken');
  await rejectsWith(client.getSession('missing'), 404, 'session_not_found');
});

test('a resume cannot change the session parent (400), but may repeat it', async (t) => {
  const { client } = await startTest(t);
  await start(client, 'p1');
  await start(client, 'p2');
  await start(client, 'child', 'x', { parent_session_name: 'p1' });
  const details = await rejectsWith(resume(client, 'child', 'y', { parent_session_name: 'p2' }), 400, 'validation_failed');
  assert.equal(details.field, 'parent_session_name');
  const same = await resume(client, 'child', 'z', { parent_session_name: 'p1' });
  assert.equal(same.parent_session_name, 'p1');
});

test('a report sent again after its job ended does not put back that job\'s executor session id', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const first = await start(client, 'conv');
  await l.take();
  await l.started(first.job_id, 'conversation-1');
  await l.completed(first.job_id, 'ok', 'conversation-1');
  const second = await resume(client, 'conv');
  await l.take();
  await l.started(second.job_id, 'conversation-2');
  // the first job's completed report again (its answer was lost): acknowledged, changes nothing
  await l.completed(first.job_id, 'ok', 'conversation-1');
  assert.equal((await client.getSession('conv')).executor_session_id, 'conversation-2');
});
