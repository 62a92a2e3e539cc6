import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { AgentqApiError, AgentqClient } from '@agentq/client';
import type { SyncRequest, SyncResponse, SyncResult } from '@agentq/protocol';
import { Connectivity } from '../src/connectivity.js';
import type { Registration } from '../src/registration.js';
import { Reporter } from '../src/reporter.js';
import { SyncChannel } from '../src/sync-channel.js';
import { captureLog, controlServer, coordinator, launcher, script, settled } from './helpers.js';
import { proxy } from './proxy.js';

/*
 * The launcher's report-and-poll: polls and reports travel on POST /launcher/sync, several jobs'
 * reports in one request, and polls ask for every free slot.
 */

const syncBodies = (px: Awaited<ReturnType<typeof proxy>>) =>
  px.requests.filter((r) => !r.virtual && r.method === 'POST' && r.url === '/launcher/sync').map((r) => r.body as SyncRequest);

test('the launcher polls and reports only through POST /launcher/sync: batched claims, batched reports', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const px = await proxy(t, c.url);
  // four jobs queued before the launcher comes: its first poll asks for its four slots
  const jobs = await client.createJobs(
    Array.from({ length: 4 }, (_, i) => ({
      type: 'start_session' as const,
      session_name: `batched-${i}`,
      prompt: script([{ hello: true }, { await: true }, { say: `out ${i}` }, { event: { type: 'result', text: `r${i}` } }], control),
    })),
  );
  await launcher(t, px.url, { maxJobs: 4 });
  const hellos = await Promise.all(jobs.map(() => control.next()));
  for (const h of hellos) h.release();
  for (const [i, job] of jobs.entries()) {
    const done = await settled(client, job.job_id);
    assert.equal(done.status, 'completed');
    assert.equal(done.result, `r${i}`);
    assert.equal((await client.getOutput(job.job_id, { offset: 0 })).output, `out ${i}\n`);
  }

  // nothing went to the single endpoints
  const single = px.requests.filter((r) => !r.virtual && r.url.startsWith('/launcher/jobs'));
  assert.deepEqual(single, []);
  const bodies = syncBodies(px);
  assert.ok(bodies.length > 0);
  // the first poll asked for the four free slots and got the four jobs at once
  assert.equal(bodies[0]!.capacity, 4);
  // the four `started` reports (queued as the four jobs arrived together) went in one request
  const withStarted = bodies.filter((b) => b.reports.some((r) => r.kind === 'started'));
  assert.equal(withStarted.length, 1, JSON.stringify(withStarted));
  assert.deepEqual(
    withStarted[0]!.reports.filter((r) => r.kind === 'started').map((r) => r.job_id).sort(),
    jobs.map((j) => j.job_id).sort(),
  );
  // no request ever asked for more than the free slots
  assert.ok(bodies.every((b) => b.capacity >= 0 && b.capacity <= 4));
});

test('reports keep their order per job and each report is answered as its single endpoint would', async (t) => {
  const { c, client } = await coordinator(t);
  const reg = await client.register({ hostname: 'channel', max_jobs: 2 });
  const other = await client.register({ hostname: 'other' });
  const [mine, theirs] = await client.createJobs([
    { type: 'start_session', session_name: 'mine', prompt: 'x' },
    { type: 'start_session', session_name: 'theirs', prompt: 'x' },
  ]);
  await client.poll(reg.launcher_id, { capacity: 1 });
  await client.poll(other.launcher_id, { capacity: 1 });

  const px = await proxy(t, c.url);
  const viaProxy = new AgentqClient({ url: px.url });
  t.after(() => viaProxy.close());
  const answers: SyncResponse[] = [];
  const channel = new SyncChannel({ client: viaProxy, onAnswer: (res) => answers.push(res) });
  const signal = new AbortController().signal;
  const id = reg.launcher_id;
  // queued in the same tick: they go in one request
  const results = await Promise.allSettled([
    channel.deliver(mine!.job_id, { kind: 'started', body: {} }, id, signal),
    channel.deliver(theirs!.job_id, { kind: 'started', body: {} }, id, signal),
    channel.deliver('job_ffffffffffff', { kind: 'completed', body: {} }, id, signal),
  ]);
  assert.equal(syncBodies(px).length, 1);
  assert.equal(results[0]!.status, 'fulfilled');
  const refused = (i: number) => (results[i] as PromiseRejectedResult).reason as AgentqApiError;
  assert.ok(refused(1) instanceof AgentqApiError);
  assert.equal(refused(1).status, 409);
  assert.equal(refused(1).code, 'job_owned_by_other_launcher');
  assert.equal(refused(2).status, 404);
  assert.equal(refused(2).code, 'job_not_found');
  assert.equal((await client.getJob(mine!.job_id)).status, 'running');

  // a stop request for the launcher comes with the answer to the channel's own sync
  await client.stopJob(mine!.job_id);
  await channel.deliver(mine!.job_id, { kind: 'output', body: { offset: 0, data: 'bye\n' } }, id, signal);
  assert.deepEqual(answers.at(-1)?.stop_jobs, [mine!.job_id]);
});

