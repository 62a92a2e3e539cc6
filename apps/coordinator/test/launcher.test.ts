import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fakeLauncher, nextEvent, rejectsWith, start, startTest } from './helpers.js';

test('register answers a launcher id and the polling parameters from the configuration, and how much of a job\'s output it keeps', async (t) => {
  const { client } = await startTest(t, { pollTimeoutSeconds: 7, heartbeatIntervalSeconds: 11, heartbeatTimeoutSeconds: 33, outputMaxBytes: 300_000 });
  const reg = await client.register({ hostname: 'box-1', project_dir: '/work', executor_type: 'claude-code' });
  assert.match(reg.launcher_id, /^lnch_[0-9a-f]{12}$/);
  assert.equal(reg.poll_endpoint, '/launcher/jobs');
  assert.equal(reg.poll_timeout_seconds, 7);
  assert.equal(reg.heartbeat_interval_seconds, 11);
  // JOB_OUTPUT_MAX_BYTES: a launcher sends no more of a cut result's rest (docs/launcher.md)
  assert.equal(reg.max_output_bytes, 300_000);
  const bare = await client.register();
  assert.notEqual(bare.launcher_id, reg.launcher_id);
  await rejectsWith(client.register({ hostname: 'x', favourite: 'y' } as never), 400, 'validation_failed');
});

test("a heartbeat answer repeats the registration's limits: a coordinator restarted on its database with others tells a launcher it still knows", async (t) => {
  const { client } = await startTest(t, { outputMaxBytes: 300_000 });
  const reg = await client.register({ hostname: 'box-1' });
  const beat = await client.heartbeat({ launcher_id: reg.launcher_id });
  assert.equal(beat.max_output_bytes, 300_000);
  assert.ok(reg.max_report_bytes !== undefined);
  assert.deepEqual(beat, { ok: true, stop_jobs: [], max_report_bytes: reg.max_report_bytes, max_output_bytes: reg.max_output_bytes });
});

test('GET /launchers lists registration metadata, heartbeat age and status', async (t) => {
  const { client } = await startTest(t);
  const reg = await client.register({ hostname: 'box-2', project_dir: '/p', executor_type: 'demo' });
  const { launchers } = await client.listLaunchers();
  const l = launchers.find((x) => x.launcher_id === reg.launcher_id);
  assert.ok(l);
  assert.equal(l.hostname, 'box-2');
  assert.equal(l.project_dir, '/p');
  assert.equal(l.executor_type, 'demo');
  assert.equal(l.status, 'online');
  assert.equal(typeof l.seconds_since_heartbeat, 'number');
  assert.ok(l.registered_at <= l.last_heartbeat);
});

test('a poll claims a pending job at once: claimed, launcher_id and claimed_at set', async (t) => {
  const { client } = await startTest(t);
  const created = await start(client, 'claim-me');
  const l = await fakeLauncher(client);
  const job = await l.take();
  assert.equal(job.job_id, created.job_id);
  assert.equal(job.status, 'claimed');
  assert.equal(job.launcher_id, l.id);
  assert.ok(job.claimed_at);
  assert.equal((await client.getJob(created.job_id)).status, 'claimed');
});

test('HEAD /launcher/jobs is not a poll: 405 (GET only), and the pending job stays for a real poll', async (t) => {
  const { client, c } = await startTest(t);
  const created = await start(client, 'not-by-head');
  const l = await fakeLauncher(client);
  const res = await fetch(`${c.url}/launcher/jobs?launcher_id=${l.id}`, { method: 'HEAD' });
  assert.equal(res.status, 405);
  assert.equal(res.headers.get('allow'), 'GET');
  assert.equal((await client.getJob(created.job_id)).status, 'pending');
  assert.equal((await l.take()).job_id, created.job_id);
});

test('polling needs a launcher_id (400) that is registered (401)', async (t) => {
  const { client, c } = await startTest(t);
  const res = await fetch(`${c.url}/launcher/jobs`);
  assert.equal(res.status, 400);
  assert.equal(((await res.json()) as { error: { details: { field: string } } }).error.details.field, 'launcher_id');
  await rejectsWith(client.poll('lnch_000000000000'), 401, 'launcher_unknown');
});

