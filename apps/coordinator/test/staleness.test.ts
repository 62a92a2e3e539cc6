import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentqApiError, AgentqClient } from '@agentq/client';
import { ManualClock } from '../src/core/clock.js';
import { tempDatabase } from './process.js';
import { fakeLauncher, parked, rejectsWith, start, startTest, unparked } from './helpers.js';

// The app's own sweeper never fires in these tests (sweepIntervalMs is long): time moves only
// with clock.advance(), and the test runs the sweep itself.
const timing = { heartbeatIntervalSeconds: 10, heartbeatTimeoutSeconds: 30, claimLeaseSeconds: 20, sweepIntervalMs: 600_000 };

test('a launcher silent past the heartbeat timeout is stale: its unstarted jobs go back in order, running ones are interrupted', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const lost = await fakeLauncher(client, 'lost');
  const jobs = [await start(client, 's1'), await start(client, 's2'), await start(client, 's3'), await start(client, 's4')];
  const running = await lost.take();
  await lost.started(running.job_id);
  await lost.take(); // s2, claimed
  await lost.take(); // s3, claimed
  const later = await start(client, 's5');

  clock.advance(29_000);
  await c.core.sweep();
  assert.equal((await client.listLaunchers()).launchers[0]?.status, 'online', 'not yet');
  clock.advance(2_000);
  await c.core.sweep();

  const [l] = (await client.listLaunchers()).launchers;
  assert.equal(l?.status, 'stale');
  const interrupted = await client.getJob(running.job_id);
  assert.equal(interrupted.status, 'interrupted');
  assert.equal(interrupted.terminal, true);
  assert.match(interrupted.error ?? '', /launcher .* lost/);

  const next = await fakeLauncher(client, 'next');
  const order = [];
  for (let i = 0; i < 4; i++) order.push((await next.take()).job_id);
  assert.deepEqual(order, [jobs[1]!.job_id, jobs[2]!.job_id, jobs[3]!.job_id, later.job_id], 'requeued at the head, in original order');
});

test('a stale launcher that comes back gets 401, registers again, and its reports for lost jobs get 409', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const l = await fakeLauncher(client);
  await start(client, 'comeback');
  const job = await l.take();
  await l.started(job.job_id);
  clock.advance(31_000);
  await c.core.sweep();

  await rejectsWith(l.heartbeat(), 401, 'launcher_unknown');
  await rejectsWith(l.poll(), 401, 'launcher_unknown');
  await rejectsWith(l.completed(job.job_id, 'late'), 401, 'launcher_unknown');
  const again = await fakeLauncher(client);
  const details = await rejectsWith(again.completed(job.job_id, 'late'), 409, 'job_owned_by_other_launcher');
  assert.equal(details.current_status, 'interrupted');
});

test('heartbeats and polls keep a launcher online', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { ...timing, pollTimeoutSeconds: 0.05 }, { clock });
  const l = await fakeLauncher(client);
  for (let i = 0; i < 3; i++) {
    clock.advance(25_000);
    if (i % 2 === 0) await l.heartbeat();
    else assert.equal(await l.poll(), null);
    await c.core.sweep();
  }
  const [entry] = (await client.listLaunchers()).launchers;
  assert.equal(entry?.status, 'online');
  assert.equal(entry?.seconds_since_heartbeat, 0);
});

test('a job claimed but not started within the claim lease goes back to the queue', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const slow = await fakeLauncher(client, 'slow');
  const created = await start(client, 'leased');
  await slow.take();
  clock.advance(15_000);
  await slow.heartbeat(); // alive, but never reports started
  await c.core.sweep();
  assert.equal((await client.getJob(created.job_id)).status, 'claimed', 'lease not over yet');
  clock.advance(6_000);
  await slow.heartbeat();
  await c.core.sweep();
  const requeued = await client.getJob(created.job_id);
  assert.equal(requeued.status, 'pending');
  assert.equal(requeued.launcher_id, null);

  const other = await fakeLauncher(client, 'other');
  const job = await other.take();
  assert.equal(job.job_id, created.job_id);
  assert.equal(job.attempts, 2);
  await rejectsWith(slow.started(created.job_id), 409, 'job_owned_by_other_launcher');
});

