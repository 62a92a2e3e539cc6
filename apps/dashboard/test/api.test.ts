import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Api, ApiError, describeError, retryAfterMs } from '../web/lib/api.js';
import { startServer } from './harness.js';

// The page's calls, without a browser: a read the coordinator refuses for now (503 with a short
// Retry-After, here MAX_ANSWER_BYTES_IN_FLIGHT) is sent again after the wait, twice at most.

/** sessionStorage's part that Api uses */
function memoryStorage(): Storage {
  const items = new Map<string, string>();
  return {
    getItem: (k: string) => items.get(k) ?? null,
    setItem: (k: string, v: string) => void items.set(k, v),
    removeItem: (k: string) => void items.delete(k),
  } as Storage;
}

/** Record the status of every answer fetch gets; `onAnswer` runs before the caller sees it. */
function watchFetch(t: { after: (fn: () => void) => void }, onAnswer: (status: number) => void = () => {}): number[] {
  const statuses: number[] = [];
  const original = globalThis.fetch;
  globalThis.fetch = async (...args: Parameters<typeof fetch>) => {
    const res = await original(...args);
    statuses.push(res.status);
    onAnswer(res.status);
    return res;
  };
  t.after(() => (globalThis.fetch = original));
  return statuses;
}

test('a read refused with 503 and Retry-After: 1 is sent again, and the page gets its answer', async (t) => {
  const server = await startServer({ config: { maxAnswerBytes: 1024 * 1024, maxAnswerBytesInFlight: 30_000 } });
  t.after(() => server.close());
  for (const n of ['a', 'b', 'c']) await server.client.createJob({ type: 'start_session', session_name: n, prompt: 'x'.repeat(10_000) });
  // an answer in flight holds all the room
  const releases: (() => void)[] = [];
  await server.app.core.listJobs({ limit: 100 }, (release) => void releases.push(release));
  assert.equal(server.app.core.answers.held, 30_000);
  // it goes out once the page has been refused once
  const statuses = watchFetch(t, (status) => {
    if (status === 503) for (const release of releases.splice(0)) release();
  });
  const api = new Api(memoryStorage(), server.url);
  const page = await api.get<{ jobs: unknown[] }>('/jobs', { limit: 100 });
  assert.equal(page.jobs.length, 3);
  assert.deepEqual(statuses, [503, 200]);
});

test('a read refused three times shows the error; a write is never sent again', async (t) => {
  // room for one pending prompt: a second create is 503 queue_full with a Retry-After
  const server = await startServer({ config: { maxAnswerBytes: 1024 * 1024, maxAnswerBytesInFlight: 10_000, maxQueuedBytes: 15_000 } });
  t.after(() => server.close());
  await server.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x'.repeat(10_000) });
  await server.app.core.listJobs({ limit: 100 }, () => {}); // held for good
  const statuses = watchFetch(t);
  const api = new Api(memoryStorage(), server.url);
  const err = await api.get('/jobs').catch((e: unknown) => e);
  assert.ok(err instanceof ApiError);
  assert.equal(err.status, 503);
  assert.equal(err.code, 'overloaded');
  assert.deepEqual(statuses, [503, 503, 503]);
  // a write refused for now is shown at once: sending it again is the user's call
  statuses.length = 0;
  const refused = await api.post('/jobs', { type: 'start_session', session_name: 'b', prompt: 'y'.repeat(10_000) }).catch((e: unknown) => e);
  assert.ok(refused instanceof ApiError);
  assert.equal(refused.code, 'queue_full');
  assert.deepEqual(statuses, [503]);
});

test('only a 429 or 503 with a Retry-After (seconds or an HTTP date) of 10 s at most is waited for', () => {
  const answer = (status: number, retryAfter?: string) => new Response(null, { status, headers: retryAfter === undefined ? {} : { 'retry-after': retryAfter } });
  assert.equal(retryAfterMs(answer(503, '1')), 1000);
  assert.equal(retryAfterMs(answer(429, '10')), 10_000);
  assert.equal(retryAfterMs(answer(503, '11')), undefined, 'too long: shown, not waited for');
  assert.equal(retryAfterMs(answer(503)), undefined, 'no Retry-After (a proxy, storage_unavailable): shown at once');
  assert.equal(retryAfterMs(answer(503, '')), undefined);
  const now = Date.parse('Wed, 21 Oct 2026 07:28:00 GMT');
  assert.equal(retryAfterMs(answer(503, 'Wed, 21 Oct 2026 07:28:05 GMT'), now), 5000, 'an HTTP date');
  assert.equal(retryAfterMs(answer(503, 'Wed, 21 Oct 2026 07:29:00 GMT'), now), undefined, 'a date too far off');
  assert.equal(retryAfterMs(answer(503, 'soon')), undefined);
  assert.equal(retryAfterMs(answer(500, '1')), undefined, 'only 429 and 503');
});

test("a 403 is explained by the role refused: a reader's, another role's, or the coordinator's own words", () => {
  const refused = (role: string) =>
    new ApiError(403, 'forbidden', `a ${role} token may not call POST /jobs`, { role, allowed_roles: ['admin', 'client'] });
  assert.equal(
    describeError(refused('reader')),
    'forbidden: a reader token may not call POST /jobs (a reader token can only look; acting needs a client token)',
  );
  assert.equal(describeError(refused('launcher')), 'forbidden: a launcher token may not call POST /jobs (this needs a token of role admin or client)');
  const scope = new ApiError(403, 'forbidden', 'session x is outside this agent token\'s sessions', { session_name: 'x' });
  assert.equal(describeError(scope), "forbidden: session x is outside this agent token's sessions");
});

test('an auth problem told before a listener is added is given to it when it is added; a new token clears it', async () => {
  const api = new Api(memoryStorage());
  const unauthorized = () => new Response(JSON.stringify({ error: { code: 'unauthorized', message: 'a bearer token is required' } }), { status: 401 });
  // the event stream's answer, before the page subscribed
  assert.ok(await api.checkAuth(unauthorized(), false));
  const told: (string | null)[] = [];
  const stop = api.onAuthProblem((p) => told.push(p === null ? null : `${p.status} ${p.message}`));
  assert.deepEqual(told, ['401 a bearer token is required']);
  api.setToken('a-new-token');
  assert.deepEqual(told, ['401 a bearer token is required', null]);
  stop();
  // once a token is set, a listener added later is told of nothing
  const later: unknown[] = [];
  api.onAuthProblem((p) => later.push(p));
  assert.deepEqual(later, []);
});
