import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { AgentqClient, AgentqConnectionError } from '@agentq/client';
import {
  CliCommandData,
  CliEnvelope,
  CliFailure,
  type CliFailure as Failure,
  type CliWaitResult,
  type JobDescriptor,
  type JobOutput,
} from '@agentq/protocol';
import { Reconnecting } from '../src/reconnect.js';
import { cli, coordinator, deadUrl, envelope, testGateway, whenCalled } from './helpers.js';

/*
 * A coordinator that restarts while the CLI waits on it: the wait goes on once it is back
 * (docs/cli.md, "A coordinator restart"). Each test parks the CLI's long-poll, restarts the
 * coordinator (the parked call is answered early, then the port is down until the CLI has tried
 * it), and ends the job on the restarted coordinator.
 */

describe('a coordinator restart during a wait', () => {
  it('agentq wait goes on and exits with the outcome of the job', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const parked = whenCalled(c.core, 'waitJobs', (_ids: string[], timeoutMs: number) => timeoutMs > 0);
    const waiting = cli(c.url, ['wait', job.job_id, '--timeout', '2m', '--json']);
    await parked;
    await c.restart();
    await c.client.stopJob(job.job_id);
    const r = await waiting;
    assert.equal(r.code, 6, r.stdout + r.stderr);
    const data = envelope<{ ok: true; data: CliWaitResult }>(r, CliEnvelope(CliCommandData.wait)).data;
    assert.equal(data.done, true);
    assert.equal(data.jobs[0]?.status, 'stopped');
  });

  it('agentq start --wait goes on and exits with the outcome of the job', async (t) => {
    const c = await coordinator(t);
    const parked = whenCalled(c.core, 'waitJob', (_id: string, timeoutMs: number) => timeoutMs > 0);
    const starting = cli(c.url, ['start', 'a', '-p', 'x', '--wait', '--json']);
    await parked;
    await c.restart();
    const job = await c.launcher.claimAndStart();
    await c.launcher.complete(job.job_id, 'after the restart');
    const r = await starting;
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const d = envelope<{ ok: true; data: JobDescriptor }>(r, CliEnvelope(CliCommandData.start)).data;
    assert.equal(d.result, 'after the restart');
  });

  it('agentq output --follow goes on from where it was, and prints every byte once', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    await c.launcher.claimAndStart();
    await c.launcher.output(job.job_id, 0, 'before\n');
    const parked = whenCalled(c.core, 'readOutput', (_id: string, q: { wait_ms?: number }) => (q.wait_ms ?? 0) > 0);
    const following = cli(c.url, ['output', job.job_id, '--follow', '--json']);
    await parked;
    await c.restart();
    await c.launcher.output(job.job_id, 7, 'after\n');
    await c.launcher.complete(job.job_id);
    const r = await following;
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const data = envelope<{ ok: true; data: JobOutput }>(r, CliEnvelope(CliCommandData.output)).data;
    assert.equal(data.output, 'before\nafter\n');
  });

  it('agentq wait: a job gone across the restart (memory store) is not found (exit 5), not still running', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const parked = whenCalled(c.core, 'waitJobs', (_ids: string[], timeoutMs: number) => timeoutMs > 0);
    const waiting = cli(c.url, ['wait', job.job_id, '--timeout', '2m', '--json']);
    await parked;
    await c.restart({ forget: true });
    const r = await waiting;
    assert.equal(r.code, 5, r.stdout + r.stderr);
    const failure = envelope<Failure>(r, CliFailure);
    assert.equal(failure.error.code, 'job_not_found');
    assert.deepEqual(failure.error.details, { job_ids: [job.job_id] });
  });

  it('agentq wait --all: a job gone across the restart is named with the unknown ids, in argument order', async (t) => {
    const c = await coordinator(t);
    const gone = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const parked = whenCalled(c.core, 'waitJobs', (_ids: string[], timeoutMs: number) => timeoutMs > 0);
    const waiting = cli(c.url, ['wait', gone.job_id, 'job_0123456789ab', '--all', '--timeout', '2m', '--json']);
    await parked;
    await c.restart({ forget: true });
    const r = await waiting;
    assert.equal(r.code, 5, r.stdout + r.stderr);
    assert.deepEqual(envelope<Failure>(r, CliFailure).error.details, { job_ids: [gone.job_id, 'job_0123456789ab'] });
  });

  it('a coordinator that is not back by the deadline: exit 1, coordinator_unreachable', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const parked = whenCalled(c.core, 'waitJobs', (_ids: string[], timeoutMs: number) => timeoutMs > 0);
    const waiting = cli(c.url, ['wait', job.job_id, '--timeout', '1s', '--json']);
    await parked;
    await c.stop();
    const r = await waiting;
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.equal(envelope<Failure>(r, CliFailure).error.code, 'coordinator_unreachable');
  });

  it('a coordinator that never answered is reported at once, not waited for', async () => {
    const r = await cli(await deadUrl(), ['wait', 'job_0123456789ab', '--timeout', 'none', '--json']);
    assert.equal(r.code, 1);
    assert.equal(envelope<Failure>(r, CliFailure).error.code, 'coordinator_unreachable');
  });
});

/**
 * A gateway in front of the coordinator that answers every long-poll of a wait but the first
 * snapshot (`POST /jobs/wait`) as the coordinator does when overloaded: 503 `overloaded` with a
 * Retry-After of `retryAfterSeconds`. `refused`: the requests it refused.
 */
