import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CliCommandData, CliEnvelope, type CancelResults } from '@agentq/protocol';
import { cli, coordinator, envelope } from './helpers.js';

const CancelSchema = CliEnvelope(CliCommandData.cancel);
const results = (r: { stdout: string; stderr: string; code: number }) =>
  envelope<{ ok: true; data: CancelResults }>(r, CancelSchema).data.results;

describe('agentq cancel', () => {
  it('cancels a pending job at once', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const r = await cli(c.url, ['cancel', job.job_id, '--json']);
    assert.equal(r.code, 0);
    assert.deepEqual(results(r), [{ job_id: job.job_id, outcome: 'cancelled', status: 'stopped' }]);
  });

  it('a running job is stopping until its launcher reports it stopped', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    await c.launcher.claimAndStart();
    const r = await cli(c.url, ['cancel', job.job_id, '--json']);
    assert.equal(r.code, 0);
    assert.deepEqual(results(r), [{ job_id: job.job_id, outcome: 'stopping', status: 'stopping' }]);

    assert.equal((await cli(c.url, ['status', job.job_id])).code, 3, 'stopping is not terminal');
    await c.launcher.stopped(job.job_id);
    assert.equal((await cli(c.url, ['status', job.job_id])).code, 6);
  });

  it('reports already_completed and not_found per id; exit 5 when any id is unknown', async (t) => {
    const c = await coordinator(t);
    const done = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const pending = await c.client.createJob({ type: 'start_session', session_name: 'b', prompt: 'x' });
    await c.launcher.claimAndStart();
    await c.launcher.complete(done.job_id);

    const r = await cli(c.url, ['cancel', done.job_id, 'job_0123456789ab', pending.job_id, '--json']);
    assert.equal(r.code, 5);
    assert.deepEqual(results(r), [
      { job_id: done.job_id, outcome: 'already_completed', status: 'completed' },
      { job_id: 'job_0123456789ab', outcome: 'not_found', status: null },
      { job_id: pending.job_id, outcome: 'cancelled', status: 'stopped' },
    ]);
  });

  it('prints one line per id as text', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const r = await cli(c.url, ['cancel', job.job_id, 'nope']);
    assert.equal(r.code, 5);
    assert.match(r.stdout, /^JOB +OUTCOME +STATUS\n/);
    assert.match(r.stdout, new RegExp(`${job.job_id}  cancelled +stopped`));
    assert.match(r.stdout, /nope +not_found +-/);
  });
});