test('staleness is checked by the coordinator timer, without anyone asking', async (t) => {
  // The app's own sweeper timer runs (every 10 ms); time itself moves only with the clock, so
  // the launcher cannot go stale before the test has set it up, however slow the machine is.
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { ...timing, sweepIntervalMs: 10 }, { clock });
  const l = await fakeLauncher(client);
  await start(client, 'orphan');
  const job = await l.take();
  await l.started(job.job_id);
  const stale = new Promise<string>((resolve) => {
    const off = c.core.events.subscribe((e) => {
      if (e.type === 'launcher.stale') {
        off();
        resolve(e.launcher.launcher_id);
      }
    });
  });
  clock.advance(31_000); // nobody calls sweep(): the timer must notice
  assert.equal(await stale, l.id);
  assert.equal((await client.getJob(job.job_id)).status, 'interrupted');
});

test('stale launchers are listed as stale, and forgotten after an hour', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const l = await fakeLauncher(client);
  clock.advance(31_000);
  await c.core.sweep();
  assert.equal((await client.listLaunchers()).launchers[0]?.status, 'stale');
  assert.equal((await client.health()).launchers.stale, 1);
  clock.advance(60 * 60 * 1000);
  await c.core.sweep();
  assert.equal((await client.listLaunchers()).launchers.length, 0);
  await rejectsWith(client.deleteLauncher(l.id), 404, 'launcher_not_found');
});

test("a lost launcher's unstarted jobs reach a parked launcher oldest first", async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { ...timing, pollTimeoutSeconds: 60 }, { clock });
  const lost = await fakeLauncher(client, 'lost');
  const first = await start(client, 'older');
  const second = await start(client, 'newer');
  await lost.take();
  await lost.take();
  const waiting = await fakeLauncher(client, 'waiting');
  const isParked = parked(c.core, waiting.id);
  const poll = waiting.poll();
  await isParked;
  clock.advance(31_000);
  await waiting.heartbeat();
  await c.core.sweep();
  const answer = await poll;
  assert.equal(answer?.job?.job_id, first.job_id, 'the older job goes out first');
  assert.equal((await client.getJob(second.job_id)).status, 'pending');
});

test('a poll whose client went away is no sign of life', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { ...timing, pollTimeoutSeconds: 600 }, { clock });
  const l = await fakeLauncher(client);
  const isParked = parked(c.core, l.id);
  const abort = new AbortController();
  const poll = l.poll({ signal: abort.signal });
  await isParked;
  clock.advance(25_000);
  await c.core.sweep(); // parked: alive at +25 s
  clock.advance(5_000);
  const gone = unparked(c.core, l.id);
  abort.abort();
  await assert.rejects(poll);
  await gone; // the disconnect at +30 s must not count as a sign of life
  clock.advance(26_000);
  await c.core.sweep();
  assert.equal((await client.listLaunchers()).launchers[0]?.status, 'stale', 'silent for 31 s since the last real sign');
});

test('a stale launcher stays as it was across a restart on SQLite: its last heartbeat, and forgotten an hour after it went stale', async (t) => {
  const clock = new ManualClock();
  const databaseUrl = tempDatabase(t);
  const first = await startTest(t, { ...timing, databaseUrl }, { clock });
  const l = await fakeLauncher(first.client);
  clock.advance(5_000);
  await l.heartbeat();
  clock.advance(31_000);
  await first.c.core.sweep();
  const before = (await first.client.listLaunchers()).launchers[0]!;
  assert.equal(before.status, 'stale');
  await first.c.close();

  clock.advance(50 * 60 * 1000);
  const { client, c } = await startTest(t, { ...timing, databaseUrl }, { clock });
  const after = (await client.listLaunchers()).launchers[0]!;
  assert.equal(after.status, 'stale');
  assert.equal(after.last_heartbeat, before.last_heartbeat, 'a restart is no heartbeat of a launcher already lost');
  assert.equal(after.seconds_since_heartbeat, 31 + 50 * 60);
  clock.advance(10 * 60 * 1000);
  await c.core.sweep();
  assert.deepEqual((await client.listLaunchers()).launchers, [], 'forgotten an hour after it went stale');
  await rejectsWith(client.deleteLauncher(l.id), 404, 'launcher_not_found');
});

test('a heartbeat tells a launcher to stop the jobs it runs that are no longer its own (ended while it was out of touch, or unknown)', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, timing, { clock });
  const l = await fakeLauncher(client);
  const lost = await start(client, 'lost-touch');
  await l.take();
  await l.started(lost.job_id);
  clock.advance(31_000);
  await c.core.sweep();
  assert.equal((await client.getJob(lost.job_id)).status, 'interrupted');

  // it comes back under a new id, its executor still running the interrupted job, and takes a new one
  const again = await fakeLauncher(client);
  const fresh = await start(client, 'fresh');
  await again.take();
  await again.started(fresh.job_id);
  const unknown = 'job_000000000000';
  const answer = await client.heartbeat({ launcher_id: again.id, running_jobs: [lost.job_id, fresh.job_id, unknown] });
  assert.deepEqual(answer.stop_jobs.sort(), [lost.job_id, unknown].sort(), 'not the job it holds');
  assert.equal((await client.getJob(fresh.job_id)).status, 'running');
});

