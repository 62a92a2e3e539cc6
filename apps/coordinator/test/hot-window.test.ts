import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { fakeLauncher, start, startTest, tempDir } from './helpers.js';

/*
 * The SQLite store keeps only a window of finished jobs in memory (JOB_CACHE_SIZE): the rest is
 * read from the file when asked for, and what is read back leaves memory again with the window.
 */

test('finished jobs read back from the file leave memory again with the hot window', async (t) => {
  const dir = tempDir(t, 'agentq-hot-window-');
  const { client, c } = await startTest(t, { databaseUrl: `sqlite:${join(dir, 'agentq.db')}`, hotJobs: 2, sweepIntervalMs: 600_000 });
  // the store's memory, looked at from outside (a test's privilege)
  const held = () => (c.core.store as unknown as { state: { jobs: Map<string, unknown> } }).state.jobs.size;
  const l = await fakeLauncher(client);
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) {
    const job = await start(client, `hot-${i}`);
    await l.take();
    await l.started(job.job_id);
    await l.completed(job.job_id, `result ${i}`);
    ids.push(job.job_id);
  }
  await c.core.sweep();
  assert.equal(held(), 2, 'the window: the two newest finished jobs');

  // reading the older ones brings them back from the file...
  for (const [i, id] of ids.entries()) assert.equal((await client.getJob(id)).result, `result ${i}`);
  assert.equal(held(), 6);
  // ...and the next sweep lets them go again
  await c.core.sweep();
  assert.equal(held(), 2);
});
