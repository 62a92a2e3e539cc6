import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino, type Logger } from 'pino';
import { AgentqApiError, AgentqConnectionError, type AgentqClient } from '@agentq/client';
import { Connectivity } from '../src/connectivity.js';
import type { Registration } from '../src/registration.js';
import { Reporter } from '../src/reporter.js';
import { resultError } from '../src/sync-channel.js';
import { captureLog } from './helpers.js';

/**
 * The reporter on its own, against a stand-in client whose answers the test controls. (The
 * end-to-end behaviour against the real coordinator is in resilience.test.ts.)
 */
function setup(options: { outputQueueMaxBytes?: number; outputBatchBytes?: number } = {}) {
  const sent: Array<{ kind: string; jobId: string; body: Record<string, unknown> }> = [];
  let up = false;
  let wake: () => void = () => {};
  let attempts = 0;
  const answer = (kind: string) => async (jobId: string, body: Record<string, unknown>) => {
    attempts++;
    wake();
    if (!up) throw new AgentqConnectionError('down (test)');
    sent.push({ kind, jobId, body });
    if (kind === 'stopped') throw new AgentqApiError(409, 'invalid_transition', 'refused (test)');
    return { ok: true };
  };
  const client = {
    reportStarted: answer('started'),
    reportOutput: answer('output'),
    reportCompleted: answer('completed'),
    reportFailed: answer('failed'),
    reportStopped: answer('stopped'),
  } as unknown as AgentqClient;
  const log = pino({ level: 'silent' });
  const connectivity = new Connectivity(log);
  const exit = new AbortController();
  const reporter = new Reporter({
    client,
    registration: { id: 'lnch_000000000000' } as Registration,
    connectivity,
    log,
    signal: exit.signal,
    retry: { baseMs: 5, maxMs: 20 },
    outputFlushMs: 1,
    ...options,
  });
  return {
    reporter,
    sent,
    exit,
    bringUp: () => {
      up = true;
      connectivity.ok();
    },
    /** resolves after `n` more delivery attempts (failed ones included) */
    attempts: (n: number) =>
      new Promise<void>((resolve) => {
        const target = attempts + n;
        wake = () => {
          if (attempts >= target) resolve();
        };
      }),
  };
}

test("a job's reports go out in order once the coordinator answers, output first", async () => {
  const { reporter, sent, bringUp, attempts } = setup();
  const started = reporter.send('job_a', { kind: 'started', body: {} });
  reporter.output('job_a', 'one\n');
  reporter.output('job_a', 'two\n');
  const completed = reporter.send('job_a', { kind: 'completed', body: { result: 'r' } }, { last: true });
  await attempts(3); // `started` failed three times; nothing behind it was tried
  assert.equal(sent.length, 0);
  bringUp();
  assert.deepEqual(await started, { ok: true });
  assert.deepEqual(await completed, { ok: true });
  assert.deepEqual(
    sent.map((s) => [s.kind, s.body['offset'] ?? null, s.body['data'] ?? s.body['result'] ?? null]),
    [
      ['started', null, null],
      ['output', 0, 'one\ntwo\n'],
      ['completed', null, 'r'],
    ],
  );
  assert.equal(sent[0]!.body['launcher_id'], 'lnch_000000000000');
  assert.equal(reporter.pending, 0);
});

test('a final 4xx settles the report as refused and the queue moves on', async () => {
  const { reporter, sent, bringUp } = setup();
  bringUp();
  const stopped = await reporter.send('job_b', { kind: 'stopped', body: { signal: null } });
  assert.ok(!stopped.ok && 'refused' in stopped && stopped.refused.code === 'invalid_transition');
  assert.deepEqual(await reporter.send('job_b', { kind: 'failed', body: { error: 'x' } }), { ok: true });
  assert.deepEqual(
    sent.map((s) => s.kind),
    ['stopped', 'failed'],
  );
});

