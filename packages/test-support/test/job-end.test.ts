import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobEnd } from '../src/index.js';

test("a job's end is waited for through as many waits as it takes, each of 30 s, saying on stderr what it waits for", async (t) => {
  const said: string[] = [];
  const write = process.stderr.write;
  process.stderr.write = ((text: string) => said.push(text) > 0) as typeof process.stderr.write;
  t.after(() => void (process.stderr.write = write));
  const asked: number[] = [];
  const answers = [
    { terminal: false, status: 'running' },
    { terminal: false, status: 'running' },
    { terminal: true, status: 'completed' },
  ];
  const client = {
    waitJob: async (jobId: string, timeoutMs: number) => {
      assert.equal(jobId, 'job_1');
      asked.push(timeoutMs);
      return answers.shift()!;
    },
  };
  assert.deepEqual(await jobEnd(client, 'job_1'), { terminal: true, status: 'completed' });
  assert.deepEqual(asked, [30_000, 30_000, 30_000]);
  assert.deepEqual(said, ['still waiting for job job_1 to end: running after 30 s\n', 'still waiting for job job_1 to end: running after 60 s\n']);
});
