import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { CliExitCodes, JOB_STATUS_EXIT_CODES, JobStatuses, exitCodeForStatus, isTerminal, type Job, type JobStatus } from '@agentq/protocol';
import { waitExitCode } from '../src/index.js';
import { cli, coordinator, testGateway } from './helpers.js';

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

describe('a job status this CLI does not know (a newer coordinator added it)', () => {
  // A gateway in front of a real coordinator answers the job with a status of a later version:
  // the statuses are extended, never renamed, so an older CLI must still keep its contract.
  async function renamedStatus(t: TestContext, status: string, terminal: boolean, waitFor: 'pending' | 'completed') {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: `newer-${status}`, prompt: 'p' });
    if (waitFor === 'completed') {
      await c.launcher.claim();
      await c.launcher.complete(job.job_id);
    }
    const url = await testGateway(t, c.url, (_req, res, forward) =>
      forward((answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () => {
          // every snapshot of the job, wherever it is in the answer (`GET /jobs/{id}`, a wait's `jobs`)
          const rewritten = JSON.stringify(JSON.parse(Buffer.concat(chunks).toString('utf8')), (_key, value: unknown) =>
            value !== null && typeof value === 'object' && (value as { job_id?: unknown }).job_id === job.job_id && 'status' in value
              ? { ...value, status, terminal }
              : value,
          );
          res.writeHead(answer.statusCode ?? 502, { 'content-type': 'application/json' });
          res.end(rewritten);
        });
        return true;
      }),
    );
    return { url, jobId: job.job_id };
  }

  it('`status` of such a job that is not terminal exits 3, never 0', async (t) => {
    const { url, jobId } = await renamedStatus(t, 'paused', false, 'pending');
    const r = await cli(url, ['status', jobId]);
    assert.equal(r.code, CliExitCodes.running, r.stdout + r.stderr);
    assert.match(r.stdout, /exit code {2}3 \(/);
  });

  it('`status` of such a job that is terminal exits 4 (it did not complete), never 0', async (t) => {
    const { url, jobId } = await renamedStatus(t, 'cancelled_by_policy', true, 'completed');
    const r = await cli(url, ['status', jobId, '--json']);
    assert.equal(r.code, CliExitCodes.failed, r.stdout + r.stderr);
    assert.equal((JSON.parse(r.stdout) as { data: { exit_code: number } }).data.exit_code, CliExitCodes.failed);
  });

  it('`wait` for such a job that is terminal exits 4', async (t) => {
    const { url, jobId } = await renamedStatus(t, 'cancelled_by_policy', true, 'completed');
    const r = await cli(url, ['wait', jobId, '--timeout', '10s']);
    assert.equal(r.code, CliExitCodes.failed, r.stdout + r.stderr);
  });

  it('a status named like an Object.prototype member is not looked up on the prototype', () => {
    assert.equal(exitCodeForStatus('toString' as JobStatus, false), CliExitCodes.running);
    assert.equal(exitCodeForStatus('constructor' as JobStatus, true), CliExitCodes.failed);
  });
});
