import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import type { AgentqClient } from '@agentq/client';
import { ConfigError, loadConfig } from '../src/config.js';
import { ManualClock } from '../src/core/clock.js';
import { fakeLauncher, type FakeLauncher, rejectsWith, start, startTest, tempDir } from './helpers.js';

// A job claimed again and again without ever starting ends `failed` (claim_attempts_exhausted)
// after JOB_MAX_CLAIMS claims lost to lease expiry or to a lost launcher. The app's own sweeper
// never fires (sweepIntervalMs is long): time moves with clock.advance(), the test sweeps.
const timing = { heartbeatIntervalSeconds: 10, heartbeatTimeoutSeconds: 30, claimLeaseSeconds: 20, sweepIntervalMs: 600_000, maxClaims: 3 };

async function expireLease(clock: ManualClock, c: { core: { sweep(): Promise<void> } }, keepAlive: FakeLauncher): Promise<void> {
  clock.advance(21_000);
  await keepAlive.heartbeat();
  await c.core.sweep();
}

/** `l` takes the job at the head of the queue and loses its claim to the lease, `n` times. */
async function loseClaims(clock: ManualClock, c: { core: { sweep(): Promise<void> } }, l: FakeLauncher, n: number): Promise<void> {
  for (let i = 1; i <= n; i++) {
    await l.take();
    await expireLease(clock, c, l);
  }
}

test('a job whose claim lease expires JOB_MAX_CLAIMS times fails claim_attempts_exhausted', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const l = await fakeLauncher(client, 'crashy');
  const created = await start(client, 'poison');
  for (let i = 1; i <= 3; i++) {
    const job = await l.take();
    assert.deepEqual([job.job_id, job.attempts, job.lost_claims], [created.job_id, i, i - 1]);
    await expireLease(clock, c, l);
    if (i < 3) {
      const back = await client.getJob(created.job_id);
      assert.deepEqual([back.status, back.lost_claims], ['pending', i], `back in the queue after claim ${i}, which is counted`);
    }
  }
  const failed = await client.getJob(created.job_id);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.lost_claims, 3, 'the lost claims are on the wire, as the error counts them');
  assert.equal(failed.terminal, true);
  assert.equal(failed.error_code, 'claim_attempts_exhausted');
  assert.match(failed.error ?? '', /^3 claims lost without a start \(JOB_MAX_CLAIMS 3; claimed 3 times in all\); the last: claim lease of 20 s expired/);
  assert.equal(await l.poll(), null, 'not handed out again');
  const details = await rejectsWith(l.started(created.job_id), 409, 'invalid_transition');
  assert.equal(details.current_status, 'failed', 'a late started is told the job failed');
  // a start that never ran leaves no conversation to continue (docs/sessions.md, closed sessions)
  assert.equal((await client.getSession('poison')).accepts_input, false);
});

test('a launcher that deregisters holding a claimed job, on its last allowed claim: the error says it left before starting it', async (t) => {
  const clock = new ManualClock();
  const { client } = await startTest(t, { ...timing, maxClaims: 1 }, { clock });
  const l = await fakeLauncher(client, 'leaving');
  const created = await start(client, 'poison');
  assert.equal((await l.take()).job_id, created.job_id);
  await client.deleteLauncher(l.id, { self: true });
  const failed = await client.getJob(created.job_id);
  assert.equal(failed.error_code, 'claim_attempts_exhausted');
  assert.match(failed.error ?? '', /the last: launcher \S+ left before it started the job \(it deregistered itself\)$/);
});

test('a job stopped during its last allowed claim ends stopped when the lease expires, not failed', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const l = await fakeLauncher(client);
  const created = await start(client, 'stopped');
  await loseClaims(clock, c, l, 2);
  assert.equal((await l.take()).attempts, 3);
  await client.stopJob(created.job_id);
  await expireLease(clock, c, l);
  const ended = await client.getJob(created.job_id);
  assert.deepEqual([ended.status, ended.error_code], ['stopped', null]);
});

