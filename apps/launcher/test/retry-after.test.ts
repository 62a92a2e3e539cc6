import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { AgentqApiError, AgentqConnectionError } from '@agentq/client';
import { Connectivity, failedByCoordinator } from '../src/connectivity.js';

/** Whether `promise` has settled, without waiting for it. */
async function settledYet(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  await Promise.resolve();
  await Promise.resolve();
  return done;
}

test("the launcher's retries wait at least the coordinator's Retry-After, whatever their own backoff says", async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  const c = new Connectivity(pino({ level: 'silent' }));
  const overloaded = new AgentqApiError(503, 'overloaded', 'busy');
  overloaded.retryAfterMs = 5000;
  c.failed(overloaded, 'poll');
  const signal = new AbortController().signal;
  const fast = { baseMs: 10, maxMs: 10, random: () => 0.5 };

  const waiting = c.backoff(0, signal, fast);
  t.mock.timers.tick(4000);
  assert.equal(await settledYet(waiting), false, 'still waiting after 4 s of a 5 s Retry-After');
  t.mock.timers.tick(1000);
  assert.equal(await settledYet(waiting), true);

  // once the coordinator answers, the hint is gone: back to the loop's own backoff
  c.ok();
  c.failed(new AgentqConnectionError('down'), 'poll');
  const next = c.backoff(0, signal, fast);
  t.mock.timers.tick(10);
  assert.equal(await settledYet(next), true);
});

test("a retry of a request the coordinator itself failed is not woken when another request succeeds; one after an outage is", async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  const c = new Connectivity(pino({ level: 'silent' }));
  const signal = new AbortController().signal;
  const minute = { baseMs: 60_000, maxMs: 60_000, random: () => 1 };

  const own = c.backoff(0, signal, minute, { wakeOnReachable: false });
  const afterOutage = c.backoff(0, signal, minute);
  c.ok();
  assert.equal(await settledYet(afterOutage), true, 'the coordinator answers again: the retry goes at once');
  assert.equal(await settledYet(own), false, 'its own backoff still runs');
  t.mock.timers.tick(60_000);
  assert.equal(await settledYet(own), true);
});

test('which failures the coordinator answered for the request itself (own backoff) and which say it cannot be reached or serves nobody (woken)', () => {
  assert.equal(failedByCoordinator(new AgentqApiError(500, 'internal_error', 'bug')), true);
  assert.equal(failedByCoordinator(new AgentqApiError(502, 'invalid_response', 'the sync answer has no result for this report')), true);
  assert.equal(failedByCoordinator(new AgentqConnectionError('down')), false);
  assert.equal(failedByCoordinator(new AgentqApiError(502, 'http_502', 'a proxy in front of it')), false);
  // a proxy's or a CDN's other 5xx, with no agentq error body: Cloudflare's 521/522 when the
  // coordinator behind it is down, a proxy's own 500 page
  assert.equal(failedByCoordinator(new AgentqApiError(522, 'http_522', 'HTTP 522: connection timed out')), false);
  assert.equal(failedByCoordinator(new AgentqApiError(521, 'http_521', 'HTTP 521: web server is down')), false);
  assert.equal(failedByCoordinator(new AgentqApiError(500, 'http_500', 'HTTP 500: <html>')), false);
  assert.equal(failedByCoordinator(new AgentqApiError(503, 'storage_unavailable', 'no database')), false);
  assert.equal(failedByCoordinator(new AgentqApiError(503, 'overloaded', 'busy')), false);
  assert.equal(failedByCoordinator(new AgentqApiError(429, 'rate_limited', 'slow down')), false);
  assert.equal(failedByCoordinator(new AgentqApiError(408, 'request_timeout', 'body too slow')), false);
});

test('a retry of a request the coordinator itself failed still ends at once when the launcher exits', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  const c = new Connectivity(pino({ level: 'silent' }));
  const exit = new AbortController();
  const own = c.backoff(0, exit.signal, { baseMs: 60_000, maxMs: 60_000, random: () => 1 }, { wakeOnReachable: false });
  assert.equal(await settledYet(own), false);
  exit.abort(new Error('launcher exiting'));
  assert.equal(await settledYet(own), true, 'not at the end of its minute');
});

test('when the launcher leaves, a retry of a request the coordinator failed that would come after it goes now; one that comes before waits its backoff', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  const c = new Connectivity(pino({ level: 'silent' }));
  const signal = new AbortController().signal;
  const own = (ms: number) => c.backoff(0, signal, { baseMs: ms, maxMs: ms, random: () => 1 }, { wakeOnReachable: false });
  const pastTheExit = own(60_000);
  const beforeTheExit = own(5_000);
  c.leavingAt(Date.now() + 15_000);
  assert.equal(await settledYet(pastTheExit), true, 'its backoff would end after the launcher has gone');
  assert.equal(await settledYet(beforeTheExit), false, 'it goes on its own in time');
  t.mock.timers.tick(5_000);
  assert.equal(await settledYet(beforeTheExit), true);
  // once: a retry that waits again afterwards is not woken by the leaving said before it
  const again = own(60_000);
  t.mock.timers.tick(15_000);
  assert.equal(await settledYet(again), false);
});
