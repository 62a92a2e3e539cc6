import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AgentqClient } from '@agentq/client';
import { called, fakeLauncher, holdAppends, rejectsWith, start, startTest, type FakeLauncher } from './helpers.js';
import { freshDatabaseUrl, pgStatementsDuring } from './pg-server.js';

// the test's own bound, for a wake-up that never comes: well over what a test takes on a loaded
// CI machine (with both cores busy, events.test's flood took 22 s of its 30; tests of a second
// took 5 to 10)
const opts = { timeout: 120_000 };
const LONG = 300_000;

/** A running job on a fresh fake launcher, and a way to send its output. */
async function runningJob(client: AgentqClient, name = 'talker') {
  const l = await fakeLauncher(client);
  const job = await start(client, name);
  await l.take();
  await l.started(job.job_id);
  const send = (offset: number, data: string) => client.reportOutput(job.job_id, { launcher_id: l.id, offset, data });
  return { l, job, send };
}

test('output batches are appended in order; a retried or overlapping batch is not stored twice', opts, async (t) => {
  const { client } = await startTest(t);
  const { job, send } = await runningJob(client);
  assert.deepEqual(await send(0, 'hello '), { ok: true });
  await send(6, 'world');
  await send(6, 'world'); // the launcher retried after a lost answer
  await send(8, 'rld!!'); // overlaps the stored bytes: only '!!' is new
  const out = await client.getOutput(job.job_id);
  assert.equal(out.output, 'hello world!!');
  assert.equal(out.total_bytes, 13);
  assert.equal(out.offset, 0);
  assert.equal(out.next_offset, 13);
  assert.equal(out.truncated, false);
  assert.equal((await client.getJob(job.job_id)).output_bytes, 13);
});

test('the default read is a tail bounded to 16 KiB with the total size; tail_bytes sets the bound', opts, async (t) => {
  const { client } = await startTest(t);
  const { job, send } = await runningJob(client);
  const line = (i: number) => `line ${String(i).padStart(5, '0')}\n`; // 11 bytes
  const all = Array.from({ length: 2000 }, (_, i) => line(i)).join(''); // 22 000 bytes
  await send(0, all.slice(0, 10_000));
  await send(10_000, all.slice(10_000));

  const preview = await client.getOutput(job.job_id);
  assert.equal(preview.total_bytes, 22_000);
  assert.equal(Buffer.byteLength(preview.output), 16 * 1024);
  assert.equal(preview.offset, 22_000 - 16 * 1024);
  assert.ok(all.endsWith(preview.output));
  assert.equal(preview.truncated, false, 'everything is still held; the preview is just bounded');

  const tail = await client.getOutput(job.job_id, { tail_bytes: 22 });
  assert.equal(tail.output, line(1998) + line(1999));
  assert.equal(tail.total_bytes, 22_000);

  const head = await client.getOutput(job.job_id, { offset: 0, limit_bytes: 11 });
  assert.equal(head.output, line(0));
  assert.equal(head.next_offset, 11);
});

test('the per-job cap drops the oldest output and marks the job truncated', opts, async (t) => {
  const { client } = await startTest(t, { outputMaxBytes: 100 });
  const { job, send } = await runningJob(client);
  await send(0, 'a'.repeat(60));
  await send(60, 'b'.repeat(60));
  const out = await client.getOutput(job.job_id, { offset: 0 });
  assert.equal(out.truncated, true);
  assert.equal(out.total_bytes, 120);
  assert.equal(out.retained_bytes, 100);
  assert.equal(out.offset, 20, 'the first 20 bytes were dropped; the read starts at the oldest kept byte');
  assert.equal(out.output, 'a'.repeat(40) + 'b'.repeat(60));
  assert.equal((await client.getOutput(job.job_id)).output, out.output);
});

test('a follow read (offset + wait_ms) parked at the end is woken by new output', opts, async (t) => {
  const { client, c } = await startTest(t);
  const { job, send } = await runningJob(client);
  await send(0, 'first\n');
  const isParked = called(c.core, 'readOutput');
  const reading = client.getOutput(job.job_id, { offset: 6, wait_ms: LONG });
  await isParked;
  await send(6, 'second\n');
  const out = await reading;
  assert.equal(out.output, 'second\n');
  assert.equal(out.offset, 6);
  assert.equal(out.next_offset, 13);
  assert.equal(out.terminal, false);
});

test('a follow read parked at the end returns when the job ends', opts, async (t) => {
  const { client, c } = await startTest(t);
  const { l, job } = await runningJob(client);
  const isParked = called(c.core, 'readOutput');
  const reading = client.getOutput(job.job_id, { offset: 0, wait_ms: LONG });
  await isParked;
  await l.completed(job.job_id);
  const out = await reading;
  assert.equal(out.terminal, true);
  assert.equal(out.status, 'completed');
  assert.equal(out.output, '');
});

