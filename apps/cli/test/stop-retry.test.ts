import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CliCommandData, CliEnvelope, type CancelResults, type StopSessionResponse } from '@agentq/protocol';
import { cli, coordinator, dropFirstAnswer, envelope } from './helpers.js';

/*
 * A stop whose answer is lost after the coordinator made it (the connection broke on the way
 * back): the CLI sends it again with the same Idempotency-Key, and is answered the first stop
 * (`replayed`), which stops nothing more.
 */

describe('agentq stops: a lost answer', () => {
  it('session stop: sent again with the same key, exit 0 with the first answer (replayed), nothing stopped twice', async (t) => {
    const c = await coordinator(t);
    const active = await c.client.createJob({ type: 'start_session', session_name: 's', prompt: 'x' });
    await c.launcher.claimAndStart();
    const queued = await c.client.createJob({ type: 'resume_session', session_name: 's', prompt: 'y' });
    const px = await dropFirstAnswer(t, c.url, 'POST', '/sessions/s/stop');
    const r = await cli(px.url, ['session', 'stop', 's', '--json']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const d = envelope<{ ok: true; data: StopSessionResponse }>(r, CliEnvelope(CliCommandData.session_stop)).data;
    assert.equal(px.keys.length, 2, 'sent twice');
    assert.equal(px.keys[0], px.keys[1], 'with the same key');
    assert.deepEqual(d, {
      session_name: 's',
      stopped: [
        { job_id: queued.job_id, outcome: 'stopped', status: 'stopped', session_name: 's' },
        { job_id: active.job_id, outcome: 'stopping', status: 'stopping', session_name: 's' },
      ],
      replayed: true,
    });
  });

  it('cancel: sent again with the same key, the job reads cancelled (its first outcome), not already_completed', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'p', prompt: 'x' });
    const px = await dropFirstAnswer(t, c.url, 'POST', `/jobs/${job.job_id}/stop`);
    const r = await cli(px.url, ['cancel', job.job_id, '--json']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const d = envelope<{ ok: true; data: CancelResults }>(r, CliEnvelope(CliCommandData.cancel)).data;
    assert.deepEqual(d.results, [{ job_id: job.job_id, outcome: 'cancelled', status: 'stopped' }]);
    assert.deepEqual([px.keys.length, px.keys[0] === px.keys[1]], [2, true]);
  });
});
