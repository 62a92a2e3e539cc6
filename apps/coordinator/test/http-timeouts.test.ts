import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.js';
import { fakeLauncher, start, startTest } from './helpers.js';
import { startAuthTest } from './auth-helpers.js';
import { request } from 'undici';
import { metricValue, rawConnection, rawStream, seen, untilMetric } from './limits-helpers.js';

// issue 11, item 3: slow or silent clients cannot hold connections for ever; waits still work

const SHORT = { httpRequestTimeoutMs: 600, httpHeadersTimeoutMs: 300, httpIdleTimeoutMs: 1000, httpKeepAliveTimeoutMs: 300 };

/** The status line and the JSON body of a raw HTTP answer. */
function parseAnswer(text: string): { status: number; body: { error: { code: string } } } {
  const [head, body] = text.split('\r\n\r\n');
  return { status: Number(head!.split(' ')[1]), body: JSON.parse(body!) as { error: { code: string } } };
}

test('a body that stops coming is answered 408 request_timeout (standard shape) and its connection closed', async (t) => {
  const { c } = await startTest(t, SHORT);
  const conn = rawConnection(
    t,
    c.port,
    'POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{',
  );
  await once(conn.socket, 'close');
  const answer = parseAnswer(conn.text());
  assert.equal(answer.status, 408);
  assert.equal(answer.body.error.code, 'request_timeout');
});

test('a body still owed after its request was answered (401 before it came) is cut at the request timeout too', { timeout: 20_000 }, async (t) => {
  // the idle timeout is far away: only the request timeout can close this connection in time
  const { c } = await startAuthTest(t, { ...SHORT, httpIdleTimeoutMs: 600_000 });
  const conn = rawConnection(
    t,
    c.port,
    'POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{',
  );
  // a byte now and then: the keep-alive timeout (reset by every byte) never ends it either
  const trickle = setInterval(() => conn.socket.write(' '), 100);
  t.after(() => clearInterval(trickle));
  // closed, not answered: the reset may come as an error first (events.once would reject on it)
  await new Promise((resolve) => conn.socket.once('close', resolve));
  assert.match(conn.text(), /^HTTP\/1\.1 401 /, 'answered 401 before the body came');
  assert.equal(conn.text().match(/HTTP\/1\.1 /g)?.length, 1, 'and closed at the request timeout without a second answer');
});

test('a body timer ends with its connection: a client answered before its body came that leaves holds no timer', async (t) => {
  // the request timeout is far away (past the test): a timer left armed would stay for all of it
  const { c } = await startAuthTest(t, { ...SHORT, httpRequestTimeoutMs: 30_000, httpIdleTimeoutMs: 600_000 });
  const serverSockets: Socket[] = [];
  c.app.server.on('connection', (s: Socket) => serverSockets.push(s));
  // timers that keep the process alive (the body timer is one; Node's socket timeouts are not)
  const armed = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const before = armed();
  const n = 5;
  for (let i = 0; i < n; i++) {
    const conn = rawConnection(t, c.port, 'POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{');
    await new Promise<void>((resolve) => conn.socket.on('data', () => /^HTTP\/1\.1 401 /.test(conn.text()) && resolve()));
    conn.socket.destroy();
  }
  assert.equal(serverSockets.length, n);
  await Promise.all(serverSockets.map((s) => (s.closed ? undefined : once(s, 'close'))));
  assert.equal(armed() - before, 0, 'no body timer left armed for a connection that is gone');
});

