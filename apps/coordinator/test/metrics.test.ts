import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { request } from 'undici';
import { ManualClock } from '../src/core/clock.js';
import { freshDatabaseUrl } from './pg-server.js';
import { parsePrometheusText, type Family } from './prometheus-text.js';
import { eventJob, fakeLauncher, openEvents, parked, rejectsWith, resume, start, startTest, tempDir, unparked } from './helpers.js';

/** Scrape `GET /metrics` over HTTP and parse the exposition strictly. */
async function scrape(url: string): Promise<Map<string, Family>> {
  const res = await request(`${url}/metrics`);
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  return parsePrometheusText(await res.body.text());
}

function family(families: Map<string, Family>, name: string): Family {
  const f = families.get(name);
  assert.ok(f, `metric ${name} is exported`);
  return f;
}

const sameLabels = (labels: Record<string, string>, want: Record<string, string>) =>
  Object.keys(labels).length === Object.keys(want).length && Object.entries(want).every(([k, v]) => labels[k] === v);

/** The value of the sample `name` with exactly these labels (0 when there is none yet). */
function value(families: Map<string, Family>, name: string, labels: Record<string, string> = {}, sample = name): number {
  return family(families, name).samples.find((s) => s.name === sample && sameLabels(s.labels, labels))?.value ?? 0;
}

/** How many observations a histogram series holds (its `_count`). */
const observations = (families: Map<string, Family>, name: string, labels: Record<string, string> = {}) =>
  value(families, name, labels, `${name}_count`);

test('GET /metrics: counters and histograms move with a real job created, claimed, started and completed over HTTP', async (t) => {
  const { c, client } = await startTest(t);
  const before = await scrape(c.url);
  assert.equal(value(before, 'agentq_jobs_created_total', { type: 'start_session' }), 0);
  assert.equal(family(before, 'agentq_jobs_created_total').type, 'counter');
  assert.equal(family(before, 'agentq_job_queue_seconds').type, 'histogram');

  const l = await fakeLauncher(client);
  const job = await start(client, 'metered');
  const pending = await scrape(c.url);
  assert.equal(value(pending, 'agentq_jobs_created_total', { type: 'start_session' }), 1);
  assert.equal(value(pending, 'agentq_queue_depth'), 1);
  assert.equal(value(pending, 'agentq_jobs', { status: 'pending' }), 1);
  assert.equal(value(pending, 'agentq_launchers', { status: 'online' }), 1);

  assert.equal((await l.take()).job_id, job.job_id);
  const claimed = await scrape(c.url);
  assert.equal(value(claimed, 'agentq_queue_depth'), 0);
  assert.equal(value(claimed, 'agentq_jobs', { status: 'pending' }), 0);
  assert.equal(value(claimed, 'agentq_jobs', { status: 'claimed' }), 1);
  assert.equal(observations(claimed, 'agentq_job_queue_seconds'), 1);

  await l.started(job.job_id);
  await l.completed(job.job_id, 'done');
  await client.getJob(job.job_id);
  const after = await scrape(c.url);
  assert.equal(value(after, 'agentq_jobs', { status: 'claimed' }), 0);
  assert.equal(value(after, 'agentq_jobs', { status: 'completed' }), 1);
  assert.equal(value(after, 'agentq_jobs_ended_total', { status: 'completed' }), 1);
  assert.equal(observations(after, 'agentq_job_dispatch_seconds'), 1);
  assert.equal(observations(after, 'agentq_job_run_seconds', { status: 'completed' }), 1);
  assert.equal(value(after, 'agentq_callbacks_delivered_total'), 0);

  // requests are timed by route pattern, never by raw URL (ids would explode the label set)
  const http = family(after, 'agentq_http_request_duration_seconds');
  assert.equal(observations(after, http.name, { method: 'GET', route: '/jobs/:job_id', status_code: '200' }), 1);
  assert.equal(observations(after, http.name, { method: 'POST', route: '/jobs', status_code: '201' }), 1);
  assert.ok(!http.samples.some((s) => s.labels.route?.includes(job.job_id)), 'no raw URL in the route label');

  // the process and runtime metrics, under their standard names
  for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds']) {
    family(after, name);
  }
});

