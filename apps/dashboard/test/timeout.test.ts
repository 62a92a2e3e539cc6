import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ReadTimeout, withTimeout } from '../web/lib/timeout.js';

// withTimeout without a browser: the page's reads that give up after a while.

test('a call given a signal that was aborted already is not made, with or without a time limit', async () => {
  const ac = new AbortController();
  ac.abort();
  for (const ms of [undefined, 60_000]) {
    // as fetch does: a call with an aborted signal fails at once
    const call = async (signal?: AbortSignal) => {
      signal?.throwIfAborted();
      return 'made';
    };
    await assert.rejects(withTimeout(ms, ac.signal, 'GET /x', call), { name: 'AbortError' }, `ms ${ms}`);
  }
});

test('a call that does not answer in time fails with ReadTimeout, its signal aborted', async () => {
  let signalled!: AbortSignal;
  await assert.rejects(
    withTimeout(1, undefined, 'GET /x', (signal) => {
      signalled = signal!;
      return new Promise<never>((_, reject) => signal!.addEventListener('abort', () => reject(signal!.reason)));
    }),
    ReadTimeout,
  );
  assert.ok(signalled.aborted);
});
