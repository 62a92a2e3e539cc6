import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import type { AgentqClient } from '@agentq/client';
import type { RegisterLauncherResponse } from '@agentq/protocol';
import { Connectivity } from '../src/connectivity.js';
import { Registration } from '../src/registration.js';
import { captureLog, coordinator, launcher } from './helpers.js';
import { proxy } from './proxy.js';

/**
 * Re-registration on its own, against a stand-in client whose `register` answers only when the
 * test says so. (The launcher recovering from a coordinator that lost its state, end to end, is
 * in resilience.test.ts.)
 */
async function setup() {
  const calls: Array<{ signal: AbortSignal; answer: (id: string) => void }> = [];
  let arrived: () => void = () => {};
  const client = {
    register: (_body: unknown, o: { signal: AbortSignal }) =>
      new Promise<RegisterLauncherResponse>((resolve, reject) => {
        o.signal.addEventListener('abort', () => reject(o.signal.reason), { once: true });
        calls.push({
          signal: o.signal,
          answer: (id) =>
            resolve({
              launcher_id: id,
              poll_endpoint: '/launcher/jobs',
              poll_timeout_seconds: 30,
              heartbeat_interval_seconds: 10,
              claim_lease_seconds: 60,
            }),
        });
        arrived();
      }),
  } as unknown as AgentqClient;
  const log = pino({ level: 'silent' });
  const registration = new Registration({
    client,
    log,
    connectivity: new Connectivity(log),
    body: () => ({ hostname: 'test-host', executor_type: 'fake', max_jobs: 1 }),
  });
  const first = registration.register(new AbortController().signal);
  calls[0]!.answer('lnch_000000000001');
  await first;
  return {
    registration,
    calls,
    /** resolves when the client has received its `n`th register call */
    call: (n: number) =>
      new Promise<(typeof calls)[number]>((resolve) => {
        const check = () => {
          if (calls.length >= n) resolve(calls[n - 1]!);
        };
        arrived = check;
        check();
      }),
  };
}

test("a re-registration shared by two loops: one caller's abort does not fail the other's wait", async () => {
  const { registration, call } = await setup();
  const poller = new AbortController();
  const reporter = new AbortController();
  const polling = registration.renew('lnch_000000000001', poller.signal);
  const reporting = registration.renew('lnch_000000000001', reporter.signal);
  const request = await call(2);

  // the poller's drain ends: it stops waiting, with its own abort reason
  poller.abort(new Error('launcher exiting (test)'));
  await assert.rejects(polling, /launcher exiting \(test\)/);
  assert.equal(request.signal.aborted, false, 'the shared registration goes on for the reporter');

  request.answer('lnch_000000000002');
  await reporting;
  assert.equal(registration.id, 'lnch_000000000002');
});

test('a re-registration nobody waits for any more is abandoned; the next renew starts afresh', async () => {
  const { registration, calls, call } = await setup();
  const a = new AbortController();
  const b = new AbortController();
  const first = registration.renew('lnch_000000000001', a.signal);
  const second = registration.renew('lnch_000000000001', b.signal);
  const request = await call(2);
  a.abort(new Error('a gone'));
  b.abort(new Error('b gone'));
  await assert.rejects(first, /a gone/);
  await assert.rejects(second, /b gone/);
  assert.equal(request.signal.aborted, true, 'the registration is not retried for nobody');

  const again = registration.renew('lnch_000000000001', new AbortController().signal);
  const retry = await call(3);
  assert.equal(calls.length, 3);
  retry.answer('lnch_000000000003');
  await again;
  assert.equal(registration.id, 'lnch_000000000003');
});

test('a caller whose signal is already aborted does not start a registration', async () => {
  const { registration, calls } = await setup();
  const gone = new AbortController();
  gone.abort(new Error('already exiting'));
  await assert.rejects(registration.renew('lnch_000000000001', gone.signal), /already exiting/);
  assert.equal(calls.length, 1);
});

for (const [what, answer, msg] of [
  [
    'fails (500 internal_error)',
    { status: 500, code: 'internal_error', message: 'internal error (test)' },
    'coordinator failed the registration; retrying it after a backoff',
  ],
  [
    'answers 503 storage_unavailable',
    { status: 503, code: 'storage_unavailable', message: 'the store does not answer (test)' },
    'coordinator unavailable (it answered, refusing requests for now); retrying with backoff until it serves them',
  ],
] as const) {
  test(`a registration the coordinator ${what} is logged as its answer, not as "coordinator unreachable", and retried until it registers`, async (t) => {
    const { c } = await coordinator(t);
    let refusals = 2;
    const px = await proxy(t, c.url, (req) => req.url === '/launcher/register' && refusals-- > 0 && answer);
    const { log, lines } = captureLog();
    const { id } = await launcher(t, px.url, {}, { log });
    assert.match(id, /^lnch_/);
    assert.equal(px.count((url) => url === '/launcher/register'), 3, 'retried after each answer, until one registered');
    assert.equal(lines.some((line) => /coordinator unreachable/.test(String(line['msg']))), false, 'not logged as unreachable');
    const said = lines.filter((line) => line['msg'] === msg);
    assert.ok(said.length >= 1, JSON.stringify(lines.map((l) => l['msg'])));
    assert.deepEqual([said[0]!['level'], said[0]!['status'], said[0]!['code']], [40, answer.status, answer.code]);
  });
}
