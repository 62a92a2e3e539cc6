import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fakeLauncher, nextEvent, parked, start, startTest, unparked } from './helpers.js';

test('jobs are handed out in creation order (strict FIFO across sessions)', async (t) => {
  const { client } = await startTest(t);
  const created = [];
  for (let i = 0; i < 6; i++) created.push(await start(client, `fifo-${i}`));
  const l = await fakeLauncher(client);
  const taken = [];
  for (let i = 0; i < 6; i++) taken.push((await l.take()).job_id);
  assert.deepEqual(taken, created.map((j) => j.job_id));
});

test('a parked poll is woken by the enqueue itself and returns the job created after it parked', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const l = await fakeLauncher(client);
  const isParked = parked(c.core, l.id);
  const poll = l.poll();
  await isParked;
  const created = await start(client, 'wake-up');
  const answer = await poll;
  assert.equal(answer?.job?.job_id, created.job_id);
  assert.equal(answer?.job?.status, 'claimed');
});

test("a create that a parked launcher takes at once answers with what it became (claimed), one job or a batch", async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const l = await fakeLauncher(client);
  for (let i = 0; i < 5; i++) {
    const isParked = parked(c.core, l.id);
    const poll = l.poll({ capacity: 3, batch: true });
    await isParked;
    const created = i % 2 === 0 ? [await start(client, `became-${i}`)] : await client.createJobs([{ type: 'start_session', session_name: `became-${i}`, prompt: 'go' }]);
    assert.deepEqual(
      created.map((j) => j.status),
      ['claimed'],
      `create ${i}: answered as committed, before the parked poll's service took it`,
    );
    await poll;
  }
});

test('among parked launchers the one that waited longest is served first', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const launchers = [await fakeLauncher(client, 'first'), await fakeLauncher(client, 'second'), await fakeLauncher(client, 'third')];
  const polls = [];
  for (const l of launchers) {
    const p = parked(c.core, l.id);
    polls.push(l.poll());
    await p;
  }
  const jobs = [await start(client, 'one'), await start(client, 'two'), await start(client, 'three')];
  const answers = await Promise.all(polls);
  assert.deepEqual(
    answers.map((a) => a?.job?.job_id),
    jobs.map((j) => j.job_id),
  );
});

test('after the poll timeout with nothing to do the poll answers 204', async (t) => {
  const { client } = await startTest(t, { pollTimeoutSeconds: 0.2 });
  const l = await fakeLauncher(client);
  assert.equal(await l.poll(), null);
});

test('no job is claimed twice by 50 concurrent pollers', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 1 });
  const launchers = await Promise.all(Array.from({ length: 50 }, (_, i) => fakeLauncher(client, `p${i}`)));
  const allParked = parked(c.core, undefined, 20);
  // 20 park first; the other 30 race the enqueues
  const polls = launchers.slice(0, 20).map((l) => l.poll());
  await allParked;
  const creating = Array.from({ length: 30 }, (_, i) => start(client, `race-${i}`));
  polls.push(...launchers.slice(20).map((l) => l.poll()));
  const created = await Promise.all(creating);
  const answers = await Promise.all(polls);
  const got = answers.flatMap((a) => (a?.job ? [a.job.job_id] : []));
  assert.equal(got.length, 30, 'every job handed out once');
  assert.equal(new Set(got).size, 30, 'no job handed out twice');
  assert.deepEqual(new Set(got), new Set(created.map((j) => j.job_id)));
  assert.equal(answers.filter((a) => a === null).length, 20, 'the rest got 204');
  for (const job of created) {
    const j = await client.getJob(job.job_id);
    const holder = launchers[answers.findIndex((a) => a?.job?.job_id === job.job_id)];
    assert.equal(j.launcher_id, holder?.id);
  }
});

test('deregistration while parked answers the parked poll with { deregistered: true }', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const l = await fakeLauncher(client);
  const isParked = parked(c.core, l.id);
  const poll = l.poll();
  await isParked;
  const removed = nextEvent(c.core, 'launcher.removed'); // once the notice is written
  await client.deleteLauncher(l.id);
  assert.deepEqual(await poll, { deregistered: true });
  await removed;
  assert.equal((await client.listLaunchers()).launchers.length, 0);
});