async function overloadedWaits(t: TestContext, target: string, retryAfterSeconds: number): Promise<{ url: string; refused: string[] }> {
  const refused: string[] = [];
  let snapshots = 0;
  const url = await testGateway(t, target, (req, res, forward) => {
    const wait = req.url?.startsWith('/jobs/wait') === true || /^\/jobs\/[^/]+\/wait/.test(req.url ?? '');
    if (wait && !(req.method === 'POST' && snapshots++ === 0)) {
      refused.push(`${req.method} ${req.url}`);
      req.resume();
      const body = { error: { code: 'overloaded', message: `the coordinator is overloaded (eventLoopDelay); retry after ${retryAfterSeconds} s` } };
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': String(retryAfterSeconds) }).end(JSON.stringify(body));
      return;
    }
    forward();
  });
  return { url, refused };
}

describe('a wait refused for now past its deadline', () => {
  for (const argv of [
    ['wait', 'JOB', '--timeout', '1s'],
    ['start', 'b', '-p', 'x', '--wait', '--wait-timeout', '1s'],
  ]) {
    it(`agentq ${argv.join(' ')}: a Retry-After past the timeout ends it at once (exit 1, the refusal), not after the client waited it out`, async (t) => {
      const c = await coordinator(t);
      const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
      const gw = await overloadedWaits(t, c.url, 3);
      const r = await cli(gw.url, [...argv.map((a) => (a === 'JOB' ? job.job_id : a)), '--json']);
      assert.equal(r.code, 1, r.stdout + r.stderr);
      const failure = envelope<Failure>(r, CliFailure);
      assert.equal(failure.error.code, 'overloaded');
      assert.match(failure.error.message, /retry after 3 s/);
      // refused once: the client did not wait the 3 s out (twice) past the 1 s the wait had
      assert.equal(gw.refused.length, 1, gw.refused.join('\n'));
    });
  }
});

describe('start --wait / resume --wait: a wait that fails after the job was created names the job', () => {
  it('a coordinator that is not back by the deadline: exit 1, coordinator_unreachable, with the job (last seen) and how to follow it', async (t) => {
    const c = await coordinator(t);
    let waitedOn: string | undefined;
    const parked = whenCalled(c.core, 'waitJob', (id: string, timeoutMs: number) => {
      waitedOn = id;
      return timeoutMs > 0;
    });
    const starting = cli(c.url, ['start', 'a', '-p', 'x', '--wait', '--wait-timeout', '1s', '--json']);
    await parked;
    await c.stop();
    const r = await starting;
    assert.equal(r.code, 1, r.stdout + r.stderr);
    const failure = envelope<Failure>(r, CliFailure);
    assert.equal(failure.error.code, 'coordinator_unreachable');
    assert.equal(failure.error.job?.job_id, waitedOn);
    assert.equal(failure.error.job?.session_name, 'a');
    assert.equal(failure.error.job?.status, 'pending');
    assert.equal(failure.error.job?.wait_command, `agentq wait ${waitedOn} --json`);
  });

  for (const flag of ['--wait', '--follow']) {
    it(`resume ${flag} refused for now during the wait (--json): the refusal (exit 1) and the new job, not the one before it`, async (t) => {
      const c = await coordinator(t);
      const first = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
      const gw = await overloadedWaits(t, c.url, 3);
      const r = await cli(gw.url, ['resume', 'a', '-p', 'y', flag, '--wait-timeout', '1s', '--json']);
      assert.equal(r.code, 1, r.stdout + r.stderr);
      const failure = envelope<Failure>(r, CliFailure);
      assert.equal(failure.error.code, 'overloaded');
      const { jobs } = await c.client.listJobs({ session_name: 'a' });
      const resumed = jobs.find((j) => j.job_id !== first.job_id);
      assert.ok(resumed, 'the resume job was created');
      assert.equal(failure.error.job?.job_id, resumed.job_id);
      assert.equal(failure.error.job?.type, 'resume_session');
      assert.equal(failure.error.job?.session_name, 'a');
      assert.equal(failure.error.job?.status, resumed.status);
    });
  }

  it('resume --wait refused for now during the wait (text): stderr names the job and says to wait on it', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const gw = await overloadedWaits(t, c.url, 3);
    const r = await cli(undefined, ['resume', 'a', '-p', 'y', '--wait', '--wait-timeout', '1s', '--url', gw.url]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.equal(r.stdout, '');
    const { jobs } = await c.client.listJobs({ session_name: 'a' });
    const resumed = jobs.find((j) => j.type === 'resume_session');
    assert.ok(resumed, 'the resume job was created');
    assert.match(r.stderr, /retry after 3 s \(overloaded\)/);
    assert.ok(
      r.stderr.includes(`the job was created all the same: ${resumed.job_id} (session a), last seen ${resumed.status}; follow it with: agentq wait ${resumed.job_id} --url ${gw.url}, not by running the command again`),
      r.stderr,
    );
  });
});

describe('Reconnecting', () => {
  it('without a deadline, gives up once no coordinator answered for the outage limit', async (t) => {
    const client = new AgentqClient({ url: await deadUrl() });
    t.after(() => client.close());
    let attempts = 0;
    const reconnect = new Reconnecting({ deadline: Infinity, now: Date.now, reached: true, outageLimitMs: 300 });
    await assert.rejects(
      reconnect.call(() => {
        attempts++;
        return client.health();
      }),
      AgentqConnectionError,
    );
    assert.ok(attempts > 1, `tried ${attempts} time(s)`);
  });
});
