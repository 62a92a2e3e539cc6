import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CliExitCodes, JOB_STATUS_EXIT_CODES, JobStatuses, isTerminal, type Job, type JobStatus } from '@agentq/protocol';
import { waitExitCode } from '../src/index.js';

const job = (job_id: string, status: JobStatus): Job => ({ job_id, status, terminal: isTerminal(status) }) as Job;

describe('exit-code contract', () => {
  it('maps every job status, and only completed to 0', () => {
    for (const status of JobStatuses) {
      const code = JOB_STATUS_EXIT_CODES[status];
      if (!isTerminal(status)) assert.equal(code, CliExitCodes.running, `${status} is not terminal: 3`);
      else assert.notEqual(code, CliExitCodes.running, `${status} is terminal: not 3`);
      assert.equal(code === 0, status === 'completed', status);
    }
    assert.equal(JOB_STATUS_EXIT_CODES.failed, 4);
    assert.equal(JOB_STATUS_EXIT_CODES.interrupted, 4);
    assert.equal(JOB_STATUS_EXIT_CODES.stopped, 6);
    assert.equal(JOB_STATUS_EXIT_CODES.timed_out, 7);
  });

  it('has the documented numbers', () => {
    assert.deepEqual(
      { ...CliExitCodes },
      { ok: 0, internal_error: 1, usage_error: 2, running: 3, failed: 4, not_found: 5, stopped: 6, timed_out: 7 },
    );
  });
});

describe('waitExitCode', () => {
  it('is 3 when the wait ended before its condition', () => {
    assert.equal(waitExitCode(false, [job('a', 'running'), job('b', 'failed')]), 3);
  });

  it('is 0 when every finished job completed, ignoring jobs still running after an any-wait', () => {
    assert.equal(waitExitCode(true, [job('a', 'running'), job('b', 'completed')]), 0);
  });

  it('is the code of the first finished job, in argument order, that did not complete', () => {
    assert.equal(waitExitCode(true, [job('a', 'completed'), job('b', 'timed_out'), job('c', 'failed')]), 7);
    assert.equal(waitExitCode(true, [job('a', 'stopped'), job('b', 'failed')]), 6);
  });
});
