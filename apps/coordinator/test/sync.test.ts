import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SyncReport } from '@agentq/protocol';
import pg from 'pg';
import { fakeLauncher, parked, recordingLogger, rejectsWith, start, startTest, unparked } from './helpers.js';
import { AgentqClient } from '@agentq/client';
import { startCoordinator } from '../src/start.js';
import { commitCuttingProxy, freshDatabaseUrl } from './pg-server.js';

/*
 * Report-and-poll: `POST /launcher/sync` applies a launcher's reports in order, each as its single
 * endpoint would (idempotent, one failing does not fail the others), then answers like a poll.
 */

test('reports are applied in order and answered in order; a refused report does not fail the others', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client, 'mine');
  const other = await fakeLauncher(client, 'theirs');
  const a = await start(client, 'a');
  const b = await start(client, 'b');
  await l.poll({ batch: true, capacity: 2 });
  const c = await start(client, 'c');
  await other.take();
  const reports: SyncReport[] = [
    { job_id: a.job_id, kind: 'started', working_dir: '/w' },
    { job_id: a.job_id, kind: 'output', offset: 0, data: 'hello\n' },
    { job_id: a.job_id, kind: 'completed', result: 'ra' },
    { job_id: c.job_id, kind: 'started' },
    { job_id: 'job_ffffffffffff', kind: 'completed' },
    { job_id: b.job_id, kind: 'failed', error: 'eb' },
    { job_id: b.job_id, kind: 'started' },
  ];
  const res = await client.sync({ launcher_id: l.id, capacity: 0, reports });
  assert.deepEqual(
    res.results.map((r) => [r.job_id, r.kind, r.ok, r.error?.code ?? null]),
    [
      [a.job_id, 'started', true, null],
      [a.job_id, 'output', true, null],
      [a.job_id, 'completed', true, null],
      [c.job_id, 'started', false, 'job_owned_by_other_launcher'],
      ['job_ffffffffffff', 'completed', false, 'job_not_found'],
      [b.job_id, 'failed', true, null],
      [b.job_id, 'started', false, 'invalid_transition'],
    ],
  );
  // a refusal carries what the single endpoint's error body would: the current status
  assert.equal(res.results[3]!.error?.details?.['current_status'], 'claimed');
  assert.equal(res.results[6]!.error?.details?.['current_status'], 'failed');
  assert.deepEqual(res.jobs, []);

  const doneA = await client.getJob(a.job_id);
  assert.equal(doneA.status, 'completed');
  assert.equal(doneA.result, 'ra');
  assert.equal((await client.getOutput(a.job_id, { offset: 0 })).output, 'hello\n');
  assert.equal((await client.getJob(b.job_id)).status, 'failed');
  assert.equal((await client.getJob(b.job_id)).error, 'eb');
  const stillC = await client.getJob(c.job_id);
  assert.equal(stillC.status, 'claimed');
  assert.equal(stillC.launcher_id, other.id);
});

test('a sync sent again (its answer was lost) answers ok for every report and changes nothing', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'retried');
  await l.take();
  const body = {
    launcher_id: l.id,
    capacity: 0,
    reports: [
      { job_id: job.job_id, kind: 'started' as const },
      { job_id: job.job_id, kind: 'output' as const, offset: 0, data: 'once\n' },
      { job_id: job.job_id, kind: 'completed' as const, result: 'r', cost_usd: 0.5 },
    ],
  };
  const first = await client.sync(body);
  const after = await client.getJob(job.job_id);
  const again = await client.sync(body);
  assert.deepEqual(
    first.results.map((r) => r.ok),
    [true, true, true],
  );
  assert.deepEqual(again.results, first.results);
  assert.deepEqual(await client.getJob(job.job_id), after, 'nothing changed the second time');
  const out = await client.getOutput(job.job_id, { offset: 0 });
  assert.equal(out.output, 'once\n', 'the output batch is stored once');
  assert.equal(out.total_bytes, 5);
});

test('reports and new work in one answer: ending a job hands out the next job of its session at once', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const first = await start(client, 'chain');
  const next = await client.createJob({ type: 'resume_session', session_name: 'chain', prompt: 'go on' });
  await l.take();
  const res = await client.sync({
    launcher_id: l.id,
    capacity: 3,
    reports: [
      { job_id: first.job_id, kind: 'started', executor_session_id: 'exec-1' },
      { job_id: first.job_id, kind: 'completed', result: 'first done' },
    ],
  });
  assert.deepEqual(
    res.results.map((r) => r.ok),
    [true, true],
  );
  assert.deepEqual(
    res.jobs.map((j) => [j.job_id, j.status, j.launcher_id, j.executor_session_id]),
    [[next.job_id, 'claimed', l.id, 'exec-1']],
  );
});