test('a launcher that disconnects while parked takes no job with it; the next launcher gets it', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const quitter = await fakeLauncher(client, 'quitter');
  const isParked = parked(c.core, quitter.id);
  const abort = new AbortController();
  const poll = quitter.poll({ signal: abort.signal });
  await isParked;
  const gone = unparked(c.core, quitter.id);
  abort.abort();
  await assert.rejects(poll);
  await gone;
  const created = await start(client, 'for-the-next');
  assert.equal((await client.getJob(created.job_id)).status, 'pending');
  const next = await fakeLauncher(client, 'next');
  const job = await next.take();
  assert.equal(job.job_id, created.job_id);
  assert.equal(job.launcher_id, next.id);
});

test('a poll with capacity 0 is not given jobs (the launcher is full)', async (t) => {
  const { client } = await startTest(t, { pollTimeoutSeconds: 0.2 });
  const created = await start(client, 'wait-for-room');
  const l = await fakeLauncher(client);
  assert.equal(await l.poll({ capacity: 0 }), null);
  assert.equal((await client.getJob(created.job_id)).status, 'pending');
  assert.equal((await l.take()).job_id, created.job_id);
});

test('an answer that could not be delivered puts the job back at the head of the queue', async (t) => {
  const { client, c } = await startTest(t);
  const first = await start(client, 'undelivered');
  const second = await start(client, 'behind-it');
  const l = await fakeLauncher(client);
  const answer = await c.core.poll(l.id, 1, new AbortController().signal);
  assert.equal(answer?.job?.job_id, first.job_id);
  await c.core.pollAnswerLost(l.id, answer!);
  const again = await client.getJob(first.job_id);
  assert.equal(again.status, 'pending');
  assert.equal(again.launcher_id, null);
  const other = await fakeLauncher(client);
  assert.equal((await other.take()).job_id, first.job_id, 'still first in line');
  assert.equal((await other.take()).job_id, second.job_id);
});

test('a late undo of an answer that was lost leaves alone the claim of a later answer that was delivered', async (t) => {
  const { client, c } = await startTest(t);
  const created = await start(client, 'claimed-twice');
  const l = await fakeLauncher(client);
  const lost = await c.core.poll(l.id, 1, new AbortController().signal);
  assert.equal(lost?.job?.attempts, 1);
  await c.core.pollAnswerLost(l.id, lost!);
  // the same launcher claims it again, and that answer arrives
  const delivered = await l.take();
  assert.deepEqual([delivered.job_id, delivered.attempts], [created.job_id, 2]);
  // the first answer's undo again (as when it runs late, after the second claim)
  await c.core.pollAnswerLost(l.id, lost!);
  const job = await client.getJob(created.job_id);
  assert.deepEqual([job.status, job.launcher_id, job.attempts], ['claimed', l.id, 2], 'still claimed by the delivered answer');
});

test('a launcher that deregisters itself while parked is not handed the job it releases', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const leaving = await fakeLauncher(client, 'leaving');
  const created = await start(client, 'released');
  await leaving.take();
  const isParked = parked(c.core, leaving.id);
  const poll = leaving.poll();
  await isParked;
  await client.deleteLauncher(leaving.id, { self: true });
  assert.deepEqual(await poll, { deregistered: true });
  const job = await client.getJob(created.job_id);
  assert.equal(job.status, 'pending');
  assert.equal(job.launcher_id, null);
  const next = await fakeLauncher(client, 'next');
  assert.equal((await next.take()).job_id, created.job_id);
});

test('stop requests and the deregistration notice in an answer that was not delivered are given again', async (t) => {
  const { client, c } = await startTest(t);
  const l = await fakeLauncher(client);
  const created = await start(client, 'to-stop');
  await l.take();
  await l.started(created.job_id);
  await client.stopJob(created.job_id);
  const signal = new AbortController().signal;
  const lostStop = await c.core.poll(l.id, 0, signal);
  assert.deepEqual(lostStop, { stop_jobs: [created.job_id] });
  await c.core.pollAnswerLost(l.id, lostStop!); // the connection died before the answer was written
  assert.deepEqual(await l.poll({ capacity: 0 }), { stop_jobs: [created.job_id] });

  const idle = await fakeLauncher(client, 'idle');
  await client.deleteLauncher(idle.id);
  const lostNotice = await c.core.poll(idle.id, 1, signal);
  assert.deepEqual(lostNotice, { deregistered: true });
  await c.core.pollAnswerLost(idle.id, lostNotice!);
  const listed = (await client.listLaunchers()).launchers.find((x) => x.launcher_id === idle.id);
  assert.equal(listed?.status, 'deregistering', 'still due: it is not forgotten');
  const removed = nextEvent(c.core, 'launcher.removed'); // once the notice is written
  assert.deepEqual(await idle.poll(), { deregistered: true });
  await removed;
  assert.equal((await client.listLaunchers()).launchers.some((x) => x.launcher_id === idle.id), false);
});

