import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { test, type TestContext } from 'node:test';
import {
  AgentqClient,
  AgentqConnectionError,
  AgentqUsageError,
  Endpoints,
  isRetryable,
  splitUrls,
} from '@agentq/client';
import { startTest } from './helpers.js';

/*
 * The client with several coordinator URLs (`--url a,b`): it moves to the next when one cannot be
 * reached. What may be sent again at once: a call whose connection was never made, or one that
 * changes nothing (a GET, or `POST /jobs/wait`). A
 * POST that may have reached a coordinator is not repeated by the client (its caller decides),
 * but the next call goes elsewhere.
 */

async function listen(t: TestContext, server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}`;
}

/**
 * A URL where nothing listens (connections are refused). A port found free and closed again is
 * free for whatever listens next (a test file running beside this one, on port 0): the port stays
 * held on 127.0.0.1 until the test ends (no other server can bind it there, on 0.0.0.0 or on ::),
 * and the URL names 127.0.0.2, another loopback address (Linux routes all of 127/8 to the loopback
 * interface), where nothing listens on it.
 */
async function deadUrl(t: TestContext): Promise<string> {
  const url = new URL(await listen(t, createServer()));
  url.hostname = '127.0.0.2';
  return url.origin;
}

/** A server that accepts connections and drops them as soon as a request arrives. */
async function droppingUrl(t: TestContext): Promise<string> {
  const sockets = new Set<import('node:net').Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.once('data', () => s.destroy());
  });
  t.after(() => {
    for (const s of sockets) s.destroy();
  });
  return listen(t, server);
}

/** A server that takes connections and never answers; resolves `arrived` when a request comes. */
async function silentUrl(t: TestContext): Promise<{ url: string; arrived: Promise<void> }> {
  let arrive!: () => void;
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  const sockets = new Set<import('node:net').Socket>();
  const url = await listen(
    t,
    createServer((s) => {
      sockets.add(s);
      s.once('data', () => arrive());
    }),
  );
  t.after(() => {
    for (const s of sockets) s.destroy();
  });
  return { url, arrived };
}

test('splitUrls and Endpoints: a comma list, trimmed; a failure moves to the next URL, round robin', () => {
  assert.deepEqual(splitUrls(' http://a:1/, http://b:2 ,,http://c:3'), ['http://a:1', 'http://b:2', 'http://c:3']);
  const e = new Endpoints('http://a:1,http://b:2');
  assert.equal(e.current, 'http://a:1');
  assert.equal(e.failed('http://a:1'), 'http://b:2');
  assert.equal(e.failed('http://a:1'), 'http://b:2', 'a late failure of a URL already left changes nothing');
  assert.equal(e.failed('http://b:2'), 'http://a:1');
  assert.equal(new Endpoints('http://only:1').failed('http://only:1'), 'http://only:1');
  assert.throws(() => new Endpoints(' , '), /no coordinator URL/);
});

test('a URL that refuses connections is skipped at once, for every kind of call', async (t) => {
  const { c } = await startTest(t);
  const client = new AgentqClient({ url: `${await deadUrl(t)},${c.url}` });
  t.after(() => client.destroy());
  const job = await client.createJob({ type: 'start_session', session_name: 'failover', prompt: 'p' });
  assert.equal(job.status, 'pending');
  assert.equal(client.url, c.url, 'it stays on the URL that answered');
  assert.equal((await client.health()).status, 'ok');
});

test('a coordinator that drops requests: a GET goes to the next URL; a POST fails, and the next call goes there', async (t) => {
  const { c } = await startTest(t);
  const dropping = await droppingUrl(t);
  const reader = new AgentqClient({ url: `${dropping},${c.url}` });
  // no create retries: the POST whose answer was lost is the caller's to see
  const writer = new AgentqClient({ url: `${dropping},${c.url}`, createRetries: 0 });
  t.after(() => Promise.all([reader.destroy(), writer.destroy()]));
  assert.equal((await reader.health()).status, 'ok');
  assert.equal(reader.url, c.url);

  await assert.rejects(writer.createJob({ type: 'start_session', session_name: 'maybe', prompt: 'p' }), AgentqConnectionError);
  assert.equal(writer.url, c.url, 'moved on for the next call');
  const job = await writer.createJob({ type: 'start_session', session_name: 'maybe', prompt: 'p' });
  assert.equal(job.session_name, 'maybe');
});

test('POST /jobs/wait, which only reads, goes to the next URL when a coordinator drops it (agentq wait)', async (t) => {
  const { c } = await startTest(t);
  const creator = new AgentqClient({ url: c.url });
  const client = new AgentqClient({ url: `${await droppingUrl(t)},${c.url}` });
  t.after(() => Promise.all([creator.destroy(), client.destroy()]));
  const job = await creator.createJob({ type: 'start_session', session_name: 'waited', prompt: 'p' });
  const answer = await client.waitJobs({ job_ids: [job.job_id], timeout_ms: 0 });
  assert.deepEqual(
    answer.jobs.map((j) => j.job_id),
    [job.job_id],
  );
  assert.equal(client.url, c.url);
});

test('createJob whose answer a coordinator drops is sent again, with its Idempotency-Key, to the next URL: one job', async (t) => {
  const { c } = await startTest(t);
  const dropping = await droppingUrl(t);
  const client = new AgentqClient({ url: `${dropping},${c.url}` });
  t.after(() => client.destroy());
  const job = await client.createJob({ type: 'start_session', session_name: 'retried', prompt: 'p' });
  assert.equal(client.url, c.url);
  assert.equal(job.session_name, 'retried');
  const { jobs } = await client.listJobs({ session_name: 'retried' });
  assert.deepEqual(jobs.map((j) => j.job_id), [job.job_id]);
});

test('with one URL nothing changes: an unreachable coordinator is an AgentqConnectionError', async (t) => {
  const client = new AgentqClient({ url: await deadUrl(t) });
  t.after(() => client.destroy());
  await assert.rejects(client.health(), AgentqConnectionError);
});

test('destroy() cuts a create in flight: it fails as closed, not sent again to the next URL; no call leaves after it', async (t) => {
  const { c, client: reader } = await startTest(t);
  // a coordinator that takes the request and never answers: the create is in flight there
  const { url: holding, arrived: inFlight } = await silentUrl(t);
  const client = new AgentqClient({ url: `${holding},${c.url}` });
  const create = client.createJob({ type: 'start_session', session_name: 'cut', prompt: 'p' });
  const outcome = create.then(
    () => 'created',
    (err: unknown) => err,
  );
  await inFlight;
  await client.destroy();
  const err = await outcome;
  assert.ok(err instanceof Error && !(err instanceof AgentqConnectionError), `not a lost answer: ${String(err)}`);
  assert.match(err.message, /client is closed/);
  assert.equal(client.url, holding, 'the coordinator did nothing wrong: no failover');
  await assert.rejects(client.health(), /client is closed/);
  assert.deepEqual((await reader.listJobs({ session_name: 'cut' })).jobs, [], 'no job was created after destroy()');
});

test('a token that cannot be sent is an AgentqUsageError at once: no failover, no create retry', async (t) => {
  const { c } = await startTest(t);
  const other = await deadUrl(t);
  for (const token of ['tok\u201d', 'tok\r\nx-injected: 1']) {
    const client = new AgentqClient({ url: `${c.url},${other}`, token, createRetryBackoff: { baseMs: 1, maxMs: 1 } });
    t.after(() => client.destroy());
    const create = await client
      .createJob({ type: 'start_session', session_name: 'never', prompt: 'p' })
      .catch((e: unknown) => e);
    assert.ok(create instanceof AgentqUsageError, String(create));
    assert.equal(isRetryable(create), false);
    await assert.rejects(client.health(), AgentqUsageError);
    assert.equal(client.url, c.url, 'the coordinator is not taken for unreachable');
  }
});

test('an event stream aborted before its answer rejects with the abort reason, and causes no failover', async (t) => {
  const { c } = await startTest(t);
  // a coordinator slow to answer: the stream is still waiting for its headers when it is aborted
  const { url: slow, arrived: asked } = await silentUrl(t);
  const client = new AgentqClient({ url: `${slow},${c.url}` });
  t.after(() => client.destroy());
  const stop = new AbortController();
  const first = client.events({ signal: stop.signal }).next();
  await asked;
  const reason = new Error('the caller is done');
  stop.abort(reason);
  await assert.rejects(first, (err) => err === reason);
  assert.equal(client.url, slow, 'an abort is not a failure of the coordinator: no failover');
});

test('moves to the next URL do not use up the retries an overloaded coordinator asks for', async (t) => {
  const { createServer: httpServer } = await import('node:http');
  let asked = 0;
  const busyOnce = httpServer((_req, res) => {
    if (asked++ === 0) {
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '0' });
      return res.end(JSON.stringify({ error: { code: 'overloaded', message: 'busy' } }));
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ status: 'ok' }));
  });
  await new Promise<void>((resolve) => busyOnce.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => busyOnce.close(() => resolve())));
  const busy = `http://127.0.0.1:${(busyOnce.address() as { port: number }).port}`;
  // two dead URLs first, then one that asks for a single wait: one retry is enough
  const client = new AgentqClient({ url: `${await deadUrl(t)},${await deadUrl(t)},${busy}`, overloadRetries: 1 });
  t.after(() => client.destroy());
  assert.equal((await client.health()).status, 'ok');
  assert.equal(asked, 2);
});

