import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_BATCH_JOBS, type CreateJobRequest } from '@agentq/protocol';
import { fakeLauncher, parked, rejectsWith, start, startTest } from './helpers.js';

/* `POST /jobs/batch`: up to 1,000 `POST /jobs` bodies, created all or none, answered in order. */

const starts = (prefix: string, n: number): CreateJobRequest[] =>
  Array.from({ length: n }, (_, i) => ({ type: 'start_session', session_name: `${prefix}-${i}`, prompt: `do ${i}` }));

test('a batch creates every job, answers them in order (201), and queues them in that order', async (t) => {
  const { client, c } = await startTest(t);
  const res = await fetch(`${c.url}/jobs/batch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      jobs: [
        ...starts('b', 3),
        // a resume of a session started earlier in the same batch waits behind its start
        { type: 'resume_session', session_name: 'b-0', prompt: 'and then' },
      ],
    }),
  });
  assert.equal(res.status, 201);
  const { jobs } = (await res.json()) as { jobs: { job_id: string; session_name: string; status: string; type: string }[] };
  assert.deepEqual(
    jobs.map((j) => [j.session_name, j.type, j.status]),
    [
      ['b-0', 'start_session', 'pending'],
      ['b-1', 'start_session', 'pending'],
      ['b-2', 'start_session', 'pending'],
      ['b-0', 'resume_session', 'pending'],
    ],
  );
  const l = await fakeLauncher(client);
  const answer = await l.poll({ batch: true, capacity: 10 });
  assert.deepEqual(
    answer?.jobs?.map((j) => j.job_id),
    jobs.slice(0, 3).map((j) => j.job_id),
    'FIFO; the resume waits for its session',
  );
  assert.deepEqual((await client.getSession('b-0')).job_ids, [jobs[0]!.job_id, jobs[3]!.job_id]);
});

test('a batch wakes parked launchers', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const l = await fakeLauncher(client);
  const isParked = parked(c.core, l.id);
  const poll = l.poll({ batch: true, capacity: 2 });
  await isParked;
  const created = await client.createJobs(starts('wake', 3));
  const answer = await poll;
  assert.deepEqual(answer?.jobs?.map((j) => j.job_id), [created[0]!.job_id, created[1]!.job_id]);
  // the batch answers what each job became, as POST /jobs does: two taken, one still waiting
  assert.deepEqual(
    created.map((j) => [j.status, j.launcher_id]),
    [['claimed', l.id], ['claimed', l.id], ['pending', null]],
  );
});

test('validation first: one bad body refuses the batch with 400 naming jobs[i], and nothing is created', async (t) => {
  const { client } = await startTest(t);
  const bad = async (jobs: unknown[], field: string) => {
    const d = await rejectsWith(client.createJobs(jobs as CreateJobRequest[]), 400, 'validation_failed');
    assert.equal(d.field, field);
  };
  await bad([...starts('v', 2), { type: 'start_session', session_name: 'v-x' }], 'jobs[2].prompt');
  await bad([{ type: 'launch', session_name: 'v-y', prompt: 'p' }], 'jobs[0].type');
  await bad([...starts('w', 1), { type: 'start_session', session_name: 'w-z', prompt: 'p', extra: 1 }], 'jobs[1].extra');
  assert.deepEqual((await client.listJobs()).jobs, []);
  assert.deepEqual((await client.listSessions()).sessions, []);
});

test('all or none: a job refused by the core (404, 409, 400) refuses the batch, names its index, and nothing is created', async (t) => {
  const { client } = await startTest(t, { maxPromptBytes: 4096 });
  await start(client, 'exists');
  const before = (await client.listJobs()).jobs.length;

  let d = await rejectsWith(
    client.createJobs([...starts('n', 3), { type: 'resume_session', session_name: 'nowhere', prompt: 'p' }]),
    404,
    'session_not_found',
  );
  assert.equal(d.index, 3);
  assert.equal(d.field, 'jobs[3]');

  d = await rejectsWith(client.createJobs([...starts('d', 1), { type: 'start_session', session_name: 'exists', prompt: 'p' }]), 409, 'session_exists');
  assert.equal(d.index, 1);

  // the same new session twice in one batch: the second start is refused
  d = await rejectsWith(client.createJobs([...starts('twice', 1), ...starts('twice', 1)]), 409, 'session_exists');
  assert.equal(d.index, 1);

  d = await rejectsWith(
    client.createJobs([...starts('big', 1), { type: 'start_session', session_name: 'big-x', prompt: 'x'.repeat(4097) }]),
    400,
    'validation_failed',
  );
  assert.equal(d.field, 'jobs[1].prompt');

  assert.equal((await client.listJobs()).jobs.length, before);
  assert.deepEqual(
    (await client.listSessions()).sessions.map((s) => s.session_name),
    ['exists'],
  );
});

test(`limits: at least one job, at most ${MAX_BATCH_JOBS}`, async (t) => {
  const { client } = await startTest(t);
  let d = await rejectsWith(client.createJobs([]), 400, 'validation_failed');
  assert.equal(d.field, 'jobs');
  d = await rejectsWith(client.createJobs(starts('over', MAX_BATCH_JOBS + 1)), 400, 'validation_failed');
  assert.equal(d.field, 'jobs');
  const created = await client.createJobs(starts('max', MAX_BATCH_JOBS));
  assert.equal(created.length, MAX_BATCH_JOBS);
  assert.equal(new Set(created.map((j) => j.job_id)).size, MAX_BATCH_JOBS);
  assert.equal((await client.health()).queue_depth, MAX_BATCH_JOBS);
});