test('a job whose launchers are lost JOB_MAX_CLAIMS times fails, naming the last launcher', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const created = await start(client, 'poison');
  let last = '';
  for (let i = 1; i <= 3; i++) {
    const l = await fakeLauncher(client, `victim-${i}`);
    const job = await l.take();
    assert.equal(job.job_id, created.job_id);
    last = l.id;
    clock.advance(19_000); // within the lease: the launcher is lost first (it never heartbeats again)
    await c.core.sweep();
    clock.advance(12_000);
    await c.core.sweep();
    assert.equal((await client.listLaunchers()).launchers.find((x) => x.launcher_id === l.id)?.status, 'stale');
  }
  const failed = await client.getJob(created.job_id);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.error_code, 'claim_attempts_exhausted');
  assert.ok(failed.error?.includes(`launcher ${last} lost`), failed.error ?? '');
});

test('a job that starts on its last allowed claim runs normally', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const l = await fakeLauncher(client);
  const created = await start(client, 'survivor');
  await loseClaims(clock, c, l, 2);
  const job = await l.take();
  assert.deepEqual([job.job_id, job.attempts], [created.job_id, 3]);
  await l.started(job.job_id);
  clock.advance(21_000); // past the lease: a started job is not the lease's any more
  await l.heartbeat();
  await c.core.sweep();
  assert.equal((await client.getJob(created.job_id)).status, 'running');
  await l.completed(job.job_id, 'fine');
  const done = await client.getJob(created.job_id);
  assert.deepEqual([done.status, done.error_code], ['completed', null]);
});

async function idleSession(client: AgentqClient, l: FakeLauncher, name: string): Promise<void> {
  const job = await start(client, name);
  assert.equal((await l.take()).job_id, job.job_id);
  await l.completed(job.job_id, `${name} ready`);
}

test('the parent of a poisoned child is told of its failure', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const l = await fakeLauncher(client);
  await idleSession(client, l, 'parent');
  const child = await start(client, 'child', 'crash them all', { parent_session_name: 'parent' });
  for (let i = 1; i <= 3; i++) {
    assert.equal((await l.take()).job_id, child.job_id);
    await expireLease(clock, c, l);
  }
  const p = await client.getSession('parent');
  assert.ok(p.callback_job_id, 'a callback resume is queued');
  const cb = await client.getJob(p.callback_job_id);
  assert.deepEqual(cb.callback_of, [child.job_id]);
  assert.match(cb.prompt, /<status>failed<\/status>/);
  assert.match(cb.prompt, /3 claims lost without a start/);
});

test('JOB_MAX_CLAIMS is read and validated by loadConfig (default 5)', () => {
  assert.equal(loadConfig({}).maxClaims, 5);
  assert.equal(loadConfig({ JOB_MAX_CLAIMS: '2' }).maxClaims, 2);
  for (const bad of ['0', '1.5', '1001', 'many']) {
    assert.throws(() => loadConfig({ JOB_MAX_CLAIMS: bad }), (e: Error) => e instanceof ConfigError && e.variable === 'JOB_MAX_CLAIMS', bad);
  }
});