test('the lifecycle pending → claimed → running → completed stores the result and timestamps', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const created = await start(client, 'life');
  const job = await l.take();
  assert.deepEqual(await l.started(job.job_id), { ok: true });
  const running = await client.getJob(job.job_id);
  assert.equal(running.status, 'running');
  assert.ok(running.started_at);
  assert.deepEqual(await l.completed(job.job_id, 'the final answer'), { ok: true });
  const done = await client.getJob(created.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.terminal, true);
  assert.equal(done.result, 'the final answer');
  assert.ok(done.completed_at && done.completed_at >= done.started_at!);
});

test('failed stores the error; completed and failed may follow claimed directly', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await start(client, 'a');
  await start(client, 'b');
  const a = await l.take();
  const b = await l.take();
  await l.failed(a.job_id, 'executor exited with code 3: boom');
  await l.completed(b.job_id);
  const fa = await client.getJob(a.job_id);
  assert.equal(fa.status, 'failed');
  assert.equal(fa.error, 'executor exited with code 3: boom');
  assert.equal((await client.getJob(b.job_id)).status, 'completed');
});

test('repeating a report is idempotent: ok, and nothing changes', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await start(client, 'again');
  const job = await l.take();
  await l.started(job.job_id);
  await l.started(job.job_id);
  await l.completed(job.job_id, 'first');
  const before = await client.getJob(job.job_id);
  assert.deepEqual(await l.completed(job.job_id, 'second'), { ok: true });
  assert.deepEqual(await client.getJob(job.job_id), before);
});

test('illegal transitions answer 409 with the current status', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await start(client, 'illegal');
  const job = await l.take();
  await l.completed(job.job_id, 'done');
  const details = await rejectsWith(l.failed(job.job_id, 'too late'), 409, 'invalid_transition');
  assert.equal(details.current_status, 'completed');
  await rejectsWith(l.started(job.job_id), 409, 'invalid_transition');
});

test('a report for a job held by another launcher is 409 with the current status', async (t) => {
  const { client } = await startTest(t);
  const owner = await fakeLauncher(client, 'owner');
  const other = await fakeLauncher(client, 'other');
  await start(client, 'owned');
  const job = await owner.take();
  const details = await rejectsWith(other.started(job.job_id), 409, 'job_owned_by_other_launcher');
  assert.equal(details.current_status, 'claimed');
  // a pending job is held by nobody
  const pending = await start(client, 'nobody');
  await rejectsWith(other.completed(pending.job_id), 409, 'job_owned_by_other_launcher');
});

test('reports: 401 for an unknown launcher, 404 for an unknown job, 400 for a bad body', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await start(client, 'r');
  const job = await l.take();
  await rejectsWith(client.reportStarted(job.job_id, { launcher_id: 'lnch_ffffffffffff' }), 401, 'launcher_unknown');
  await rejectsWith(l.started('job_ffffffffffff'), 404, 'job_not_found');
  const d = await rejectsWith(client.reportFailed(job.job_id, { launcher_id: l.id } as never), 400, 'validation_failed');
  assert.equal(d.field, 'error');
  await rejectsWith(
    client.reportCompleted(job.job_id, { launcher_id: l.id, status: 'meh' } as never),
    400,
    'validation_failed',
  );
});

test('heartbeat answers ok for a known launcher and 401 for an unknown one', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const hb = await l.heartbeat();
  assert.equal(hb.ok, true);
  assert.deepEqual(hb.stop_jobs, []);
  await rejectsWith(client.heartbeat({ launcher_id: 'lnch_000000000000' }), 401, 'launcher_unknown');
  await rejectsWith(client.heartbeat({} as never), 400, 'validation_failed');
});

test('DELETE /launchers/{id}?self=true removes at once; unknown ids are 404', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const answer = await client.deleteLauncher(l.id, { self: true });
  assert.equal(answer.outcome, 'removed');
  assert.equal((await client.listLaunchers()).launchers.length, 0);
  await rejectsWith(l.heartbeat(), 401, 'launcher_unknown');
  await rejectsWith(client.deleteLauncher(l.id), 404, 'launcher_not_found');
});