test('none of several URLs answers: the error names each once, its cause is the last attempt\'s own (as with one URL), and the message stays short with many URLs', async (t) => {
  const one = new AgentqClient({ url: await deadUrl(t) });
  t.after(() => one.destroy());
  const alone = await one.health().then(
    () => assert.fail('answered'),
    (err: unknown) => err as AgentqConnectionError,
  );

  const urls = [await deadUrl(t), await deadUrl(t)];
  const two = new AgentqClient({ url: urls.join(',') });
  t.after(() => two.destroy());
  const err = await two.health().then(
    () => assert.fail('answered'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof AgentqConnectionError, String(err));
  assert.equal(err.code, 'coordinator_unreachable');
  // callers that look at the cause (neverSent, logs) see what they saw before: the socket's error
  assert.ok(!(err.cause instanceof AgentqConnectionError), `cause: ${String(err.cause)}`);
  assert.equal((err.cause as Error).constructor, (alone.cause as Error).constructor);
  assert.equal((err.cause as { code?: unknown }).code, (alone.cause as { code?: unknown }).code);
  for (const url of urls) assert.equal(err.message.split(`coordinator at ${url} unreachable`).length, 2, err.message);
  // every one was tried: no "next request goes to" in the middle of the list
  assert.doesNotMatch(err.message, /next request goes to/);

  const many = await Promise.all(Array.from({ length: 40 }, () => deadUrl(t)));
  const forty = new AgentqClient({ url: many.join(',') });
  t.after(() => forty.destroy());
  const big = await forty.health().then(
    () => assert.fail('answered'),
    (e: unknown) => e as AgentqConnectionError,
  );
  assert.ok(big.message.length < 600, `${big.message.length} characters: ${big.message}`);
  assert.match(big.message, /40 tried/);
  assert.ok(big.message.includes(`coordinator at ${many[0]} unreachable`) && big.message.includes(`coordinator at ${many[39]} unreachable`), big.message);
});