test('headers that stop coming, or never come, are answered 408 too (the headers timeout runs from the connection)', async (t) => {
  const { c } = await startTest(t, SHORT);
  const slow = rawConnection(t, c.port, 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a');
  const silent = rawConnection(t, c.port);
  await Promise.all([once(slow.socket, 'close'), once(silent.socket, 'close')]);
  for (const conn of [slow, silent]) {
    const answer = parseAnswer(conn.text());
    assert.equal(answer.status, 408);
    assert.equal(answer.body.error.code, 'request_timeout');
  }
});

test('an idle kept-alive connection is closed after HTTP_KEEP_ALIVE_TIMEOUT_MS', async (t) => {
  const { c } = await startTest(t, SHORT);
  const kept = rawConnection(t, c.port, 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  await seen(kept, '"status":"ok"');
  await once(kept.socket, 'close');
  assert.equal(kept.text().match(/HTTP\/1\.1 200/g)?.length, 1, 'one answer, then the close');
});

test('a client that stops reading its answer is closed after HTTP_IDLE_TIMEOUT_MS without progress, under every buffer cap', async (t) => {
  const { c } = await startTest(t, { ...SHORT, maxPromptBytes: 2 * 1024 * 1024 });
  const stalled = await rawStream(t, c.port, '?include=prompt');
  stalled.socket.pause();
  // 10 MB of events: more than socket buffers take, less than the 16 MiB per-stream cap
  const prompt = 'x'.repeat(1024 * 1024);
  for (let i = 0; i < 10; i++) await c.core.createJob({ type: 'start_session', session_name: `big-${i}`, prompt });
  await untilMetric(c.url, 'agentq_sse_clients', 0);
  const closed = once(stalled.socket, 'close');
  stalled.socket.resume();
  await closed;
  assert.equal(await metricValue(c.url, 'agentq_sse_clients_cut_total', { reason: 'client_unread' }), 0);
  assert.equal(await metricValue(c.url, 'agentq_sse_clients_cut_total', { reason: 'total_buffered' }), 0);
});

test('long-polls, waits and output follows outlast the idle timeout: their hold is added to it', async (t) => {
  const { c, client } = await startTest(t, { ...SHORT, httpIdleTimeoutMs: 400, pollTimeoutSeconds: 1.5 });
  const l = await fakeLauncher(client);
  // a poll held 1.5 s (nearly four idle timeouts) ends as a normal 204
  assert.equal(await l.poll(), null);
  const job = await start(client, 'waited');
  await l.take();
  await l.started(job.job_id);
  const waited = await client.waitJob(job.job_id, 1500);
  assert.equal(waited.status, 'running');
  const many = await client.waitJobs({ job_ids: [job.job_id], timeout_ms: 1500 });
  assert.equal(many.done, false);
  const out = await client.getOutput(job.job_id, { offset: 0, wait_ms: 1500 });
  assert.equal(out.output, '');
  // HEAD of a wait holds as its GET does
  const head = await request(`${c.url}/jobs/${job.job_id}/wait?timeout_ms=1500`, { method: 'HEAD' });
  assert.equal(head.statusCode, 200);
  // and a sync that only waits (a report-and-poll with nothing to report is held like a poll)
  const sync = await request(`${c.url}/launcher/sync`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ launcher_id: l.id, capacity: 1, reports: [] }),
  });
  assert.equal(sync.statusCode, 200);
  assert.deepEqual(((await sync.body.json()) as { jobs: unknown[] }).jobs, []);
});

test('a wait\'s hold ends with its answer: a client that asked for an hour and does not read the answer is closed after the idle timeout', { timeout: 30_000 }, async (t) => {
  const { c } = await startTest(t, { ...SHORT, maxPromptBytes: 2 * 1024 * 1024, maxAnswerBytes: 32 * 1024 * 1024 });
  // ended jobs with 2 MB prompts: the answer (20 MB) is more than the socket buffers take in
  const ids = [];
  for (let i = 0; i < 10; i++) {
    const job = await c.core.createJob({ type: 'start_session', session_name: `big-${i}`, prompt: 'x'.repeat(2_000_000) });
    await c.core.stopJob(job.job.job_id);
    ids.push(job.job.job_id);
  }
  const body = JSON.stringify({ job_ids: ids, mode: 'all', timeout_ms: 3_600_000 });
  // the server's end: the client's, paused, would see the close only after the data before it
  const accepted = once(c.app.server, 'connection') as Promise<[Socket]>;
  const unread = connect(c.port, '127.0.0.1');
  t.after(() => unread.destroy());
  unread.on('error', () => undefined);
  unread.write(`POST /jobs/wait HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  unread.pause();
  const [socket] = await accepted;
  // answered at once (the jobs have ended) and never read: the hold of an hour it asked for is
  // over, so the idle timeout (1 s) closes it, not an hour and a second
  await once(socket, 'close');
  assert.equal(c.core.answers.held, 0);
});

test('an event stream stays open past the idle timeout: keepalives come well within it', async (t) => {
  const { c, client } = await startTest(t, { ...SHORT, httpIdleTimeoutMs: 400 });
  const stream = await rawStream(t, c.port);
  // three keepalives take longer than one idle timeout
  for (let i = 0; i < 3; i++) {
    const count = stream.text().split(': keepalive').length;
    await new Promise<void>((resolve) => {
      const on = () => {
        if (stream.text().split(': keepalive').length <= count) return;
        stream.socket.off('data', on);
        resolve();
      };
      stream.socket.on('data', on);
    });
  }
  await start(client, 'still-open');
  await seen(stream, '"session_name":"still-open"');
});

test('HTTP timeouts are read from the environment; headers cannot outlast the request', () => {
  const config = loadConfig({ HTTP_REQUEST_TIMEOUT_MS: '5000', HTTP_HEADERS_TIMEOUT_MS: '2000', HTTP_IDLE_TIMEOUT_MS: '7000', HTTP_KEEP_ALIVE_TIMEOUT_MS: '3000' });
  assert.deepEqual(
    [config.httpRequestTimeoutMs, config.httpHeadersTimeoutMs, config.httpIdleTimeoutMs, config.httpKeepAliveTimeoutMs],
    [5000, 2000, 7000, 3000],
  );
  assert.throws(
    () => loadConfig({ HTTP_REQUEST_TIMEOUT_MS: '1000', HTTP_HEADERS_TIMEOUT_MS: '2000' }),
    (e: Error) => e instanceof ConfigError && e.variable === 'HTTP_HEADERS_TIMEOUT_MS',
  );
  assert.throws(() => loadConfig({ HTTP_IDLE_TIMEOUT_MS: '0' }), (e: Error) => e instanceof ConfigError && e.variable === 'HTTP_IDLE_TIMEOUT_MS');
});
