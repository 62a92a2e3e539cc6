import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fakeLauncher, rejectsWith, start, startTest, watching } from './helpers.js';

// Waits that must be woken by the state change use a hold far longer than the test's own
// timeout: if the wake-up were missing, the test would fail instead of passing late.
const LONG = 600_000;
// The test's own bound: well under the holds above (a missing wake-up fails, it does not pass late),
// and well over what a test takes on a loaded CI machine (with both cores busy, events.test's flood
// took 22 s of its 30; tests of a second took 5 to 10).
const opts = { timeout: 120_000 };

test('GET /jobs/{id}/wait parked before the completion is woken by it and returns the terminal job', opts, async (t) => {
  const { client, c } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'waited-on');
  await l.take();
  const isParked = watching(c.core, job.job_id);
  const waiting = client.waitJob(job.job_id, LONG);
  await isParked;
  await l.completed(job.job_id, 'finished');
  const got = await waiting;
  assert.equal(got.status, 'completed');
  assert.equal(got.terminal, true);
  assert.equal(got.result, 'finished');
});

test('GET /jobs/{id}/wait on a job already terminal answers at once', opts, async (t) => {
  const { client } = await startTest(t);
  const job = await start(client, 'gone');
  await client.stopJob(job.job_id);
  const got = await client.waitJob(job.job_id, LONG);
  assert.equal(got.status, 'stopped');
  assert.equal(got.terminal, true);
});

test('GET /jobs/{id}/wait returns the non-terminal snapshot when its timeout passes (not an error)', opts, async (t) => {
  const { client } = await startTest(t);
  const job = await start(client, 'slowpoke');
  const got = await client.waitJob(job.job_id, 50);
  assert.equal(got.job_id, job.job_id);
  assert.equal(got.status, 'pending');
  assert.equal(got.terminal, false);
  assert.equal((await client.waitJob(job.job_id, 0)).terminal, false);
});

test('GET /jobs/{id}/wait on an unknown job is 404', opts, async (t) => {
  const { client } = await startTest(t);
  await rejectsWith(client.waitJob('job_000000000000', 10), 404, 'job_not_found');
});

test('POST /jobs/wait (any, the default) returns when the first watched job ends, with snapshots of all', opts, async (t) => {
  const { client, c } = await startTest(t);
  const l = await fakeLauncher(client);
  const a = await start(client, 'any-a');
  const b = await start(client, 'any-b');
  await l.take();
  await l.take();
  const isParked = watching(c.core, b.job_id);
  const waiting = client.waitJobs({ job_ids: [a.job_id, b.job_id], timeout_ms: LONG });
  await isParked;
  await l.failed(b.job_id, 'broke');
  const got = await waiting;
  assert.equal(got.mode, 'any');
  assert.equal(got.done, true);
  assert.deepEqual(
    got.jobs.map((j) => [j.job_id, j.status, j.terminal]),
    [
      [a.job_id, 'claimed', false],
      [b.job_id, 'failed', true],
    ],
  );
  assert.deepEqual(got.not_found, []);
});

test('POST /jobs/wait mode all returns only when every watched job has ended', opts, async (t) => {
  const { client, c } = await startTest(t);
  const l = await fakeLauncher(client);
  const a = await start(client, 'all-a');
  const b = await start(client, 'all-b');
  await l.take();
  await l.take();
  const isParked = watching(c.core, a.job_id);
  let settled = false;
  const waiting = client.waitJobs({ job_ids: [a.job_id, b.job_id], timeout_ms: LONG, mode: 'all' }).finally(() => {
    settled = true;
  });
  await isParked;
  await l.completed(a.job_id);
  // a GET round trip after the first completion: had the wait returned, it would have by now
  await client.getJob(a.job_id);
  assert.equal(settled, false, 'one of two done is not all');
  await l.completed(b.job_id);
  const got = await waiting;
  assert.equal(got.mode, 'all');
  assert.equal(got.done, true);
  assert.deepEqual(
    got.jobs.map((j) => j.status),
    ['completed', 'completed'],
  );
});

test('POST /jobs/wait times out with done false and the current snapshots', opts, async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const a = await start(client, 'to-a');
  const b = await start(client, 'to-b');
  await l.take();
  await l.completed(a.job_id);
  const got = await client.waitJobs({ job_ids: [a.job_id, b.job_id], timeout_ms: 50, mode: 'all' });
  assert.equal(got.done, false);
  assert.deepEqual(
    got.jobs.map((j) => j.terminal),
    [true, false],
  );
});

