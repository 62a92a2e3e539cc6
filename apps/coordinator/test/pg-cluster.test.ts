import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AgentqClient } from '@agentq/client';
import type { Job } from '@agentq/protocol';
import { clientOf, cluster, isEvent, shellExecutor, spawnLauncher, tempDir, watch } from './cluster-helpers.js';
import type { CoordinatorProcess, LogLine } from './coordinator-process.js';
import { eventJob, fakeLauncher } from './helpers.js';

/*
 * Several real coordinator processes on one PostgreSQL database (issue 15): dispatch, stops,
 * SSE and callbacks across them. Polls are held for ten minutes and heartbeats are rare, so a
 * job or a stop that reaches a launcher parked on another coordinator can only have been carried
 * by the commit notification. (The SIGKILL test is in pg-sigkill.test.ts.)
 */

test('several coordinators start at once on one database and serve the same state', async (t) => {
  const nodes = await cluster(t, 3);
  if (!nodes) return;
  const [a, b, c] = nodes.map((n) => clientOf(t, n.url));
  const job = await a!.createJob({ type: 'start_session', session_name: 'shared', prompt: 'hello' });
  assert.equal((await b!.getJob(job.job_id)).session_name, 'shared');
  assert.deepEqual((await c!.getSession('shared')).job_ids, [job.job_id]);
  await assert.rejects(b!.createJob({ type: 'start_session', session_name: 'shared', prompt: 'again' }), { status: 409, code: 'session_exists' });
});

test('a job created on A runs on a launcher parked on B', async (t) => {
  const nodes = await cluster(t, 2, { LOG_LEVEL: 'debug' });
  if (!nodes) return;
  const [A, B] = nodes as [CoordinatorProcess, CoordinatorProcess];
  const dir = tempDir(t);
  const exec = shellExecutor(dir, 'exec.sh', `echo '{"type":"result","text":"ran on a launcher of B"}'`);
  const polled = B.waitFor((l) => l.msg === 'incoming request' && /^\/launcher\/(jobs|sync)/.test(String((l['req'] as { url?: string })?.url)));
  const launcherId = await spawnLauncher(t, dir, 'on-b', ['--url', B.url, '--executor', exec, '--max-jobs', '1']);
  await polled; // its long-poll is on B (held for ten minutes unless a commit wakes it)

  const a = clientOf(t, A.url);
  const job = await a.createJob({ type: 'start_session', session_name: 'a-to-b', prompt: 'go' });
  const done = await a.waitJob(job.job_id, 60_000);
  assert.equal(done.status, 'completed', `${done.error_code}: ${done.error}`);
  assert.equal(done.result, 'ran on a launcher of B');
  assert.equal(done.launcher_id, launcherId);
});

test('a stop posted to B reaches the launcher parked on A; SSE on B sees it all', async (t) => {
  const nodes = await cluster(t, 2);
  if (!nodes) return;
  const [A, B] = nodes as [CoordinatorProcess, CoordinatorProcess];
  const dir = tempDir(t);
  const exec = shellExecutor(dir, 'sleeper.sh', 'exec sleep 600');
  await spawnLauncher(t, dir, 'on-a', ['--url', A.url, '--executor', exec, '--max-jobs', '1']);
  const b = clientOf(t, B.url);
  const events = await watch(t, B.url);
  const job = await b.createJob({ type: 'start_session', session_name: 'stop-me', prompt: 'sleep' });
  await events.until(isEvent('job.started', job.job_id)); // started on A, seen on B

  const answer = await b.stopJob(job.job_id);
  assert.equal(answer.outcome, 'stopping');
  const ended = await b.waitJob(job.job_id, 60_000);
  assert.equal(ended.status, 'stopped');
  await events.until(isEvent('job.stopped', job.job_id));
});