test('during a long outage the oldest queued output is dropped past the cap; offsets stay true', async () => {
  const { reporter, sent, bringUp, attempts } = setup({ outputQueueMaxBytes: 1000, outputBatchBytes: 300 });
  const started = reporter.send('job_c', { kind: 'started', body: {} });
  await attempts(1);
  // ten 300-byte batches queue up behind `started`; only the newest 1000 bytes' worth are kept
  for (let i = 0; i < 10; i++) reporter.output('job_c', `${String(i).repeat(299)}\n`);
  const completed = reporter.send('job_c', { kind: 'completed', body: {} }, { last: true });
  bringUp();
  await started;
  await completed;
  assert.deepEqual(
    sent.map((s) => [s.kind, s.body['offset'] ?? null, String(s.body['data'] ?? '').slice(0, 1)]),
    [
      ['started', null, ''],
      ['output', 2100, '7'],
      ['output', 2400, '8'],
      ['output', 2700, '9'],
      ['completed', null, ''],
    ],
  );
});

test("the room a job's output queue has for new output without dropping any of it: its cap less the batch at its head and the output not yet batched", async () => {
  const { reporter, sent, bringUp, attempts } = setup({ outputQueueMaxBytes: 1000, outputBatchBytes: 300 });
  assert.equal(reporter.outputRoom('job_r'), 1000);
  reporter.output('job_r', 'a'.repeat(300)); // a batch, at once on its way (the queue's head)
  await attempts(1);
  reporter.output('job_r', 'b'.repeat(300)); // a batch waiting behind it: dropped to make room
  reporter.output('job_r', 'c'.repeat(50)); // not yet batched
  assert.equal(reporter.outputRoom('job_r'), 1000 - 300 - 50);
  // that much more drops only the waiting batch
  reporter.output('job_r', 'd'.repeat(650));
  const completed = reporter.send('job_r', { kind: 'completed', body: {} }, { last: true });
  bringUp();
  await completed;
  assert.equal(sent.filter((s) => s.kind === 'output').map((s) => String(s.body['data'])).join(''), `${'a'.repeat(300)}${'c'.repeat(50)}${'d'.repeat(650)}`);
});

test('a report waiting for a re-registration when the launcher exits is abandoned, not refused', async () => {
  let renewing: () => void = () => {};
  const renewCalled = new Promise<void>((resolve) => (renewing = resolve));
  const client = {
    reportCompleted: async () => {
      throw new AgentqApiError(401, 'launcher_unknown', 'unknown launcher (test)');
    },
  } as unknown as AgentqClient;
  const registration = {
    id: 'lnch_000000000000',
    // registering again does not succeed before the exit
    renew: (_staleId: string, signal: AbortSignal) =>
      new Promise<void>((_resolve, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
        renewing();
      }),
  } as unknown as Registration;
  const log = pino({ level: 'silent' });
  const exit = new AbortController();
  const reporter = new Reporter({ client, registration, connectivity: new Connectivity(log), log, signal: exit.signal });
  const completed = reporter.send('job_d', { kind: 'completed', body: {} }, { last: true });
  await renewCalled;
  exit.abort(new Error('launcher exiting (test)'));
  const outcome = await completed;
  assert.ok(!outcome.ok && 'abandoned' in outcome, `abandoned, got ${JSON.stringify(outcome)}`);
});

test("a stop answered for a job that ended here, refused as too late (409), is said at info: it is the expected answer, not a fault", async () => {
  const { log, lines } = captureLog();
  const refuse = async () => {
    throw new AgentqApiError(409, 'invalid_transition', 'job job_0123456789ab is completed (test)');
  };
  const client = { reportStopped: refuse } as unknown as AgentqClient;
  const reporter = new Reporter({
    client,
    registration: { id: 'lnch_000000000000' } as Registration,
    connectivity: new Connectivity(log),
    log,
    signal: new AbortController().signal,
    retry: { baseMs: 5, maxMs: 20 },
  });
  const late = await reporter.send('job_0123456789ab', { kind: 'stopped', body: { signal: null } }, { last: true, mayBeLate: true });
  assert.ok('refused' in late);
  const other = await reporter.send('job_0123456789ac', { kind: 'stopped', body: { signal: null } }, { last: true });
  assert.ok('refused' in other);
  const said = (jobId: string) => lines.filter((l) => l['job_id'] === jobId && l['report'] === 'stopped').map((l) => [l['level'], l['msg']]);
  assert.deepEqual(said('job_0123456789ab'), [[30, 'the job had ended at the coordinator already; report not needed']]);
  assert.deepEqual(said('job_0123456789ac'), [[40, 'coordinator refused the report; not retrying it']]);
});