test('held like a poll only when there are no reports; with reports it answers at once', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const l = await fakeLauncher(client);
  let parkings = 0;
  c.core.waiters.on('parked', () => parkings++);

  // no reports, nothing to hand out: parked until a job comes
  const isParked = parked(c.core, l.id);
  const held = client.sync({ launcher_id: l.id, capacity: 2, reports: [] }, { holdSeconds: 60 });
  await isParked;
  const job = await start(client, 'for-the-held-sync');
  const answer = await held;
  assert.deepEqual(
    answer.jobs.map((j) => j.job_id),
    [job.job_id],
  );
  assert.deepEqual(answer.results, []);
  assert.equal(parkings, 1);

  // a report and nothing to hand out: answered without parking
  const quick = await client.sync({ launcher_id: l.id, capacity: 2, reports: [{ job_id: job.job_id, kind: 'started' }] });
  assert.deepEqual(quick.jobs, []);
  assert.deepEqual(
    quick.results.map((r) => r.ok),
    [true],
  );
  assert.equal(parkings, 1, 'the sync with a report was not parked');

  // capacity 0 and no reports: parked until a stop request for one of its jobs
  const parkedAgain = parked(c.core, l.id);
  const full = client.sync({ launcher_id: l.id, capacity: 0, reports: [] }, { holdSeconds: 60 });
  await parkedAgain;
  await client.stopJob(job.job_id);
  const stop = await full;
  assert.deepEqual(stop.stop_jobs, [job.job_id]);
  assert.deepEqual(stop.jobs, []);
});

test('a parked sync whose launcher goes away takes no job with it', async (t) => {
  const { client, c } = await startTest(t, { pollTimeoutSeconds: 60 });
  const quitter = await fakeLauncher(client, 'quitter');
  const isParked = parked(c.core, quitter.id);
  const abort = new AbortController();
  const held = client.sync({ launcher_id: quitter.id, capacity: 5, reports: [] }, { signal: abort.signal, holdSeconds: 60 });
  await isParked;
  const gone = unparked(c.core, quitter.id);
  abort.abort();
  await assert.rejects(held);
  await gone;
  const created = await start(client, 'for-the-next');
  assert.equal((await client.getJob(created.job_id)).status, 'pending');
  const next = await fakeLauncher(client, 'next');
  assert.equal((await next.take()).job_id, created.job_id);
});

test('an answer that was not delivered is undone: its jobs go back to the queue, its reports stay applied', async (t) => {
  const { client, c } = await startTest(t);
  const l = await fakeLauncher(client);
  const ran = await start(client, 'ran');
  await l.take();
  const queued = await start(client, 'queued');
  // what the route does when the launcher's connection closed before the answer was written
  const answer = await c.core.sync(
    { launcher_id: l.id, capacity: 1, reports: [{ job_id: ran.job_id, kind: 'completed', result: 'kept' }] },
    new AbortController().signal,
  );
  assert.deepEqual(
    answer.jobs.map((j) => j.job_id),
    [queued.job_id],
  );
  await c.core.pollAnswerLost(l.id, { jobs: answer.jobs });
  assert.equal((await client.getJob(ran.job_id)).status, 'completed');
  assert.equal((await client.getJob(ran.job_id)).result, 'kept');
  const back = await client.getJob(queued.job_id);
  assert.equal(back.status, 'pending');
  assert.equal(back.launcher_id, null);
  assert.equal((await l.take()).job_id, queued.job_id);
});

test('a deregistered launcher learns it through sync, and may still report the job it runs', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'last-one');
  await l.take();
  await l.started(job.job_id);
  await client.deleteLauncher(l.id);
  const res = await client.sync({ launcher_id: l.id, capacity: 1, reports: [{ job_id: job.job_id, kind: 'completed', result: 'finished' }] });
  assert.equal(res.deregistered, true);
  assert.deepEqual(
    res.results.map((r) => r.ok),
    [true],
  );
  assert.equal((await client.getJob(job.job_id)).status, 'completed');
});

test('sync: 401 for an unknown launcher (nothing applied), 400 naming the field for a bad body', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'v');
  await l.take();
  await rejectsWith(
    client.sync({ launcher_id: 'lnch_ffffffffffff', capacity: 0, reports: [{ job_id: job.job_id, kind: 'started' }] }),
    401,
    'launcher_unknown',
  );
  assert.equal((await client.getJob(job.job_id)).status, 'claimed');

  const bad = async (body: unknown, field: string, message?: RegExp) => {
    const d = await rejectsWith(client.sync(body as never), 400, 'validation_failed');
    assert.equal(d.field, field, JSON.stringify(body));
    if (message) {
      const text = await client.sync(body as never).catch((e: Error) => e.message);
      assert.match(String(text), message);
    }
  };
  await bad({ launcher_id: l.id, reports: [] }, 'capacity');
  await bad({ launcher_id: l.id, capacity: 1001, reports: [] }, 'capacity');
  await bad({ launcher_id: l.id, capacity: 1 }, 'reports');
  // a report's kind picks its schema: the error is that kind's, naming the field
  await bad({ launcher_id: l.id, capacity: 1, reports: [{ job_id: job.job_id, kind: 'finished' }] }, 'reports[0].kind', /Expected one of started, .*completed/);
  await bad({ launcher_id: l.id, capacity: 1, reports: [{ job_id: job.job_id }] }, 'reports[0].kind', /is required/);
  await bad({ launcher_id: l.id, capacity: 1, reports: [{ job_id: job.job_id, kind: 'failed' }] }, 'reports[0].error', /is required/);
  await bad({ launcher_id: l.id, capacity: 1, reports: [{ job_id: job.job_id, kind: 'completed', result: 5 }] }, 'reports[0].result');
  await bad(
    { launcher_id: l.id, capacity: 1, reports: Array.from({ length: 1001 }, () => ({ job_id: job.job_id, kind: 'started' })) },
    'reports',
  );
  assert.equal((await client.getJob(job.job_id)).status, 'claimed', 'a refused request applied nothing');
});