test('external deregistration: the next poll gets { deregistered: true } and the launcher is removed', async (t) => {
  const { client, c } = await startTest(t);
  const l = await fakeLauncher(client);
  const answer = await client.deleteLauncher(l.id);
  assert.equal(answer.outcome, 'deregistering');
  assert.equal((await client.listLaunchers()).launchers[0]?.status, 'deregistering');
  const removed = nextEvent(c.core, 'launcher.removed'); // once the notice is written
  assert.deepEqual(await l.poll(), { deregistered: true });
  await removed;
  assert.equal((await client.listLaunchers()).launchers.length, 0);
});

test('a deregistered launcher may still report the job it was running, then it is removed', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await start(client, 'finishing');
  const job = await l.take();
  await l.started(job.job_id);
  await client.deleteLauncher(l.id);
  assert.deepEqual(await l.poll({ capacity: 0 }), { deregistered: true });
  assert.equal((await client.listLaunchers()).launchers.length, 1, 'kept while it holds a job');
  await l.completed(job.job_id, 'finished anyway');
  assert.equal((await client.getJob(job.job_id)).status, 'completed');
  assert.equal((await client.listLaunchers()).launchers.length, 0);
});

test('a launcher that deregisters itself while holding jobs leaves none stranded', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  await start(client, 'held-running');
  await start(client, 'held-claimed');
  const running = await l.take();
  await l.started(running.job_id);
  const claimed = await l.take();
  await client.deleteLauncher(l.id, { self: true });
  const r = await client.getJob(running.job_id);
  assert.equal(r.status, 'interrupted');
  assert.match(r.error ?? '', /launcher .* left/);
  const c = await client.getJob(claimed.job_id);
  assert.equal(c.status, 'pending', 'a job that never started goes back to the queue');
  const next = await fakeLauncher(client);
  assert.equal((await next.take()).job_id, claimed.job_id);
});

test('GET /health reports queue depth and launcher counts', async (t) => {
  const { client } = await startTest(t);
  await start(client, 'h1');
  await start(client, 'h2');
  const l = await fakeLauncher(client);
  await l.take();
  const h = await client.health();
  assert.equal(h.status, 'ok');
  assert.equal(h.queue_depth, 1);
  assert.equal(h.jobs_active, 1);
  assert.equal(h.launchers.online, 1);
  assert.equal(h.launchers.stale, 0);
});

test('a launcher restarted on its host replaces its earlier life: the old one is removed, its jobs released at once', async (t) => {
  const { client } = await startTest(t);
  const host = { hostname: 'box', executor_type: 'test', host_id: 'h_restarting-host' };
  const old = await client.register(host);
  const other = await client.register({ ...host, hostname: 'other', host_id: 'h_another-host' });
  await start(client, 'was-running');
  await start(client, 'was-claimed');
  const running = (await client.poll(old.launcher_id, { holdSeconds: 1 }))!.job!;
  await client.reportStarted(running.job_id, { launcher_id: old.launcher_id });
  const claimed = (await client.poll(old.launcher_id, { holdSeconds: 1 }))!.job!;

  const unknown = 'lnch_000000000000';
  const reg = await client.register({ ...host, replaces: [old.launcher_id, other.launcher_id, unknown] });
  assert.deepEqual(reg.replaced, [old.launcher_id], 'only a launcher of the same host; unknown ids are no error');

  const ids = (await client.listLaunchers()).launchers.map((l) => l.launcher_id).sort();
  assert.deepEqual(ids, [other.launcher_id, reg.launcher_id].sort());
  const r = await client.getJob(running.job_id);
  assert.equal(r.status, 'interrupted');
  assert.equal(r.error_code, 'launcher_lost');
  assert.match(r.error ?? '', new RegExp(`replaced by ${reg.launcher_id}`));
  assert.equal((await client.getJob(claimed.job_id)).status, 'pending', 'a job that never started goes back to the queue');
  await rejectsWith(client.heartbeat({ launcher_id: old.launcher_id }), 401, 'launcher_unknown');

  const again = await client.register({ ...host, replaces: [old.launcher_id] });
  assert.deepEqual(again.replaced, [], 'a replacement sent again (a lost answer) replaces nothing more');
  assert.equal((await client.register(host)).replaced, undefined, 'no replaces, no replaced');
  const bad = await rejectsWith(client.register({ ...host, replaces: ['not-a-launcher'] }), 400, 'validation_failed');
  assert.match(String(bad.field), /replaces/);
});
