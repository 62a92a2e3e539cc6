import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { AgentqApiError, AgentqConnectionError } from '@agentq/client';
import { Connectivity } from '../src/connectivity.js';

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