test("a report a sync answered internal_error (one that failed alone at the coordinator) is sent again with backoff, not refused", async () => {
  const log = pino({ level: 'silent' });
  const connectivity = new Connectivity(log);
  const backoffs: number[] = [];
  const backoff = connectivity.backoff.bind(connectivity);
  connectivity.backoff = (attempt, signal, options) => {
    backoffs.push(attempt);
    return backoff(attempt, signal, options);
  };
  let tries = 0;
  const reporter = new Reporter({
    client: {} as AgentqClient,
    registration: { id: 'lnch_000000000000' } as Registration,
    connectivity,
    log,
    signal: new AbortController().signal,
    retry: { baseMs: 5, maxMs: 20 },
    outputFlushMs: 1,
    // the sync channel's transport: the report's result in a 200 sync answer, as its error
    transport: async (jobId, report) => {
      if (++tries < 3) throw resultError({ job_id: jobId, kind: report.kind as 'completed', ok: false, error: { code: 'internal_error', message: 'internal error; see the coordinator log' } });
    },
  });
  assert.deepEqual(await reporter.send('job_c', { kind: 'completed', body: { result: 'r' } }), { ok: true });
  assert.equal(tries, 3);
  assert.deepEqual(backoffs, [0, 1], 'each retry waited its backoff');
});

/**
 * A reporter whose transport throws `first` once, then takes every report; `tries` counts the
 * sends. Its retries wait an hour at least: only a wake brings one within a test's time.
 */
function failingOnce(log: Logger, connectivity: Connectivity, signal: AbortSignal, first: Error) {
  const sent = {
    tries: 0,
    reporter: new Reporter({
      client: {} as AgentqClient,
      registration: { id: 'lnch_000000000000' } as Registration,
      connectivity,
      log,
      signal,
      retry: { baseMs: 2 * 3_600_000, maxMs: 2 * 3_600_000 },
      transport: async () => {
        if (++sent.tries === 1) throw first;
      },
    }),
  };
  return sent;
}

test('a report retried after a connection error goes out as soon as another request succeeds, not at the end of its backoff', async () => {
  const { log, waitFor } = captureLog();
  const connectivity = new Connectivity(log);
  const sent = failingOnce(log, connectivity, new AbortController().signal, new AgentqConnectionError('down (test)'));
  const outcome = sent.reporter.send('job_w', { kind: 'completed', body: {} });
  // said as it goes into its backoff
  await waitFor((line) => line['msg'] === 'report not delivered; will retry');
  connectivity.ok(); // a poll or a heartbeat was answered
  assert.deepEqual(await outcome, { ok: true });
  assert.equal(sent.tries, 2);
});

// a CDN in front of the coordinator answers 52x (no agentq error body) while the coordinator is
// down: that is an outage, not the coordinator failing the report, and it was taken for one
test('a report a CDN answered 522 for a coordinator that is down goes out as soon as another request succeeds', async (t) => {
  const { log, waitFor } = captureLog();
  const connectivity = new Connectivity(log);
  const exit = new AbortController();
  t.after(() => exit.abort(new Error('test over')));
  const sent = failingOnce(log, connectivity, exit.signal, new AgentqApiError(522, 'http_522', 'HTTP 522: <!DOCTYPE html> connection timed out'));
  const outcome = sent.reporter.send('job_cdn', { kind: 'completed', body: {} });
  const said = await waitFor((line) => line['msg'] === 'report not delivered; will retry' || line['msg'] === 'coordinator failed the report; retrying it after a backoff');
  assert.equal(said['msg'], 'report not delivered; will retry', 'a retry after an outage');
  assert.equal(connectivity.isDown, true, 'the outage is logged as one');
  connectivity.ok(); // the coordinator is back: a poll or a heartbeat was answered
  assert.deepEqual(await outcome, { ok: true });
  assert.equal(sent.tries, 2);
});