test('GET /metrics: the job counters and run times are exported at 0 for every type and terminal status before any job', async (t) => {
  // a series that first appears at 1 has no earlier sample: increase() and rate() over it miss
  // that first job (the first failure after a restart would fire no alert)
  const { c, client } = await startTest(t);
  const present = (families: Map<string, Family>, name: string, labels: Record<string, string>, sample = name) =>
    family(families, name).samples.find((s) => s.name === sample && sameLabels(s.labels, labels))?.value;
  const fresh = await scrape(c.url);
  for (const type of ['start_session', 'resume_session']) assert.equal(present(fresh, 'agentq_jobs_created_total', { type }), 0, type);
  for (const status of ['completed', 'failed', 'stopped', 'interrupted', 'timed_out']) {
    assert.equal(present(fresh, 'agentq_jobs_ended_total', { status }), 0, status);
    assert.equal(present(fresh, 'agentq_job_run_seconds', { status }, 'agentq_job_run_seconds_count'), 0, status);
    assert.equal(present(fresh, 'agentq_job_run_seconds', { status, le: '+Inf' }, 'agentq_job_run_seconds_bucket'), 0, status);
  }

  const job = await start(client, 'fails');
  const l = await fakeLauncher(client);
  await l.take();
  await l.started(job.job_id);
  await l.failed(job.job_id, 'boom');
  const after = await scrape(c.url);
  assert.equal(present(after, 'agentq_jobs_ended_total', { status: 'failed' }), 1);
  assert.equal(present(after, 'agentq_jobs_ended_total', { status: 'completed' }), 0);
  assert.equal(present(after, 'agentq_job_run_seconds', { status: 'failed' }, 'agentq_job_run_seconds_count'), 1);
});

test('GET /metrics: requests the router refuses (broken percent-encoding, a path segment too long) are timed as unmatched', async (t) => {
  const { c } = await startTest(t);
  for (const path of ['/jobs/%ff', '/sessions/%zz', '/nope/%zz', `/jobs/${'x'.repeat(200 * 9 + 1)}`]) {
    const res = await request(`${c.url}${path}`);
    assert.equal(res.statusCode, 400, path);
    assert.equal(((await res.body.json()) as { error: { code: string } }).error.code, 'bad_request');
  }
  await (await request(`${c.url}/nope`)).body.dump(); // a 404: unmatched, through the request hooks
  const after = await scrape(c.url);
  const http = 'agentq_http_request_duration_seconds';
  assert.equal(observations(after, http, { method: 'GET', route: 'unmatched', status_code: '400' }), 4);
  assert.equal(observations(after, http, { method: 'GET', route: 'unmatched', status_code: '404' }), 1);
  assert.ok(Number.isFinite(value(after, http, { method: 'GET', route: 'unmatched', status_code: '400' }, `${http}_sum`)));
});

test('GET /metrics: parked polls and SSE clients are read when scraped', async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const abort = new AbortController();
  const poll = l.poll({ signal: abort.signal }).catch(() => null);
  await parked(c.core, l.id);
  const job = await start(client, 'seen');
  // from event 0, so the replay carries the claim; once a message arrives the stream is open
  const events = openEvents(t, c.url, 0);
  const first = await events.until((m) => m.event === 'job.claimed');
  assert.equal(eventJob(first.at(-1)!).job_id, job.job_id);
  await poll;

  const parkedAgain = parked(c.core, l.id);
  const second = l.poll({ signal: abort.signal }).catch(() => null);
  await parkedAgain;
  const during = await scrape(c.url);
  assert.equal(value(during, 'agentq_parked_polls'), 1);
  assert.equal(value(during, 'agentq_sse_clients'), 1);

  const gone = unparked(c.core, l.id);
  abort.abort();
  await Promise.all([second, gone]);
  assert.equal(value(await scrape(c.url), 'agentq_parked_polls'), 0);
});

test('GET /metrics: a callback resume that completes counts the child outcomes it delivered', async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const parent = await start(client, 'parent');
  await l.take();
  await l.completed(parent.job_id, 'ready');
  const child = await start(client, 'child', 'work', { parent_session_name: 'parent' });
  await l.take();
  await l.completed(child.job_id, 'worked');
  const callback = await l.take();
  assert.deepEqual(callback.callback_of, [child.job_id]);
  assert.equal(value(await scrape(c.url), 'agentq_callbacks_delivered_total'), 0, 'not delivered until it completes');
  await l.started(callback.job_id);
  await l.completed(callback.job_id, 'noted');
  const after = await scrape(c.url);
  assert.equal(value(after, 'agentq_callbacks_delivered_total'), 1);
  assert.equal(value(after, 'agentq_jobs_created_total', { type: 'resume_session' }), 1);
});

