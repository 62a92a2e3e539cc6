import assert from 'node:assert/strict';
import { test } from 'node:test';
import { coordinator, launcher, script, settled } from './helpers.js';

test('every job a poll answer hands out runs, not only the first (capacity > 1, several jobs ready)', async (t) => {
  // a claim lease longer than the test: a job the launcher dropped would stay claimed, not come back
  const { c, client } = await coordinator(t, { claimLeaseSeconds: 3600 });
  const jobs = await Promise.all(
    ['one', 'two', 'three'].map((name) =>
      client.createJob({ type: 'start_session', session_name: name, prompt: script([{ event: { type: 'result', text: name } }]) }),
    ),
  );
  // the launcher's first poll (capacity 4) finds all three ready and is handed them in one answer
  await launcher(t, c.url, { maxJobs: 4 });
  for (const [i, job] of jobs.entries()) {
    const done = await settled(client, job.job_id);
    assert.equal(done.status, 'completed', `job ${i}: ${done.status}`);
    assert.equal(done.attempts, 1);
  }
});
