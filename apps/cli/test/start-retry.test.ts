import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { CliCommandData, CliEnvelope, type JobDescriptor } from '@agentq/protocol';
import { InterruptedError } from '../src/errors.js';
import { cli, coordinator, dropFirstAnswer, envelope } from './helpers.js';

/** A proxy that loses the answer to the first `POST /jobs`: the job exists, the CLI never hears. */
const dropFirstCreate = (t: TestContext, target: string) => dropFirstAnswer(t, target, 'POST', '/jobs');

describe('agentq start: a lost answer', () => {
  it('the create is sent again with the same Idempotency-Key: exit 0 and exactly one job', async (t) => {
    const c = await coordinator(t);
    const px = await dropFirstCreate(t, c.url);
    const r = await cli(px.url, ['start', 'dropped', '-p', 'only once', '--json']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const d = envelope<{ ok: true; data: JobDescriptor }>(r, CliEnvelope(CliCommandData.start)).data;
    assert.equal(px.keys.length, 2, 'sent twice');
    assert.equal(px.keys[0], px.keys[1], 'with the same key');
    const { jobs } = await c.client.listJobs();
    assert.deepEqual(
      jobs.map((j) => j.job_id),
      [d.job_id],
    );
    assert.equal(jobs[0]!.prompt, 'only once');
  });

  it('with --wait too: the job it waits for is the one that exists', async (t) => {
    const c = await coordinator(t);
    const px = await dropFirstCreate(t, c.url);
    const run = cli(px.url, ['start', 'dropped-wait', '-p', 'x', '--wait', '--json']);
    const job = await c.launcher.claimAndStart();
    await c.launcher.complete(job.job_id, 'finished');
    const r = await run;
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const d = envelope<{ ok: true; data: JobDescriptor }>(r, CliEnvelope(CliCommandData.start)).data;
    assert.equal(d.job_id, job.job_id);
    assert.equal(d.status, 'completed');
    assert.equal((await c.client.listJobs()).jobs.length, 1);
  });
});

describe('agentq start against a coordinator that asks it to wait (Retry-After)', () => {
  it('says on stderr why it is quiet before each wait, then reports the refusal', async (t) => {
    // a queue full of one prompt: every further create is refused with 503 queue_full, Retry-After: 1
    const c = await coordinator(t, { maxQueuedBytes: 10, overloadRetryAfterSeconds: 1 });
    await c.client.createJob({ type: 'start_session', session_name: 'first', prompt: 'ten bytes!' });
    const r = await cli(c.url, ['start', 'second', '-p', 'more']);
    assert.notEqual(r.code, 0);
    const notes = r.stderr.split('\n').filter((l) => l.startsWith('agentq: queue_full: trying again in 1 s'));
    assert.equal(notes.length, 2, r.stderr);
    assert.match(r.stderr, /queue holds 10 bytes/);
  });
});

describe('agentq start interrupted (Ctrl-C) while its create is on its way', () => {
  it('says the job may exist and where to look, since the coordinator may have made it', async (t) => {
    const c = await coordinator(t);
    const interrupt = new AbortController();
    let created!: () => void;
    const made = new Promise<void>((resolve) => (created = resolve));
    // the coordinator makes the job; the user presses Ctrl-C before its answer is read
    const original = c.core.createJob.bind(c.core);
    c.core.createJob = async (...args: Parameters<typeof original>) => {
      const out = await original(...args);
      created();
      interrupt.abort(new InterruptedError());
      return out;
    };
    const run = cli(c.url, ['start', 'maybe', '-p', 'hi'], { signal: interrupt.signal });
    await made;
    const r = await run;
    assert.equal(r.code, 1);
    assert.match(r.stderr, /interrupted before the coordinator answered: the job may have been created all the same \(agentq sessions maybe lists its jobs\)/);
    assert.equal((await c.client.getSession('maybe')).job_ids.length, 1, 'it was');
  });
});