test('registrations are bounded by MAX_LAUNCHERS: a new one takes the place of the launcher stale the longest, or is refused 503 too_many_launchers while none is stale', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { ...timing, maxLaunchers: 3 }, { clock });
  // refusals are looked at, not waited out and sent again
  const once = new AgentqClient({ url: c.url, overloadRetries: 0 });
  t.after(() => once.close());
  const first = await fakeLauncher(client, 'first');
  clock.advance(5_000);
  const second = await fakeLauncher(client, 'second');
  await fakeLauncher(client, 'third');
  const err = await rejectsWithError(once.register({ hostname: 'fourth' }), 503, 'too_many_launchers');
  assert.deepEqual(err.details, { max_launchers: 3, retry_after_seconds: 30 });
  assert.equal(err.retryAfterMs, 30_000, 'Retry-After: the heartbeat timeout, after which one may be stale');
  assert.equal((await client.listLaunchers()).launchers.length, 3, 'nothing registered');

  // first and second go stale (first before second); third keeps heartbeating
  clock.advance(26_000);
  await c.core.sweep();
  const third = (await client.listLaunchers()).launchers.find((l) => l.hostname === 'third')!;
  await client.heartbeat({ launcher_id: third.launcher_id });
  clock.advance(5_000);
  await c.core.sweep();
  assert.deepEqual(
    (await client.listLaunchers()).launchers.map((l) => [l.hostname, l.status]).sort(),
    [['first', 'stale'], ['second', 'stale'], ['third', 'online']],
  );
  const fourth = await once.register({ hostname: 'fourth' });
  const listed = (await client.listLaunchers()).launchers;
  assert.deepEqual(listed.map((l) => l.hostname).sort(), ['fourth', 'second', 'third'], 'first, stale the longest, made room');
  assert.ok(listed.some((l) => l.launcher_id === fourth.launcher_id));
  await rejectsWith(client.deleteLauncher(first.id), 404, 'launcher_not_found');
  assert.equal(listed.find((l) => l.launcher_id === second.id)?.status, 'stale');
});

/** The error a call was refused with, checked for its status and code. */
async function rejectsWithError(promise: Promise<unknown>, status: number, code: string): Promise<AgentqApiError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof AgentqApiError && err.status === status && err.code === code) return err;
    throw new Error(`expected ${status} ${code}`, { cause: err });
  }
  throw new Error(`expected ${status} ${code}, but the call succeeded`);
}

test('at MAX_LAUNCHERS a launcher restarted on its host takes the place of the earlier life it replaces', async (t) => {
  const clock = new ManualClock();
  const { client, c } = await startTest(t, { ...timing, maxLaunchers: 2 }, { clock });
  const once = new AgentqClient({ url: c.url, overloadRetries: 0 });
  t.after(() => once.close());
  const host = { hostname: 'gpu-1', host_id: 'host-gpu-1', executor_type: 'test' };
  const old = await client.register(host);
  const other = await fakeLauncher(client, 'other');
  const job = await start(client, 'held');
  assert.equal((await client.poll(old.launcher_id, { holdSeconds: 1 }))?.job?.job_id, job.job_id);

  // every place taken, none stale: the restart replaces its predecessor at once
  const again = await once.register({ ...host, replaces: [old.launcher_id] });
  assert.deepEqual(again.replaced, [old.launcher_id]);
  assert.deepEqual((await client.listLaunchers()).launchers.map((l) => l.launcher_id).sort(), [again.launcher_id, other.id].sort());
  assert.equal((await client.getJob(job.job_id)).status, 'pending', 'the job the old one held is back in the queue');

  // one with no predecessor of its own to replace (another host's is not) is still refused
  const err = await rejectsWithError(once.register({ hostname: 'third', replaces: [other.id] }), 503, 'too_many_launchers');
  assert.equal(err.details?.['max_launchers'], 2);
  assert.deepEqual((await client.listLaunchers()).launchers.map((l) => l.launcher_id).sort(), [again.launcher_id, other.id].sort());
});