/**
 * Launchers with these labels and slots, each with a batch poll held 60 s, parked in this order
 * (the first waited longest). Resolves with their polls.
 */
async function parkLabelled(
  client: Awaited<ReturnType<typeof startTest>>['client'],
  c: Awaited<ReturnType<typeof startTest>>['c'],
  launchers: ReadonlyArray<readonly [hostname: string, labels: Record<string, string>, capacity: number]>,
) {
  const polls = [];
  for (const [hostname, labels, capacity] of launchers) {
    const id = (await client.register({ hostname, executor_type: 'test', labels })).launcher_id;
    const isParked = parked(c.core, id);
    polls.push(client.poll(id, { holdSeconds: 60, capacity, batch: true }));
    await isParked;
  }
  return polls;
}

test("a parked launcher's capacity counts only against the routes it serves: jobs of another route wake the launchers that serve them", async (t) => {
  // the poll of a launcher that never comes is held for the whole hold time (60 s): a job left
  // unoffered shows as a poll answered 204 instead of with it, at the hold's end
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  // parked in this order: the big launcher serving zone=x waited longest
  const polls = await parkLabelled(client, c, [
    ['big', { zone: 'x' }, 4],
    ['gpu-1', { gpu: '1' }, 1],
    ['gpu-2', { gpu: '1' }, 1],
  ]);
  // one commit makes 1 zone=x job and 3 gpu=1 jobs ready: the big launcher's capacity of 4
  // covers none of the gpu jobs, so both gpu launchers must be woken
  const [zone, g1, g2] = await client.createJobs([
    { type: 'start_session', session_name: 'zone', prompt: 'z', requires: { zone: 'x' } },
    { type: 'start_session', session_name: 'g1', prompt: 'g', requires: { gpu: '1' } },
    { type: 'start_session', session_name: 'g2', prompt: 'g', requires: { gpu: '1' } },
    { type: 'start_session', session_name: 'g3', prompt: 'g', requires: { gpu: '1' } },
  ]);
  const [bigGot, ...gpuGot] = (await Promise.all(polls)).map((a) => a?.jobs?.map((j) => j.job_id));
  assert.deepEqual(bigGot, [zone!.job_id]);
  // one each (on PostgreSQL the two claims race, so either may get either)
  assert.deepEqual(gpuGot.map((ids) => ids?.length), [1, 1]);
  assert.deepEqual(gpuGot.flat().sort(), [g1!.job_id, g2!.job_id].sort());
});

test('a parked launcher serving several routes takes the oldest of their jobs: a launcher skipped for the route it was counted against is tried again', async (t) => {
  // as above, a job left unoffered shows as a poll answered 204 at the end of its 60 s hold
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  // waited longest: a launcher serving both routes, with 2 slots; then one serving gpu=1 only
  const polls = await parkLabelled(client, c, [
    ['both', { gpu: '1', zone: 'x' }, 2],
    ['gpu', { gpu: '1' }, 1],
  ]);
  // one commit makes gpu, zone, gpu ready: the first launcher's 2 slots are counted against the
  // 2 gpu jobs (the first route of the commit), but it takes the 2 oldest jobs it may: gpu and zone
  const [g1, z, g2] = await client.createJobs([
    { type: 'start_session', session_name: 'g1', prompt: 'g', requires: { gpu: '1' } },
    { type: 'start_session', session_name: 'z', prompt: 'z', requires: { zone: 'x' } },
    { type: 'start_session', session_name: 'g2', prompt: 'g', requires: { gpu: '1' } },
  ]);
  const got = (await Promise.all(polls)).map((a) => a?.jobs?.map((j) => j.job_id) ?? []);
  assert.deepEqual(got.flat().sort(), [g1!.job_id, z!.job_id, g2!.job_id].sort());
  assert.deepEqual(got[1], [g2!.job_id]);
});
