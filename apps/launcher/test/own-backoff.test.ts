import assert from 'node:assert/strict';
import { test } from 'node:test';
import { captureLog, controlServer, coordinator, launcher, script, settled } from './helpers.js';
import { proxy, type Injected } from './proxy.js';

/*
 * A request the coordinator itself failed (500 internal_error) or refused waits its own backoff:
 * other requests succeeding meanwhile say nothing about it. An outage's retries are woken by the
 * first success instead. Every retry here waits an hour at least: only a wake, or the launcher's
 * exit, brings one within the test's time.
 */

const HOUR = { baseMs: 3_600_000, maxMs: 3_600_000 };
const isPoll = (url: string) => url.startsWith('/launcher/jobs?');
const isHeartbeat = (url: string) => url === '/launcher/heartbeat';

for (const [what, answer] of [
  ['answers internal_error', { status: 500, code: 'internal_error', message: 'internal error (test)' }],
  ['refuses (400 bad_request)', { status: 400, code: 'bad_request', message: 'unknown field (test)' }],
] as const) {
  test(`a poll the coordinator ${what} waits its own backoff: the heartbeats it answers meanwhile do not send it again`, async (t) => {
    const { c } = await coordinator(t);
    const px = await proxy(t, c.url, (req) => isPoll(req.url ?? '') && answer);
    const { log, lines } = captureLog();
    await launcher(t, px.url, {}, { log, retry: HOUR });
    await px.seen(isPoll);
    // three heartbeats sent, so two answered (they go one after the other) while the poll waits
    await px.seen(isHeartbeat, 3);
    assert.equal(px.count(isPoll), 1, 'polled once: not again on each heartbeat answered');
    assert.equal(lines.some((line) => line['msg'] === 'coordinator unreachable; retrying with backoff until it answers'), false, 'not logged as an outage');
  });
}

for (const [what, answer] of [
  ['answered 503 shutting_down (it serves nobody for now)', true],
  ['a CDN answered 522 for (the coordinator behind it is down)', { status: 522, code: 'http_522', message: 'HTTP 522: connection timed out' }],
] as const satisfies ReadonlyArray<readonly [string, Injected]>) {
  test(`a poll ${what} goes again as soon as a heartbeat is answered: an outage ends with the first success`, async (t) => {
    const { c } = await coordinator(t);
    const px = await proxy(t, c.url, (req) => isPoll(req.url ?? '') && answer);
    await launcher(t, px.url, {}, { retry: HOUR });
    // only a heartbeat's answer wakes it within the hour
    await px.seen(isPoll, 2);
    assert.ok(px.count(isHeartbeat) >= 1);
  });
}

test("a deregistration notice that comes on a report's answer while a poll the coordinator failed waits its backoff ends polling at once", { timeout: 60_000 }, async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  let broken = false;
  const px = await proxy(t, c.url, (req) => broken && isPoll(req.url ?? '') && { status: 500, code: 'internal_error', message: 'internal error (test)' });
  const { log, waitFor } = captureLog();
  const { launcher: l, id } = await launcher(t, px.url, {}, { log, retry: HOUR });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'deregistered-while-polls-fail',
    prompt: script([{ hello: true }, { await: true }, { say: 'still here' }, { event: { type: 'result', text: 'done' } }], control),
  });
  const hello = await control.next();
  // the job runs; from now on every poll is failed, and the poller waits its hour
  broken = true;
  await waitFor((line) => line['msg'] === 'coordinator failed the poll; retrying it after a backoff');
  await client.deleteLauncher(id);
  // the job's output goes in a sync of its own, whose answer says the launcher is deregistered
  hello.release();
  await waitFor((line) => line['msg'] === 'deregistered by the coordinator');
  assert.equal(await l.run(), 'deregistered', 'polling ended without waiting out its backoff');
  assert.equal((await settled(client, job.job_id)).status, 'completed');
});

test('a final report the coordinator failed just before a shutdown is sent again in the report drain, not abandoned at the end of its backoff', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  let failed = 0;
  const px = await proxy(t, c.url, (req) =>
    /\/completed$/.test(req.url ?? '') && failed++ === 0 ? { status: 500, code: 'internal_error', message: 'internal error (test)' } : false,
  );
  const { log, waitFor } = captureLog();
  // the drain is far shorter than the report's backoff: only a retry brought forward is in time
  const { launcher: l } = await launcher(t, px.url, {}, { log, retry: HOUR, reportDrainMs: 3_000 });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'failed-then-shutdown',
    prompt: script([{ hello: true }, { await: true }, { event: { type: 'result', text: 'kept' } }], control),
  });
  (await control.next()).release();
  await waitFor((line) => line['job_id'] === job.job_id && line['msg'] === 'coordinator failed the report; retrying it after a backoff');
  assert.equal(await l.shutdown(), 'shutdown');
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'kept');
  assert.equal(px.count((url) => url === `/launcher/jobs/${job.job_id}/completed`), 2, 'sent again once');
});

test('a poll the coordinator failed goes at once, as the new launcher, when a heartbeat finds the coordinator has forgotten the launcher and it registers again', { timeout: 30_000 }, async (t) => {
  const { c } = await coordinator(t);
  let first = '';
  let forget = false;
  const px = await proxy(t, c.url, (req) => {
    const url = req.url ?? '';
    // every poll of the first registration is failed; the next heartbeat after that is told
    // the launcher is unknown (a coordinator restarted without its state)
    if (isPoll(url) && url.includes(`launcher_id=${first}&`)) return { status: 500, code: 'internal_error', message: 'internal error (test)' };
    if (forget && isHeartbeat(url)) {
      forget = false;
      return { status: 401, code: 'launcher_unknown', message: 'launcher unknown (test)' };
    }
    return false;
  });
  const { log, waitFor } = captureLog();
  const { launcher: l, id } = await launcher(t, px.url, {}, { log, retry: HOUR });
  first = id;
  await waitFor((line) => line['msg'] === 'coordinator failed the poll; retrying it after a backoff');
  forget = true;
  await waitFor((line) => line['msg'] === 'registered again under a new id');
  assert.notEqual(l.launcherId, id);
  // within the hour only if the backoff of the poll made as the launcher it was has ended
  await px.seen((url) => isPoll(url) && url.includes(`launcher_id=${l.launcherId!}&`));
});

test('a heartbeat the coordinator fails (500 internal_error) is logged as its answer, not as "coordinator unreachable"', async (t) => {
  const { c } = await coordinator(t);
  let failures = 1;
  const px = await proxy(t, c.url, (req) => isHeartbeat(req.url ?? '') && failures-- > 0 && { status: 500, code: 'internal_error', message: 'internal error (test)' });
  const { log, lines } = captureLog();
  await launcher(t, px.url, {}, { log });
  // the beat after the failed one has been sent: the failure has been handled
  await px.seen(isHeartbeat, 2);
  const said = lines.find((line) => line['msg'] === 'coordinator failed the heartbeat; the next one goes at its time');
  assert.ok(said, JSON.stringify(lines.map((l) => l['msg'])));
  assert.deepEqual([said['level'], said['status'], said['code']], [40, 500, 'internal_error']);
  assert.equal(lines.some((line) => /coordinator unreachable/.test(String(line['msg']))), false, 'not logged as an outage');
});