test('PostgreSQL: a report whose transaction fails with a raw database error every time (a unique key that stays taken) fails alone: the others of its sync are applied, it is answered internal_error', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const { log, lines } = recordingLogger();
  const { client } = await startTest(t, { databaseUrl: url, sweepIntervalMs: 600_000 }, { logger: log });
  const l = await fakeLauncher(client);
  const good = await start(client, 'good');
  const bad = await start(client, 'bad');
  await l.poll({ batch: true, capacity: 2 });
  // ending the bad job fails with a unique violation (23505) each time, as a key that stays
  // taken would: the store runs the transaction again twice, then throws that raw error
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  t.after(() => admin.end());
  await admin.query(`CREATE FUNCTION refuse_end() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE unique_violation USING MESSAGE = 'a key that stays taken'; END $$`);
  await admin.query(
    `CREATE TRIGGER refuse_end BEFORE UPDATE ON jobs FOR EACH ROW
     WHEN (NEW.id = '${bad.job_id}' AND NEW.completed_at IS NOT NULL) EXECUTE FUNCTION refuse_end()`,
  );

  const res = await client.sync({
    launcher_id: l.id,
    capacity: 0,
    reports: [
      { job_id: good.job_id, kind: 'started' },
      { job_id: bad.job_id, kind: 'completed', result: 'never stored' },
      { job_id: good.job_id, kind: 'completed', result: 'stored' },
    ],
  });
  assert.deepEqual(
    res.results.map((r) => [r.job_id, r.kind, r.ok, r.error?.code ?? null]),
    [
      [good.job_id, 'started', true, null],
      [bad.job_id, 'completed', false, 'internal_error'],
      [good.job_id, 'completed', true, null],
    ],
  );
  assert.equal((await client.getJob(good.job_id)).result, 'stored');
  assert.equal((await client.getJob(bad.job_id)).status, 'claimed');
  // what the single endpoint's 500 would have logged, with the report it belongs to
  const logged = lines
    .map((x) => JSON.parse(x) as { level: number; msg: string; job_id?: string; err?: { code?: string } })
    .filter((x) => x.msg === 'report failed')
    .map((x) => [x.level, x.job_id, x.err?.code]);
  assert.deepEqual(logged, [[50, bad.job_id, '23505']]);
  // and the batch's own failure, which the reports run alone might not have met again
  const batch = lines
    .map((x) => JSON.parse(x) as { level: number; msg: string; err?: { code?: string } })
    .filter((x) => x.msg.startsWith('a sync batch of reports failed'))
    .map((x) => [x.level, x.err?.code]);
  assert.deepEqual(batch, [[40, '23505']]);
});

test('PostgreSQL: a sync whose batch COMMIT went through unconfirmed (the connection cut) is answered by running each report again: all ok, applied once', async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const proxy = await commitCuttingProxy(t, direct);
  const A = await startCoordinator({ databaseUrl: proxy.url, logLevel: 'silent', pollTimeoutSeconds: 600, sweepIntervalMs: 600_000 });
  const client = new AgentqClient({ url: A.url });
  t.after(async () => {
    await client.destroy();
    await A.close();
  });
  const l = await fakeLauncher(client);
  const done = await start(client, 'done');
  const runs = await start(client, 'runs');
  await l.poll({ batch: true, capacity: 2 });
  // the batch's COMMIT reaches the database, which commits; the coordinator never hears of it
  const cut = proxy.arm('a result whose commit is not confirmed');
  const res = await client.sync({
    launcher_id: l.id,
    capacity: 0,
    reports: [
      { job_id: done.job_id, kind: 'started' },
      { job_id: runs.job_id, kind: 'started' },
      { job_id: done.job_id, kind: 'completed', result: 'a result whose commit is not confirmed' },
    ],
  });
  await cut;
  assert.deepEqual(
    res.results.map((r) => [r.job_id, r.kind, r.ok]),
    [
      [done.job_id, 'started', true],
      [runs.job_id, 'started', true],
      [done.job_id, 'completed', true],
    ],
  );
  const job = await client.getJob(done.job_id);
  assert.equal(job.status, 'completed');
  assert.equal(job.result, 'a result whose commit is not confirmed');
  assert.equal((await client.getJob(runs.job_id)).status, 'running');
  // one commit logged the job's end: the run again changed nothing
  const db = new pg.Client({ connectionString: direct });
  await db.connect();
  t.after(() => db.end());
  const { rows } = await db.query<{ events: string }>('SELECT events FROM commit_log');
  assert.equal(rows.filter((r) => r.events.includes('job.completed')).length, 1, 'completed once');
});