test('GET /metrics: after a restart on the SQLite file, the jobs are counted by status', async (t) => {
  const dir = tempDir(t, 'agentq-metrics-');
  const databaseUrl = `sqlite:${join(dir, 'agentq.db')}`;
  const first = await startTest(t, { databaseUrl });
  const l = await fakeLauncher(first.client);
  const done = await start(first.client, 'done');
  await l.take();
  await l.completed(done.job_id, 'ok');
  await start(first.client, 'waiting');
  await first.client.close();
  await first.c.close();

  const second = await startTest(t, { databaseUrl });
  const restored = await scrape(second.c.url);
  assert.equal(value(restored, 'agentq_jobs', { status: 'completed' }), 1);
  assert.equal(value(restored, 'agentq_jobs', { status: 'pending' }), 1);
  assert.equal(value(restored, 'agentq_queue_depth'), 1);
  // counters start at zero in a new process: the restored jobs were not created by it
  assert.equal(value(restored, 'agentq_jobs_created_total', { type: 'start_session' }), 0);
});

test('GET /metrics: time in queue, dispatch and run are the seconds between created, claimed, started and completed, reported alone or in one sync', async (t) => {
  const clock = new ManualClock();
  const { c, client } = await startTest(t, {}, { clock });
  const l = await fakeLauncher(client);
  const sum = (families: Map<string, Family>, name: string, labels: Record<string, string> = {}) => value(families, name, labels, `${name}_sum`);

  // one job reported by the single-report endpoints: 2 s in queue, 3 s to start, 5 s running
  const single = await start(client, 'timed-single');
  clock.advance(2_000);
  assert.equal((await l.take()).job_id, single.job_id);
  clock.advance(3_000);
  await l.started(single.job_id);
  clock.advance(5_000);
  await l.completed(single.job_id, 'done');
  const first = await scrape(c.url);
  assert.equal(sum(first, 'agentq_job_queue_seconds'), 2);
  assert.equal(sum(first, 'agentq_job_dispatch_seconds'), 3);
  assert.equal(sum(first, 'agentq_job_run_seconds', { status: 'completed' }), 5);

  // one whose start and end come in one report-and-poll request (one transaction): 7 s in queue,
  // 11 s to start and no time running
  const batched = await start(client, 'timed-batched');
  clock.advance(7_000);
  assert.equal((await l.take()).job_id, batched.job_id);
  clock.advance(11_000);
  const { results } = await client.sync({
    launcher_id: l.id,
    capacity: 0,
    reports: [
      { job_id: batched.job_id, kind: 'started' },
      { job_id: batched.job_id, kind: 'completed', status: 'success', result: 'done' },
    ],
  });
  assert.ok(results.every((r) => r.ok), JSON.stringify(results));
  const second = await scrape(c.url);
  assert.equal(observations(second, 'agentq_job_queue_seconds'), 2);
  assert.equal(sum(second, 'agentq_job_queue_seconds'), 2 + 7);
  assert.equal(sum(second, 'agentq_job_dispatch_seconds'), 3 + 11);
  assert.equal(observations(second, 'agentq_job_run_seconds', { status: 'completed' }), 2);
  assert.equal(sum(second, 'agentq_job_run_seconds', { status: 'completed' }), 5 + 0);
});

test('GET /metrics: the jobs recovery requeues and interrupts at a restart are counted, a requeued one in queue from its requeue', async (t) => {
  const dir = tempDir(t, 'agentq-metrics-');
  const file = join(dir, 'agentq.db');
  const clock = new ManualClock();
  const first = await startTest(t, { databaseUrl: `sqlite:${file}` }, { clock });
  const keeps = await fakeLauncher(first.client, 'keeps');
  const claimed = await start(first.client, 'claimed');
  assert.equal((await keeps.take()).job_id, claimed.job_id);
  const lost = await fakeLauncher(first.client, 'lost');
  const running = await start(first.client, 'running');
  assert.equal((await lost.take()).job_id, running.job_id);
  await lost.started(running.job_id);
  await first.client.close();
  await first.c.close();
  // while the coordinator is down, its second launcher goes (forgotten, as after an hour stale)
  const db = new Database(file);
  db.prepare('DELETE FROM launchers WHERE id = ?').run(lost.id);
  db.close();
  clock.advance(30_000); // within the heartbeat timeout: the first launcher is still online

  const second = await startTest(t, { databaseUrl: `sqlite:${file}` }, { clock });
  const interrupted = await second.client.getJob(running.job_id);
  assert.equal(interrupted.error_code, 'launcher_lost');
  const requeued = await second.client.poll(keeps.id, { holdSeconds: 1 });
  assert.equal(requeued?.job?.job_id, claimed.job_id);
  const after = await scrape(second.c.url);
  assert.equal(value(after, 'agentq_jobs_ended_total', { status: 'interrupted' }), 1);
  assert.equal(observations(after, 'agentq_job_run_seconds', { status: 'interrupted' }), 1);
  // claimed again the moment it was requeued (the clock stood still), not 30 s after its creation
  assert.equal(observations(after, 'agentq_job_queue_seconds'), 1);
  assert.equal(value(after, 'agentq_job_queue_seconds', {}, 'agentq_job_queue_seconds_sum'), 0);
});