test('a follow read with nothing new answers the empty read after wait_ms', opts, async (t) => {
  const { client } = await startTest(t);
  const { job, send } = await runningJob(client);
  await send(0, 'x');
  const out = await client.getOutput(job.job_id, { offset: 1, wait_ms: 30 });
  assert.equal(out.output, '');
  assert.equal(out.next_offset, 1);
});

test('reads never split a multibyte UTF-8 character', opts, async (t) => {
  const { client } = await startTest(t, { outputMaxBytes: 8 });
  const { job, send } = await runningJob(client);
  await send(0, '€€'); // 6 bytes: E2 82 AC E2 82 AC
  // a tail of 4 bytes would start inside the first €: it starts at the next character
  const tail = await client.getOutput(job.job_id, { tail_bytes: 4 });
  assert.equal(tail.output, '€');
  assert.equal(tail.offset, 3);
  // a limit that ends inside a character stops before it
  const head = await client.getOutput(job.job_id, { offset: 0, limit_bytes: 4 });
  assert.equal(head.output, '€');
  assert.equal(head.next_offset, 3);
  // a limit smaller than the next character answers that character whole: a reader moves on
  for (const [offset, limit_bytes] of [[0, 1], [3, 2], [1, 1]] as const) {
    const small = await client.getOutput(job.job_id, { offset, limit_bytes, wait_ms: 60_000 });
    assert.deepEqual([small.output, small.offset, small.next_offset], ['€', offset === 0 ? 0 : 3, offset === 0 ? 3 : 6], `${offset}/${limit_bytes}`);
  }
  // an offset inside a character moves to the next one
  assert.equal((await client.getOutput(job.job_id, { offset: 1 })).offset, 3);
  // the cap (8 bytes) drops a partial character at the front: never shown as garbage
  await send(6, 'é'); // 2 bytes, 8 in all... then one more byte pushes the cut inside a €
  await send(8, 'z');
  const capped = await client.getOutput(job.job_id, { offset: 0 });
  assert.equal(capped.truncated, true);
  assert.equal(capped.output, '€éz');
  assert.equal(capped.offset, 3);
  assert.ok(!capped.output.includes('\uFFFD'));
});

test('output from a launcher that does not hold the job is 409; for an unknown job 404', opts, async (t) => {
  const { client } = await startTest(t);
  const { job } = await runningJob(client);
  const stranger: FakeLauncher = await fakeLauncher(client, 'stranger');
  await rejectsWith(
    client.reportOutput(job.job_id, { launcher_id: stranger.id, offset: 0, data: 'x' }),
    409,
    'job_owned_by_other_launcher',
  );
  await rejectsWith(
    client.reportOutput('job_000000000000', { launcher_id: stranger.id, offset: 0, data: 'x' }),
    404,
    'job_not_found',
  );
  await rejectsWith(client.getOutput('job_000000000000'), 404, 'job_not_found');
  assert.equal((await client.getOutput(job.job_id)).total_bytes, 0);
});

test('a batch that starts past the end (the coordinator lost output) keeps the launcher offsets and marks the gap as dropped', opts, async (t) => {
  const { client } = await startTest(t);
  const { job, send } = await runningJob(client);
  await send(0, 'abc');
  await send(5, 'fgh');
  const out = await client.getOutput(job.job_id);
  assert.equal(out.output, 'fgh', 'what came before the gap is no longer shown as contiguous');
  assert.equal(out.offset, 5);
  assert.equal(out.total_bytes, 8);
  assert.equal(out.truncated, true);
  await send(8, 'ij');
  await send(6, 'ghij'); // a retry that overlaps is stored once
  const after = await client.getOutput(job.job_id, { offset: 5 });
  assert.equal(after.output, 'fghij');
  assert.equal(after.next_offset, 10);
});

test('a parameter of the other way to read is refused with 400 naming it, not ignored', opts, async (t) => {
  const { client } = await startTest(t);
  const { job, send } = await runningJob(client);
  await send(0, 'hello\n');
  // wait_ms without offset would answer at once (a follower would spin); limit_bytes would not limit
  for (const [query, field] of [
    [{ wait_ms: 1000 }, 'wait_ms'],
    [{ limit_bytes: 2 }, 'limit_bytes'],
    [{ offset: 0, tail_bytes: 2 }, 'tail_bytes'],
  ] as const) {
    const details = await rejectsWith(client.getOutput(job.job_id, query), 400, 'validation_failed');
    assert.deepEqual([details.field, details.in], [field, 'querystring'], JSON.stringify(query));
  }
  assert.equal((await client.getOutput(job.job_id, { tail_bytes: 2 })).output, 'o\n');
  assert.equal((await client.getOutput(job.job_id, { offset: 0, limit_bytes: 2, wait_ms: 0 })).output, 'he');
});

