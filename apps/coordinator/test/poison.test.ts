import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AgentqClient } from '@agentq/client';
import { ConfigError, loadConfig } from '../src/config.js';
import { ManualClock } from '../src/core/clock.js';
import { fakeLauncher, type FakeLauncher, start, startTest } from './helpers.js';

// A job claimed again and again without ever starting ends `failed` (claim_attempts_exhausted)
// after JOB_MAX_CLAIMS claims lost to lease expiry or to a lost launcher. The app's own sweeper
// never fires (sweepIntervalMs is long): time moves with clock.advance(), the test sweeps.
const timing = { heartbeatIntervalSeconds: 10, heartbeatTimeoutSeconds: 30, claimLeaseSeconds: 20, sweepIntervalMs: 600_000, maxClaims: 3 };

async function expireLease(clock: ManualClock, c: { core: { sweep(): Promise<void> } }, keepAlive: FakeLauncher): Promise<void> {
  clock.advance(21_000);
  await keepAlive.heartbeat();
  await c.core.sweep();
}

test('a job whose claim lease expires JOB_MAX_CLAIMS times fails claim_attempts_exhausted', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const l = await fakeLauncher(client, 'crashy');
  const created = await start(client, 'poison');
  for (let i = 1; i <= 3; i++) {
    const job = await l.take();
    assert.deepEqual([job.job_id, job.attempts], [created.job_id, i]);
    await expireLease(clock, c, l);
    if (i < 3) assert.equal((await client.getJob(created.job_id)).status, 'pending', `back in the queue after claim ${i}`);
  }
  const failed = await client.getJob(created.job_id);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.terminal, true);
  assert.equal(failed.error_code, 'claim_attempts_exhausted');
  assert.match(failed.error ?? '', /claimed 3 times .*never started.*claim lease of 20 s expired/);
  assert.equal(await l.poll(), null, 'not handed out again');
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
  for (let i = 1; i <= 2; i++) {
    await l.take();
    await expireLease(clock, c, l);
  }
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
  assert.match(cb.prompt, /claimed 3 times/);
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