test('GET /metrics: jobs deleted by history retention leave agentq_jobs; agentq_jobs_ended_total keeps them', async (t) => {
  const clock = new ManualClock();
  const { c, client } = await startTest(t, { jobRetentionMs: 60_000 }, { clock });
  const job = await start(client, 'stopped-early');
  await client.stopJob(job.job_id);
  const ended = await scrape(c.url);
  assert.equal(value(ended, 'agentq_jobs', { status: 'stopped' }), 1);
  assert.equal(value(ended, 'agentq_jobs', { status: 'pending' }), 0);
  assert.equal(observations(ended, 'agentq_job_run_seconds', { status: 'stopped' }), 0, 'it never started');

  clock.advance(60_000);
  await c.core.sweep();
  await rejectsWith(client.getJob(job.job_id), 404, 'job_not_found');
  const evicted = await scrape(c.url);
  assert.equal(value(evicted, 'agentq_jobs', { status: 'stopped' }), 0);
  assert.equal(value(evicted, 'agentq_jobs_ended_total', { status: 'stopped' }), 1);
});

test('each app has its own registry: two coordinators in one process count separately', async (t) => {
  const a = await startTest(t);
  const b = await startTest(t);
  await start(a.client, 'only-on-a');
  assert.equal(value(await scrape(a.c.url), 'agentq_jobs_created_total', { type: 'start_session' }), 1);
  assert.equal(value(await scrape(b.c.url), 'agentq_jobs_created_total', { type: 'start_session' }), 0);
});

test('the example Grafana dashboard (docs/grafana-dashboard.json) queries only metrics the coordinator exports', async (t) => {
  const { c } = await startTest(t);
  const families = await scrape(c.url);
  const path = fileURLToPath(new URL('../../../../docs/grafana-dashboard.json', import.meta.url));
  const dashboard = JSON.parse(readFileSync(path, 'utf8')) as { panels: Array<{ targets?: Array<{ expr: string }> }> };
  const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((x) => x.expr));
  assert.ok(exprs.length > 10);
  const names = new Set(exprs.flatMap((e) => [...e.matchAll(/\b((?:agentq|nodejs|process)_[a-z0-9_]+)/g)].map((m) => m[1]!)));
  for (const name of names) {
    const base = name.replace(/_(bucket|sum|count)$/, '');
    assert.ok(families.has(name) || families.get(base)?.type === 'histogram', `${name} is exported`);
  }
  // coordinators of one database all report these for the whole deployment (docs/operations.md,
  // "Several coordinators"): summed over instances, two coordinators would show twice the queue
  const deploymentWide = ['agentq_jobs', 'agentq_queue_depth', 'agentq_pending_jobs', 'agentq_launchers', 'agentq_jobs_created_total', 'agentq_jobs_ended_total', 'agentq_callbacks_delivered_total'];
  for (const expr of exprs) {
    for (const m of expr.matchAll(/\b(agentq_[a-z0-9_]+)\{/g)) {
      if (!deploymentWide.includes(m[1]!)) continue;
      assert.match(expr.slice(0, m.index), /max without \(instance\) \((rate\()?$/, `${m[1]} is taken once per deployment, not summed over coordinators: ${expr}`);
    }
  }
});

test('the example Grafana dashboard leaves every waiting request out of its p95 latency panel, output follows included', async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'followed');
  await l.take();
  await l.started(job.job_id);
  // what `agentq output --follow` and the web dashboard's job view send: held until new bytes or wait_ms
  const res = await request(`${c.url}/jobs/${job.job_id}/output?offset=0&wait_ms=50`);
  assert.equal(res.statusCode, 200);
  await res.body.dump();
  const http = family(await scrape(c.url), 'agentq_http_request_duration_seconds');
  const follow = http.samples.find((s) => s.name.endsWith('_count') && s.labels.method === 'GET' && s.labels.route?.includes('output'));
  assert.ok(follow, 'the follow read is timed');

  const path = fileURLToPath(new URL('../../../../docs/grafana-dashboard.json', import.meta.url));
  const dashboard = JSON.parse(readFileSync(path, 'utf8')) as { panels: Array<{ title?: string; targets?: Array<{ expr: string }> }> };
  const panel = dashboard.panels.find((p) => p.title?.startsWith('Request duration p95'));
  const expr = panel?.targets?.[0]?.expr ?? '';
  const left = /route!~"([^"]+)"/.exec(expr)?.[1];
  assert.ok(left, `the panel leaves waiting routes out: ${expr}`);
  const leftOut = new RegExp(`^(?:${left})$`); // PromQL regex matchers are anchored
  for (const route of [follow.labels.route!, '/launcher/jobs', '/launcher/sync', '/jobs/:job_id/wait', '/jobs/wait']) {
    assert.match(route, leftOut, `${route} waits by design: its p95 is its hold time`);
  }
});