test('a poisoned delivery fails, and the outcomes it carried stay on the session for its next delivery', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const l = await fakeLauncher(client);
  await idleSession(client, l, 'parent');
  const child = await start(client, 'child', 'x', { parent_session_name: 'parent' });
  assert.equal((await l.take()).job_id, child.job_id);
  await l.completed(child.job_id, 'the answer is 42');
  const delivery = (await client.getSession('parent')).callback_job_id!;
  for (let i = 1; i <= 3; i++) {
    assert.equal((await l.take()).job_id, delivery);
    await expireLease(clock, c, l);
  }
  const failed = await client.getJob(delivery);
  assert.deepEqual([failed.status, failed.error_code], ['failed', 'claim_attempts_exhausted']);
  const p = await client.getSession('parent');
  assert.equal(p.callback_job_id, null);
  assert.deepEqual(p.pending_callbacks.map((n) => [n.job_id, n.result]), [[child.job_id, 'the answer is 42']], 'kept, visible');
  // held, as after any delivery that did not complete (docs/sessions.md): they go with the next
  // delivery, after the parent's next own job
  const next = await client.createJob({ session_name: 'parent', type: 'resume_session', prompt: 'go on' });
  assert.equal((await l.take()).job_id, next.job_id);
  await l.completed(next.job_id, 'went on');
  const again = (await client.getSession('parent')).callback_job_id;
  assert.ok(again && again !== delivery, 'a new delivery');
  const taken = await l.take();
  assert.equal(taken.job_id, again);
  assert.match(taken.prompt, /the answer is 42/);
});


test('claims whose poll answer was never delivered do not count towards JOB_MAX_CLAIMS', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { ...timing, maxClaims: 2 }, { clock });
  const l = await fakeLauncher(client);
  const created = await start(client, 'unlucky');
  for (let i = 1; i <= 3; i++) {
    // what the route does when the launcher's connection closed before the answer was written
    const answer = await c.core.sync({ launcher_id: l.id, capacity: 1, reports: [] }, new AbortController().signal);
    assert.deepEqual([answer.jobs[0]?.job_id, answer.jobs[0]?.attempts], [created.job_id, i]);
    await c.core.pollAnswerLost(l.id, { jobs: answer.jobs });
  }
  const fourth = await l.take();
  assert.deepEqual([fourth.attempts, fourth.lost_claims], [4, 0], 'every claim counts in attempts; none was lost');
  await expireLease(clock, c, l);
  const back = await client.getJob(created.job_id);
  assert.deepEqual([back.status, back.lost_claims], ['pending', 1], 'one claim lost: back in the queue');
  assert.equal((await l.take()).attempts, 5);
  await expireLease(clock, c, l);
  const failed = await client.getJob(created.job_id);
  assert.deepEqual([failed.status, failed.error_code], ['failed', 'claim_attempts_exhausted']);
  assert.match(failed.error ?? '', /^2 claims lost without a start \(JOB_MAX_CLAIMS 2; claimed 5 times in all\)/);
});

test('claims a coordinator restart took back do not count towards JOB_MAX_CLAIMS', async (t) => {
  const file = join(tempDir(t, 'agentq-poison-'), 'agentq.db');
  const clock = new ManualClock();
  const config = { ...timing, maxClaims: 2, databaseUrl: `sqlite:${file}` };
  let run = await startTest(t, config, { clock });
  let l = await fakeLauncher(run.client);
  const created = await start(run.client, 'restarted');
  for (let i = 1; i <= 3; i++) {
    assert.equal((await l.take()).attempts, i);
    await run.client.close();
    await run.c.close();
    run = await startTest(t, config, { clock }); // its recovery puts the claimed job back in the queue
    l = await fakeLauncher(run.client);
    assert.equal((await run.client.getJob(created.job_id)).status, 'pending', `back after restart ${i}`);
  }
  assert.equal((await l.take()).attempts, 4);
  await expireLease(clock, run.c, l);
  assert.equal((await run.client.getJob(created.job_id)).status, 'pending', 'one claim lost: back in the queue');
  // the count is the store's: read back from the database after a restart
  await run.client.close();
  await run.c.close();
  run = await startTest(t, config, { clock });
  l = await fakeLauncher(run.client);
  assert.equal((await run.client.getJob(created.job_id)).lost_claims, 1, 'kept across a restart');
  const last = await l.take();
  assert.deepEqual([last.attempts, last.lost_claims], [5, 1]);
  await expireLease(clock, run.c, l);
  const failed = await run.client.getJob(created.job_id);
  assert.deepEqual([failed.error_code, failed.lost_claims], ['claim_attempts_exhausted', 2]);
});
