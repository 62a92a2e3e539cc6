import assert from 'node:assert/strict';
import { setMaxListeners } from 'node:events';
import { test } from 'node:test';
import type { Job, PollResponse } from '@agentq/protocol';
import { fakeLauncher, parked, start, startTest } from './helpers.js';

/*
 * Batched claims: `GET /launcher/jobs?capacity=N` hands out up to N jobs in `jobs` (oldest first;
 * `job` is jobs[0] for launchers that read one).
 */

const ids = (jobs: readonly Job[] | undefined) => (jobs ?? []).map((j) => j.job_id);

test('a poll with capacity N answers up to N jobs, oldest first, never more; `job` is the first of them', async (t) => {
  const { client } = await startTest(t);
  const created = await client.createJobs(
    Array.from({ length: 10 }, (_, i) => ({ type: 'start_session' as const, session_name: `cap-${i}`, prompt: 'x' })),
  );
  const l = await fakeLauncher(client);
  const answers: PollResponse[] = [];
  for (const capacity of [3, 3, 3, 3]) answers.push((await l.poll({ batch: true, capacity }))!);
  assert.deepEqual(
    answers.map((a) => a.jobs?.length),
    [3, 3, 3, 1],
  );
  for (const a of answers) {
    assert.deepEqual(a.job, a.jobs![0], '`job` is the first of `jobs`');
    for (const j of a.jobs!) {
      assert.equal(j.status, 'claimed');
      assert.equal(j.launcher_id, l.id);
    }
  }
  assert.deepEqual(answers.flatMap((a) => ids(a.jobs)), ids(created), 'FIFO across the answers');
  // capacity 1 (the default) still answers a single job in both fields
  await start(client, 'single');
  const one = await l.poll();
  assert.equal(one?.jobs?.length, 1);
  assert.equal(one?.job?.job_id, one?.jobs?.[0]?.job_id);
});

test('a poll answer carries at most MAX_ANSWER_BYTES of prompts: fewer jobs than its capacity, the first always, the rest at the next poll', async (t) => {
  const BUDGET = 64 * 1024;
  const { client } = await startTest(t, { maxAnswerBytes: BUDGET, pollTimeoutSeconds: 0.2 });
  const prompt = (i: number) => `${i}:${'x'.repeat(20_000)}`; // three fit in the budget, not four
  const created = await client.createJobs(Array.from({ length: 7 }, (_, i) => ({ type: 'start_session' as const, session_name: `big-${i}`, prompt: prompt(i) })));
  const huge = await start(client, 'huge', 'h'.repeat(2 * BUDGET));
  const l = await fakeLauncher(client);
  const answers: PollResponse[] = [];
  for (let i = 0; i < 4; i++) answers.push((await l.poll({ batch: true, capacity: 10 }))!);
  // 3, 3, then the seventh alone (the huge one after it does not fit), then the huge one alone
  assert.deepEqual(
    answers.map((a) => ids(a.jobs)),
    [ids(created.slice(0, 3)), ids(created.slice(3, 6)), ids(created.slice(6)), [huge.job_id]],
  );
  // what was left stayed ready: nothing is claimed twice or lost
  assert.equal(await l.poll({ batch: true, capacity: 10 }), null);
});

test('jobs a capped poll left ready go to the next parked launcher at once, not after its hold', { timeout: 30_000 }, async (t) => {
  const BUDGET = 64 * 1024;
  const { client, c } = await startTest(t, { maxAnswerBytes: BUDGET, pollTimeoutSeconds: 60 });
  const a = await fakeLauncher(client, 'host-a');
  const b = await fakeLauncher(client, 'host-b');
  // A parks first (it is served first), then B; both could take all the jobs
  const aParked = parked(c.core, a.id);
  const fromA = a.poll({ batch: true, capacity: 10 });
  await aParked;
  const bParked = parked(c.core, b.id);
  const fromB = b.poll({ batch: true, capacity: 10 });
  await bParked;
  // seven jobs become ready in one commit; three fit in one answer
  const created = await client.createJobs(
    Array.from({ length: 7 }, (_, i) => ({ type: 'start_session' as const, session_name: `left-${i}`, prompt: `${i}:${'x'.repeat(20_000)}` })),
  );
  // A takes three; the four it left are announced again, and B (parked for 60 s) takes three now
  assert.deepEqual(ids((await fromA)?.jobs), ids(created.slice(0, 3)));
  assert.deepEqual(ids((await fromB)?.jobs), ids(created.slice(3, 6)));
});

test('one commit that readies jobs of two routes wakes a parked launcher for each, whatever the first one\'s capacity', { timeout: 30_000 }, async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const regA = await client.register({ hostname: 'zone-a', labels: { zone: 'a' } });
  const regB = await client.register({ hostname: 'zone-b', labels: { zone: 'b' } });
  const aParked = parked(c.core, regA.launcher_id);
  const fromA = client.poll(regA.launcher_id, { holdSeconds: 60, batch: true, capacity: 10 });
  await aParked;
  const bParked = parked(c.core, regB.launcher_id);
  const fromB = client.poll(regB.launcher_id, { holdSeconds: 60, batch: true, capacity: 10 });
  await bParked;
  const [forA, forB] = await client.createJobs([
    { type: 'start_session', session_name: 'in-a', prompt: 'x', requires: { zone: 'a' } },
    { type: 'start_session', session_name: 'in-b', prompt: 'x', requires: { zone: 'b' } },
  ]);
  // A's capacity (10) covers both jobs, but it serves only one of the routes: B is woken too
  assert.deepEqual(ids((await fromA)?.jobs), [forA!.job_id]);
  assert.deepEqual(ids((await fromB)?.jobs), [forB!.job_id]);
});