test('GET /metrics: queued prompt bytes are what the pending prompts take; on PostgreSQL, which does not count them, they are not exported as a 0', async (t) => {
  const counted = await startTest(t, { databaseUrl: 'memory:' }); // a store that counts them, whatever store the run tests
  await start(counted.client, 'queued', 'é'.repeat(10));
  const memory = await scrape(counted.c.url);
  assert.equal(value(memory, 'agentq_queued_prompt_bytes'), 20);
  assert.equal(value(memory, 'agentq_queued_message_bytes'), 0);
  assert.equal(value(memory, 'agentq_queued_outcome_bytes'), 0);

  const databaseUrl = await freshDatabaseUrl(t);
  if (databaseUrl === null) return;
  const pg = await startTest(t, { databaseUrl });
  await start(pg.client, 'queued', 'é'.repeat(10));
  const families = await scrape(pg.c.url);
  assert.equal(value(families, 'agentq_queue_depth'), 1);
  // a 0 beside a full queue would say there is room; MAX_QUEUED_BYTES is not applied there
  assert.ok(!families.has('agentq_queued_prompt_bytes'), 'no agentq_queued_prompt_bytes on PostgreSQL');
  assert.ok(!families.has('agentq_queued_message_bytes'), 'no agentq_queued_message_bytes on PostgreSQL');
  assert.ok(!families.has('agentq_queued_outcome_bytes'), 'no agentq_queued_outcome_bytes on PostgreSQL');
});

test('agentq_queue_depth is one unlabelled value, 0 when the queue is empty; pending jobs are broken down by what they wait for, not by route', async (t) => {
  const { c, client } = await startTest(t);
  const waiting = (families: Map<string, Family>) =>
    Object.fromEntries(family(families, 'agentq_pending_jobs').samples.map((s) => [s.labels.waiting_for, s.value]));
  const empty = await scrape(c.url);
  assert.deepEqual(family(empty, 'agentq_queue_depth').samples.map((s) => [s.labels, s.value]), [[{}, 0]], 'a 0, not no data');
  assert.deepEqual(waiting(empty), { free_slot: 0, matching_launcher: 0, session: 0 });

  // routes are made of user input: 40 directories and label values would have made 40 series
  const routed = Array.from({ length: 40 }, (_, i) => ({
    type: 'start_session' as const,
    session_name: `routed-${i}`,
    prompt: 'x',
    project_dir: `/srv/user-${i}`,
    requires: { tenant: `"quoted\\${i}` },
  }));
  await client.createJobs(routed);
  await fakeLauncher(client); // serves jobs with no requirement and no directory
  await start(client, 'plain');
  await resume(client, 'plain'); // behind its session's first job
  const busy = await scrape(c.url);
  assert.deepEqual(family(busy, 'agentq_queue_depth').samples.map((s) => [s.labels, s.value]), [[{}, 42]]);
  assert.deepEqual(waiting(busy), { free_slot: 1, matching_launcher: 40, session: 1 });

  for (const job of (await client.listJobs({ status: 'pending' })).jobs) await client.stopJob(job.job_id);
  const drained = await scrape(c.url);
  assert.deepEqual(family(drained, 'agentq_queue_depth').samples.map((s) => [s.labels, s.value]), [[{}, 0]]);
  assert.deepEqual(waiting(drained), { free_slot: 0, matching_launcher: 0, session: 0 });
});
