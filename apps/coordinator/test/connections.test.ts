import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test, type TestContext } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.js';
import { readOpenFileLimit, resolveLimits } from '../src/limits.js';
import { called, start, startTest } from './helpers.js';
import { metricValue, rawConnection, seen, type RawStream } from './limits-helpers.js';

// issue 11, item 4: thousands of connections cannot lock out health checks and launchers

/** A kept-alive connection that has made one request (so the server has accepted it) and is now idle. */
async function idleConnection(t: TestContext, port: number): Promise<RawStream> {
  const conn = rawConnection(t, port, 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  await seen(conn, '"status":"ok"');
  return conn;
}

/** Send one request on a new connection; the status line and body of the answer (or null: closed unanswered). */
async function ask(t: TestContext, port: number, method: string, path: string, body?: object): Promise<{ status: number; text: string } | null> {
  const payload = body === undefined ? '' : JSON.stringify(body);
  const conn = rawConnection(
    t,
    port,
    `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n` +
      (body === undefined ? '\r\n' : `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`),
  );
  await once(conn.socket, 'close');
  const text = conn.text();
  if (text === '') return null;
  return { status: Number(text.split(' ')[1]), text };
}

test('past MAX_CONNECTIONS the reserve serves /health, /metrics and launchers only; others get 503 too_many_clients', async (t) => {
  const { c } = await startTest(t, { maxConnections: 4, connectionReserve: 3, overloadRetryAfterSeconds: 2 });
  for (let i = 0; i < 4; i++) await idleConnection(t, c.port);
  assert.equal(await metricValue(c.url, 'agentq_connections'), 4 + 1, 'four idle ones, and the metrics request itself'); // on the reserve

  assert.equal((await ask(t, c.port, 'GET', '/health'))?.status, 200);
  const refused = await ask(t, c.port, 'POST', '/jobs', { type: 'start_session', session_name: 'x', prompt: 'p' });
  assert.equal(refused?.status, 503);
  assert.match(refused!.text, /retry-after: 2/i);
  assert.match(refused!.text, /"code":"too_many_clients"/);
  const register = await ask(t, c.port, 'POST', '/launcher/register', { hostname: 'h' });
  assert.equal(register?.status, 200, 'a launcher still registers');
  assert.equal((await ask(t, c.port, 'GET', '/metrics'))?.status, 200);
  assert.equal(await metricValue(c.url, 'agentq_requests_refused_total', { reason: 'connections' }), 1);
});

test('past MAX_CONNECTIONS + CONNECTION_RESERVE a new connection takes the place of the oldest idle one', async (t) => {
  const { c } = await startTest(t, { maxConnections: 3, connectionReserve: 2 });
  const idle = [];
  for (let i = 0; i < 5; i++) idle.push(await idleConnection(t, c.port));
  // full: the next one evicts the oldest idle connection, and is answered
  const oldestClosed = once(idle[0]!.socket, 'close');
  assert.equal((await ask(t, c.port, 'GET', '/health'))?.status, 200);
  await oldestClosed;
  assert.equal(idle[1]!.socket.destroyed, false);
  assert.ok((await metricValue(c.url, 'agentq_connections_closed_by_limit_total', { reason: 'evicted' })) >= 1);
});

test('with every connection busy, one more is refused; when one ends there is room again', async (t) => {
  const { c, client } = await startTest(t, { maxConnections: 2, connectionReserve: 0 });
  const job = await start(client, 'waited-on');
  await client.close();
  const waits = [];
  for (let i = 0; i < 2; i++) {
    const parked = called(c.core, 'waitJob');
    waits.push(rawConnection(t, c.port, `GET /jobs/${job.job_id}/wait?timeout_ms=60000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`));
    await parked;
  }
  assert.equal(await ask(t, c.port, 'GET', '/health'), null, 'closed unanswered: nothing idle to make room');
  waits[0]!.socket.destroy();
  // the server sees that close a moment later: then there is room again
  while ((await ask(t, c.port, 'GET', '/health')) === null) await new Promise((r) => setImmediate(r));
  assert.ok((await metricValue(c.url, 'agentq_connections_closed_by_limit_total', { reason: 'refused' })) >= 1);
});

test('MAX_CONNECTIONS_PER_ADDRESS: one address cannot hold more', async (t) => {
  const { c } = await startTest(t, { maxConnectionsPerAddress: 2 });
  await idleConnection(t, c.port);
  await idleConnection(t, c.port);
  assert.equal(await ask(t, c.port, 'GET', '/health'), null);
});

test('MAX_CONNECTIONS defaults from the open-file limit; the variables are validated', () => {
  const nofile = readOpenFileLimit();
  const derived = resolveLimits(loadConfig({})).maxConnections;
  if (nofile === null) assert.equal(derived, 10_000);
  else assert.equal(derived, Math.max(16, Math.min(10_000, nofile - 256 - 64)));
  assert.equal(resolveLimits(loadConfig({ MAX_CONNECTIONS: '300' })).maxConnections, 300);
  assert.throws(() => loadConfig({ MAX_CONNECTIONS: '0' }), (e: Error) => e instanceof ConfigError && e.variable === 'MAX_CONNECTIONS');
  assert.throws(() => loadConfig({ CONNECTION_RESERVE: '-1' }), (e: Error) => e instanceof ConfigError && e.variable === 'CONNECTION_RESERVE');
});