test('POST /jobs/wait reports unknown ids in not_found without failing', opts, async (t) => {
  const { client, c } = await startTest(t);
  const l = await fakeLauncher(client);
  const a = await start(client, 'known');
  await l.take();
  const isParked = watching(c.core, a.job_id);
  const waiting = client.waitJobs({ job_ids: ['job_000000000000', a.job_id, a.job_id], timeout_ms: LONG });
  await isParked;
  await l.completed(a.job_id);
  const got = await waiting;
  assert.equal(got.done, true);
  assert.deepEqual(got.not_found, ['job_000000000000']);
  assert.deepEqual(
    got.jobs.map((j) => j.job_id),
    [a.job_id],
    'duplicates collapse',
  );

  const none = await client.waitJobs({ job_ids: ['job_000000000001'], timeout_ms: LONG });
  assert.equal(none.done, false, 'nothing to wait for: answered at once, not done');
  assert.deepEqual(none.jobs, []);
  assert.deepEqual(none.not_found, ['job_000000000001']);
});

test('POST /jobs/wait any over an ended and a running job waits for the running one', opts, async (t) => {
  const { client, c } = await startTest(t);
  const l = await fakeLauncher(client);
  const ended = await start(client, 'ended');
  const running = await start(client, 'running');
  await l.take();
  await l.take();
  await l.completed(ended.job_id);
  const isParked = watching(c.core, running.job_id);
  let settled = false;
  const waiting = client.waitJobs({ job_ids: [ended.job_id, running.job_id], timeout_ms: LONG }).finally(() => {
    settled = true;
  });
  await isParked;
  await client.getJob(running.job_id);
  assert.equal(settled, false, 'an already-ended job does not satisfy a new wait while others still run');
  await l.completed(running.job_id);
  const got = await waiting;
  assert.equal(got.done, true);
  assert.deepEqual(
    got.jobs.map((j) => j.status),
    ['completed', 'completed'],
  );

  // when every watched job has already ended, the answer is immediate
  const again = await client.waitJobs({ job_ids: [ended.job_id, running.job_id], timeout_ms: LONG });
  assert.equal(again.done, true);
});

test('POST /jobs/wait rejects an empty id list and an unknown mode (400)', opts, async (t) => {
  const { client } = await startTest(t);
  await rejectsWith(client.waitJobs({ job_ids: [] }), 400, 'validation_failed');
  await rejectsWith(client.waitJobs({ job_ids: ['job_000000000000'], mode: 'some' as never }), 400, 'validation_failed');
});

test('POST /jobs/wait with include_terminal: a job that ended before the request ends an any-wait at once', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const a = await start(client, 'ended-before');
  const b = await start(client, 'still-going');
  const ja = await l.take();
  await l.take();
  await l.completed(ja.job_id, 'done early');
  const res = await client.waitJobs({ job_ids: [a.job_id, b.job_id], timeout_ms: 60_000, include_terminal: true });
  assert.equal(res.done, true);
  assert.equal(res.jobs.find((j) => j.job_id === a.job_id)?.status, 'completed');
  assert.equal(res.jobs.find((j) => j.job_id === b.job_id)?.status, 'claimed');
});

test('POST /jobs/wait: an id no store can hold (a NUL in it) is not found, and hides none of the others', opts, async (t) => {
  const { client } = await startTest(t);
  const job = await start(client, 'nul-wait', 'p');
  const answer = await client.waitJobs({ job_ids: [job.job_id, 'bad\u0000id'], mode: 'any', timeout_ms: 0, include_terminal: true });
  assert.deepEqual(answer.not_found, ['bad\u0000id']);
  assert.deepEqual(
    answer.jobs.map((j) => j.job_id),
    [job.job_id],
  );
});

test('POST /jobs/wait: a job gone between its check and the answer (history retention) is not found, not omitted', opts, async (t) => {
  const { c, client } = await startTest(t);
  const kept = await start(client, 'kept', 'p');
  const gone = await start(client, 'gone', 'p');
  // the store as retention leaves it right after the wait's last check: the job is no longer there
  const store = c.core.store;
  const getJob = store.getJob.bind(store);
  store.getJob = async (id) => (id === gone.job_id ? undefined : getJob(id));
  t.after(() => (store.getJob = getJob));
  const answer = await client.waitJobs({ job_ids: [kept.job_id, gone.job_id], timeout_ms: 0 });
  assert.deepEqual(
    answer.jobs.map((j) => j.job_id),
    [kept.job_id],
  );
  assert.deepEqual(answer.not_found, [gone.job_id]);
  assert.deepEqual(answer.omitted, []);
});