test('a callback fires once when the child ends on C, though its report reaches A, B and C', async (t) => {
  const nodes = await cluster(t, 3);
  if (!nodes) return;
  const [a, b, c] = nodes.map((n) => clientOf(t, n.url)) as [AgentqClient, AgentqClient, AgentqClient];
  const eventsOnB = await watch(t, nodes[1]!.url);
  const onA = await fakeLauncher(a, 'host-1');

  const parent = await a.createJob({ type: 'start_session', session_name: 'parent', prompt: 'spawn a child' });
  assert.equal((await onA.take()).job_id, parent.job_id);
  await onA.started(parent.job_id, 'exec-parent');
  await onA.completed(parent.job_id, 'waiting for my child');

  const child = await b.createJob({ type: 'start_session', session_name: 'child', prompt: 'work', parent_session_name: 'parent' });
  const onC = await fakeLauncher(c, 'host-2');
  assert.equal((await onC.take()).job_id, child.job_id);
  await onC.started(child.job_id, 'exec-child');
  // the same report through every coordinator at once (a launcher retrying after a failover)
  const report = { launcher_id: onC.id, status: 'success' as const, result: 'child done' };
  await Promise.all([c, a, b].map((client) => client.reportCompleted(child.job_id, report)));

  const created = await eventsOnB.until((m) => m.event === 'job.created' && eventJob(m).session_name === 'parent' && eventJob(m).job_id !== parent.job_id);
  const callback: Job = eventJob(created);
  assert.deepEqual(callback.callback_of, [child.job_id]);
  const parentJobs = (await c.listJobs({ session_name: 'parent' })).jobs;
  assert.equal(parentJobs.length, 2, 'the start and one callback resume');
  assert.equal(parentJobs.filter((j) => j.callback_of?.includes(child.job_id)).length, 1);
  const session = await a.getSession('parent');
  assert.equal(session.callback_job_id, callback.job_id);
  assert.deepEqual(session.pending_callbacks, []);
});


test('a launcher that knows A and B carries on through B when A is SIGKILLed', async (t) => {
  const nodes = await cluster(t, 2);
  if (!nodes) return;
  const [A, B] = nodes as [CoordinatorProcess, CoordinatorProcess];
  const dir = tempDir(t);
  const exec = shellExecutor(dir, 'exec.sh', `echo '{"type":"result","text":"done"}'`);
  const launcherId = await spawnLauncher(t, dir, 'both', ['--url', `${A.url},${B.url}`, '--executor', exec, '--max-jobs', '1']);
  const b = clientOf(t, B.url);
  const first = await b.createJob({ type: 'start_session', session_name: 'before', prompt: 'go' });
  assert.equal((await b.waitJob(first.job_id, 60_000)).status, 'completed');

  await A.kill(); // the launcher's poll was parked on A: it moves to B, under the same id
  const second = await b.createJob({ type: 'start_session', session_name: 'after', prompt: 'go' });
  const done = await b.waitJob(second.job_id, 60_000);
  assert.equal(done.status, 'completed');
  assert.equal(done.launcher_id, launcherId);
  assert.equal((await b.listLaunchers()).launchers.length, 1, 'it did not have to register again');
});

test('when the coordinator running the sweeper is SIGKILLed, another takes the sweeper lock and sweeps', async (t) => {
  const nodes = await cluster(t, 2);
  if (!nodes) return;
  const leads = (l: LogLine) => l.msg === 'this coordinator now runs the sweeper (advisory lock taken)';
  // one of them takes the lock at its first sweep, and only one
  const leader = await Promise.race(nodes.map(async (n) => (await n.waitFor(leads), n)));
  const other = nodes.find((n) => n !== leader)!;
  assert.equal(other.lines.some(leads), false, 'one sweeper at a time');

  await leader.kill(); // its session ends with its connection: PostgreSQL frees the lock
  await other.waitFor(leads);
  // and it sweeps: job timeouts are the sweeper's to enforce
  const client = clientOf(t, other.url);
  const job = await client.createJob({ type: 'start_session', session_name: 'timed', prompt: 'x', timeout_ms: 200 });
  const ended = await client.waitJob(job.job_id, 60_000);
  assert.equal(ended.status, 'timed_out');
});

test('when the coordinator running the sweeper is paused (SIGSTOP), another takes the sweeper lock and sweeps', { timeout: 180_000 }, async (t) => {
  const nodes = await cluster(t, 2);
  if (!nodes) return;
  const leads = (l: LogLine) => l.msg === 'this coordinator now runs the sweeper (advisory lock taken)';
  const leader = await Promise.race(nodes.map(async (n) => (await n.waitFor(leads), n)));
  const other = nodes.find((n) => n !== leader)!;

  // a paused process keeps its connections open (its kernel acknowledges every packet): the
  // server ends its control session once it has sent nothing for a while, which frees the lock
  leader.child.kill('SIGSTOP');
  t.after(() => leader.child.kill('SIGCONT'));
  await other.waitFor(leads);
  const client = clientOf(t, other.url);
  const job = await client.createJob({ type: 'start_session', session_name: 'timed', prompt: 'x', timeout_ms: 200 });
  assert.equal((await client.waitJob(job.job_id, 60_000)).status, 'timed_out');

  // resumed, the old leader learns that its session (and the lock) is gone, and connects again
  leader.child.kill('SIGCONT');
  await leader.waitFor((l) => l.msg === 'PostgreSQL control connection restored');
  assert.ok(leader.lines.some((l) => l.msg === 'sweeper lock lost with the control connection'));
  assert.equal(leader.lines.filter(leads).length, 1, 'it did not take the lock again: the other holds it');
});