test('a batch of a launcher replaced while it was on its way is refused, not stored in the run of the launcher that took the job again', opts, async (t) => {
  const { c, client } = await startTest(t);
  const host = { hostname: 'box', executor_type: 'test', host_id: 'h_output-race' };
  const old = await client.register(host);
  const job = await start(client, 'moved');
  assert.equal((await client.poll(old.launcher_id, { holdSeconds: 1 }))?.job?.job_id, job.job_id);

  // the old life's batch passed the check of its job, and is about to be stored
  const held = holdAppends(c.core.store);
  const late = client.reportOutput(job.job_id, { launcher_id: old.launcher_id, offset: 0, data: 'from the old life' });
  late.catch(() => undefined);
  await held.reached;
  // meanwhile the launcher restarted: the job goes back to the queue and its new life takes it
  const fresh = await client.register({ ...host, replaces: [old.launcher_id] });
  assert.equal((await client.poll(fresh.launcher_id, { holdSeconds: 1 }))?.job?.job_id, job.job_id);
  held.go();

  await rejectsWith(late, 401, 'launcher_unknown');
  assert.equal((await client.getOutput(job.job_id)).total_bytes, 0);
  await client.reportOutput(job.job_id, { launcher_id: fresh.launcher_id, offset: 0, data: 'from the new life' });
  assert.equal((await client.getOutput(job.job_id)).output, 'from the new life');
});

// Each batch was checked in a transaction of its own (its launcher, its job and its session read
// and locked) before the one that stores it, which checks the holder again under the job's lock:
// on PostgreSQL, the store's check is the only one now, and a refusal's reason is looked for after.
test('PostgreSQL: a batch of output reads its job and launcher once, in the transaction that stores it; a refusal still says why (409, 404, 401)', opts, async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  // no periodic sweep: its statements would be recorded with the batch's
  const { c, client } = await startTest(t, { databaseUrl: url, sweepIntervalMs: 600_000 });
  const { job, send } = await runningJob(client);
  await send(0, 'first');
  const statements = await pgStatementsDuring(async () => {
    await send(5, ' second');
  });
  assert.equal((await client.getOutput(job.job_id)).output, 'first second');
  assert.equal(statements.filter((sql) => sql === 'BEGIN').length, 1, `one transaction: ${statements.join('; ')}`);
  assert.deepEqual(
    statements.filter((sql) => /\bFROM (jobs|launchers)\b/.test(sql)),
    ['SELECT output_bytes, launcher_id FROM jobs WHERE id = $1 FOR UPDATE', "SELECT 1 FROM launchers WHERE id = $1 AND status <> 'stale'"],
    'the job and its launcher read once, by the write',
  );

  const stranger = await fakeLauncher(client, 'stranger');
  await rejectsWith(client.reportOutput(job.job_id, { launcher_id: stranger.id, offset: 12, data: 'x' }), 409, 'job_owned_by_other_launcher');
  await rejectsWith(client.reportOutput('job_000000000000', { launcher_id: stranger.id, offset: 0, data: 'x' }), 404, 'job_not_found');
  await rejectsWith(client.reportOutput(job.job_id, { launcher_id: 'l_000000000000', offset: 12, data: 'x' }), 401, 'launcher_unknown');
  // and in a report-and-poll request, each report answered as its own request would be
  const { results } = await client.sync({
    launcher_id: stranger.id,
    capacity: 0,
    reports: [
      { kind: 'output', job_id: job.job_id, offset: 12, data: 'x' },
      { kind: 'output', job_id: 'job_000000000000', offset: 0, data: 'x' },
    ],
  });
  assert.deepEqual(
    results.map((r) => r.error?.code ?? 'ok'),
    ['job_owned_by_other_launcher', 'job_not_found'],
  );
  assert.equal((await client.getOutput(job.job_id)).output, 'first second', 'nothing refused was stored');
  assert.equal(c.core.store.kind, 'postgres');
});

// On PostgreSQL the store's own write became a batch's only check: its lookup of a job id holding
// the NUL character (which no stored id has, and PostgreSQL text cannot hold) failed in the
// database, and the batch was answered 500 instead of 404 (the request's own check, which ran
// first, finds no such job).
test('a batch for a job id with the NUL character in it is refused as a job not found (404), alone and in a report-and-poll request', opts, async (t) => {
  const { client } = await startTest(t);
  const { l } = await runningJob(client);
  await rejectsWith(client.reportOutput('job_\u0000', { launcher_id: l.id, offset: 0, data: 'x' }), 404, 'job_not_found');
  const { results } = await client.sync({ launcher_id: l.id, capacity: 0, reports: [{ kind: 'output', job_id: 'job_\u0000', offset: 0, data: 'x' }] });
  assert.deepEqual(results.map((r) => r.error?.code ?? 'ok'), ['job_not_found']);
});