test('one answer never holds two jobs of a session: the second waits until the first ends', async (t) => {
  const { client } = await startTest(t);
  const first = await start(client, 'serial');
  const second = await client.createJob({ type: 'resume_session', session_name: 'serial', prompt: 'then this' });
  const other = await start(client, 'other');
  const l = await fakeLauncher(client);
  const answer = await l.poll({ batch: true, capacity: 5 });
  assert.deepEqual(ids(answer?.jobs), [first.job_id, other.job_id]);
  await l.started(first.job_id);
  await l.completed(first.job_id);
  const next = await l.poll({ batch: true, capacity: 5 });
  assert.deepEqual(ids(next?.jobs), [second.job_id]);
});

test('a parked poll with capacity N woken by a batch create takes up to N of the new jobs, in order', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const l = await fakeLauncher(client);
  const isParked = parked(c.core, l.id);
  const poll = l.poll({ batch: true, capacity: 4 });
  await isParked;
  const created = await client.createJobs(
    Array.from({ length: 7 }, (_, i) => ({ type: 'start_session' as const, session_name: `wake-${i}`, prompt: 'x' })),
  );
  const answer = await poll;
  assert.ok(answer?.jobs && answer.jobs.length >= 1 && answer.jobs.length <= 4, `got ${answer?.jobs?.length} jobs`);
  assert.deepEqual(ids(answer.jobs), ids(created).slice(0, answer.jobs.length), 'the oldest first');
  const rest = await l.poll({ batch: true, capacity: 10 });
  assert.deepEqual([...ids(answer.jobs), ...ids(rest?.jobs)], ids(created), 'the rest stayed queued in order');
});

test('many launchers polling with capacity while jobs arrive: each job handed out once, no answer over capacity', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 1 });
  const JOBS = 300;
  const launchers = await Promise.all(Array.from({ length: 12 }, (_, i) => fakeLauncher(client, `many-${i}`)));
  const capacities = launchers.map((_, i) => 1 + (i % 5));
  const seen = new Map<string, string>(); // job -> launcher
  let handed = 0;
  let created = 0;
  const done = new AbortController();
  // every launcher's poll listens on it at once (undici: one abort listener a request, let go a
  // moment after its answer): more than the 10 past which node warned of a leak, in every run
  setMaxListeners(2 * launchers.length, done.signal);
  const loops = launchers.map(async (l, i) => {
    // a failed check ends every loop (the others would poll for ever)
    try {
      await pollLoop(l, i);
    } catch (err) {
      done.abort();
      throw err;
    }
  });
  async function pollLoop(l: (typeof launchers)[number], i: number): Promise<void> {
    while (!done.signal.aborted) {
      const answer = await l.poll({ batch: true, capacity: capacities[i]!, signal: done.signal }).catch(() => null);
      const jobs = answer?.jobs ?? [];
      assert.ok(jobs.length <= capacities[i]!, `launcher ${i} asked for ${capacities[i]} and got ${jobs.length}`);
      for (const j of jobs) {
        assert.equal(seen.has(j.job_id), false, `job ${j.job_id} handed out twice`);
        seen.set(j.job_id, l.id);
      }
      // (the order inside an answer is checked in the tests above: here creates race each other,
      // and on PostgreSQL concurrent creates may take their queue places in another order than
      // their created_at times)
      handed += jobs.length;
      if (handed === JOBS) done.abort();
    }
  }
  const allParked = parked(c.core, undefined, launchers.length);
  await allParked;
  // creates in batches and one by one, while the launchers poll
  const creating: Promise<void>[] = [];
  for (let b = 0; b < 10; b++) {
    const batch = Array.from({ length: 20 }, () => ({ type: 'start_session' as const, session_name: `m-${created++}`, prompt: 'x' }));
    creating.push(client.createJobs(batch).then(() => undefined));
  }
  for (let i = 0; i < 100; i++) creating.push(start(client, `m-${created++}`).then(() => undefined));
  await Promise.all(creating);
  await Promise.all(loops);
  assert.equal(seen.size, JOBS);
  for (const [jobId, launcherId] of seen) {
    const job = await client.getJob(jobId);
    assert.equal(job.status, 'claimed');
    assert.equal(job.launcher_id, launcherId, 'held by the launcher it was handed to');
  }
  assert.equal((await client.health()).queue_depth, 0);
});

test('an undelivered answer with several jobs puts them all back, in their places', async (t) => {
  const { client, c } = await startTest(t);
  const created = await client.createJobs(
    Array.from({ length: 5 }, (_, i) => ({ type: 'start_session' as const, session_name: `undo-${i}`, prompt: 'x' })),
  );
  const l = await fakeLauncher(client);
  const answer = await c.core.poll(l.id, 3, new AbortController().signal);
  assert.deepEqual(ids(answer?.jobs), ids(created).slice(0, 3));
  await c.core.pollAnswerLost(l.id, answer!);
  for (const j of created) assert.equal((await client.getJob(j.job_id)).status, 'pending');
  const other = await fakeLauncher(client, 'other');
  assert.deepEqual(ids((await other.poll({ batch: true, capacity: 10 }))?.jobs), ids(created));
});

test('capacity is validated: an integer from 0 to 1000', async (t) => {
  const { client, c } = await startTest(t);
  const l = await fakeLauncher(client);
  for (const bad of ['-1', '1001', 'many']) {
    const res = await fetch(`${c.url}/launcher/jobs?launcher_id=${l.id}&capacity=${bad}`);
    assert.equal(res.status, 400, `capacity=${bad}`);
    const body = (await res.json()) as { error: { code: string; details: { field: string } } };
    assert.equal(body.error.code, 'validation_failed');
    assert.equal(body.error.details.field, 'capacity');
  }
});