test('a stop request reaches a launcher whose poll is parked with every slot taken', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  await launcher(t, c.url, { maxJobs: 1, killGraceMs: 300 });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'stop-me',
    prompt: script([{ hello: true }, { await: true }], control),
  });
  await control.next();
  await client.stopJob(job.job_id);
  assert.equal((await settled(client, job.job_id)).status, 'stopped');
});

test('a launcher deregistered while reports are in flight stops polling and does not register again', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const log = pino({ level: 'silent' });
  const { launcher: l, id } = await launcher(t, c.url, {}, { log });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'last',
    prompt: script([{ hello: true }, { await: true }, { event: { type: 'result', text: 'done' } }], control),
  });
  const hello = await control.next();
  await client.deleteLauncher(id);
  hello.release();
  assert.equal((await settled(client, job.job_id)).status, 'completed');
  assert.equal(await l.run(), 'deregistered');
  assert.equal(l.launcherId, id, 'no new registration');
  assert.equal((await client.listLaunchers()).launchers.length, 0);
});

test('a stop request reaches a deregistered launcher that lets its jobs finish, on the answer to its next report (not at its next heartbeat)', { timeout: 30_000 }, async (t) => {
  // heartbeats far apart: only a report's answer can bring the stop in time
  const { c, client } = await coordinator(t, { heartbeatIntervalSeconds: 3600, heartbeatTimeoutSeconds: 7200 });
  const control = await controlServer(t);
  const capture = captureLog();
  const { launcher: l, id } = await launcher(t, c.url, { killGraceMs: 300 }, { log: capture.log });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'drained',
    prompt: script([{ hello: true }, { await: true }, { say: 'still working' }, { await: true }], control),
  });
  const hello = await control.next();
  await client.deleteLauncher(id);
  await capture.waitFor((line) => line['msg'] === 'deregistered by the coordinator');
  assert.equal((await client.stopJob(job.job_id)).status, 'stopping');
  hello.release(); // it prints: the output report's answer carries the stop
  assert.equal((await settled(client, job.job_id)).status, 'stopped');
  assert.equal(await l.run(), 'deregistered');
});

test("a report the coordinator answers internal_error waits its own backoff: it is not sent again each time another request succeeds", async (t) => {
  const { c, client } = await coordinator(t);
  const reg = await client.register({ hostname: 'busy', max_jobs: 2 });
  const [failing, busy] = await client.createJobs([
    { type: 'start_session', session_name: 'failing', prompt: 'x' },
    { type: 'start_session', session_name: 'busy', prompt: 'x' },
  ]);
  const claimed = await client.poll(reg.launcher_id, { capacity: 2, batch: true });
  assert.equal(claimed?.jobs?.length, 2);
  // the coordinator fails the one job's reports (a result of internal_error, as a report that
  // failed alone in a sync gets) until the test says otherwise
  let broken = true;
  const px = await proxy(t, c.url, undefined, (req) =>
    req.url === '/launcher/sync'
      ? (body) => {
          const res = body as SyncResponse;
          const fail = (r: SyncResult): SyncResult =>
            broken && r.job_id === failing!.job_id ? { ...r, ok: false, error: { code: 'internal_error', message: 'internal error (test)' } } : r;
          return { ...res, results: res.results.map(fail) };
        }
      : undefined,
  );
  const viaProxy = new AgentqClient({ url: px.url });
  t.after(() => viaProxy.close());
  const channel = new SyncChannel({ client: viaProxy });
  const { log, waitFor } = captureLog();
  const hour = 3_600_000;
  const reporter = new Reporter({
    client: viaProxy,
    transport: (jobId, report, launcherId, signal) => channel.deliver(jobId, report, launcherId, signal),
    registration: { id: reg.launcher_id } as Registration,
    connectivity: new Connectivity(log),
    log,
    signal: new AbortController().signal,
    // the first retry an hour away (at least half of it): only the test's clock brings it sooner
    retry: { baseMs: hour, maxMs: hour },
  });
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const tries = () => px.count((url) => url === `/launcher/jobs/${failing!.job_id}/started`);

  const outcome = reporter.send(failing!.job_id, { kind: 'started', body: {} });
  await waitFor((line) => line['job_id'] === failing!.job_id && line['msg'] === 'coordinator failed the report; retrying it after a backoff');
  assert.equal(tries(), 1);
  // meanwhile the other job's reports succeed, one after the other
  assert.deepEqual(await reporter.send(busy!.job_id, { kind: 'started', body: {} }), { ok: true });
  for (let i = 0; i < 20; i++) {
    assert.deepEqual(await reporter.send(busy!.job_id, { kind: 'output', body: { offset: i * 5, data: `${i % 10}...\n` } }), { ok: true });
  }
  assert.equal(tries(), 1, 'not sent again on the other reports\' successes');

  // once its backoff has run out it goes again, and the coordinator takes it this time
  broken = false;
  t.mock.timers.tick(hour);
  assert.deepEqual(await outcome, { ok: true });
  assert.equal(tries(), 2);
  assert.equal((await client.getJob(failing!.job_id)).status, 'running');
});
