import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import pg from 'pg';
import { pino } from 'pino';
import { AgentqClient } from '@agentq/client';
import { ConfigError, loadConfig } from '../src/config.js';
import { CONTROL_KEEPALIVE, PgControl, PING_MS } from '../src/core/store/pg-control.js';
import { startCoordinator } from '../src/start.js';
import { rejectsWith, start } from './helpers.js';
import { coordinatorThroughProxy } from './pg-freeze-helpers.js';
import { cuttableProxy, freshDatabaseUrl } from './pg-server.js';

/*
 * A database host that freezes (stops answering, sends no RST) while the pool's connections are
 * open: a statement on one of them is given up on after DATABASE_QUERY_TIMEOUT_MS, its connection
 * destroyed, and the request answered 503 storage_unavailable, instead of the request (and, with
 * the pool full, every later one) hanging until TCP gives up, minutes to hours later.
 *
 * Without the bound such a request hangs: each call here carries the test's own limit (far above
 * the configured timeout), past which the client gives up with an error that is not the 503.
 */

const GIVE_UP_MS = 20_000;
const call = () => ({ signal: AbortSignal.timeout(GIVE_UP_MS), headersTimeoutMs: GIVE_UP_MS });

test('PostgreSQL frozen with pooled connections open: a change and a read answer 503 storage_unavailable within DATABASE_QUERY_TIMEOUT_MS, the change said not applied; thawed, requests are served again on fresh connections', { timeout: 90_000 }, async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const proxy = await cuttableProxy(t, direct);
  const A = await startCoordinator({
    databaseUrl: proxy.url,
    databaseQueryTimeoutMs: 2000,
    databaseConnectTimeoutMs: 2000,
    databasePoolSize: 2,
    logLevel: 'silent',
    pollTimeoutSeconds: 600,
    sweepIntervalMs: 600_000,
  });
  const a = new AgentqClient({ url: A.url, overloadRetries: 0, createRetries: 0 });
  t.after(async () => {
    proxy.thaw();
    await a.destroy();
    await A.close();
  });
  // both connections of the pool opened and idle (two requests at once need two)
  await Promise.all([start(a, 'before-1'), start(a, 'before-2')]);

  proxy.freeze();
  // a create: its transaction's first round trip (BEGIN and a read) goes unanswered
  const details = await rejectsWith(a.createJob({ type: 'start_session', session_name: 'during', prompt: 'never stored' }, call()), 503, 'storage_unavailable');
  assert.equal(details['sql_state'], null);
  assert.equal(details['applied'], false, 'its COMMIT was never sent: nothing of it was applied');
  // a read straight through the pool, on the other open connection
  await rejectsWith(a.getSession('before-1', call()), 503, 'storage_unavailable');
  // the pool's connections are given up on; new ones cannot be opened while it hangs
  await rejectsWith(a.getSession('before-2', call()), 503, 'storage_unavailable');

  proxy.thaw();
  // served again, on fresh connections: a timed-out one reused would answer the unanswered statements' rows
  const after = await a.createJob({ type: 'start_session', session_name: 'after', prompt: 'do after' }, call());
  assert.equal((await a.getJob(after.job_id, call())).session_name, 'after');
  assert.deepEqual((await a.listSessions({}, call())).sessions.map((s) => s.session_name).sort(), ['after', 'before-1', 'before-2']);

});

test('PostgreSQL frozen while a COMMIT is unanswered: 503 storage_unavailable that does not say nothing was applied (the commit was made); thawed, the coordinator goes on', { timeout: 90_000 }, async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const proxy = await cuttableProxy(t, direct);
  const A = await startCoordinator({ databaseUrl: proxy.url, databaseQueryTimeoutMs: 2000, logLevel: 'silent', pollTimeoutSeconds: 600, sweepIntervalMs: 600_000 });
  const a = new AgentqClient({ url: A.url, overloadRetries: 0 });
  t.after(async () => {
    proxy.thaw();
    await a.destroy();
    await A.close();
  });
  await start(a, 'a');
  const frozen = proxy.freezeAtCommit('a message whose commit is not answered');
  const refused = rejectsWith(a.sendMessage('a', { text: 'a message whose commit is not answered' }, call()), 503, 'storage_unavailable');
  await frozen;
  const details = await refused;
  assert.equal(details['sql_state'], null);
  assert.ok(!('applied' in details), `its outcome is unknown: ${JSON.stringify(details)}`);
  proxy.thaw();
  // it was made, and the coordinator serves again
  assert.deepEqual(
    (await a.getSession('a', call())).pending_messages.map((m) => m.text),
    ['a message whose commit is not answered'],
  );
});

test('PostgreSQL frozen: the control connection, whose ping goes unanswered for DATABASE_QUERY_TIMEOUT_MS, is taken for lost (/health: store unavailable, /ready 503); thawed, it reconnects', { timeout: 90_000 }, async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const { proxy, logged, client: a } = await coordinatorThroughProxy(t, direct);
  assert.equal((await a.health(call())).store, 'ok');
  // without the bound, TCP on this end would retransmit the unanswered ping for many minutes
  const lost = logged('PostgreSQL control connection lost; reconnecting', 1);
  proxy.freeze();
  await lost;
  assert.equal((await a.health(call())).store, 'unavailable');
  await rejectsWith(a.ready(call()), 503, 'storage_unavailable');

  const back = logged('PostgreSQL control connection restored', 1);
  proxy.thaw();
  await back;
  assert.equal((await a.health(call())).store, 'ok');
  assert.deepEqual(await a.ready(call()), { ready: true });
});

test('PostgreSQL frozen: the control connection sends no second ping while one is unanswered (they would queue on it, and node-postgres warns of queued queries); answered, it pings again', async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const proxy = await cuttableProxy(t, direct);
  // the pings the control connection sends, and their answers
  const pings: Promise<unknown>[] = [];
  const query = pg.Client.prototype.query;
  t.after(() => (pg.Client.prototype.query = query));
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const sent = (query as (...a: unknown[]) => Promise<unknown>).apply(this, args);
    if (args[0] === 'SELECT 1') pings.push(sent);
    return sent;
  } as typeof query;
  // its ping timer driven by the test (the timeout that would end the connection is far off)
  mock.timers.enable({ apis: ['setInterval'] });
  t.after(() => mock.timers.reset());
  const control = new PgControl({ connectionString: proxy.url }, { commits: 'c', output: 'o' }, 'k', { commit: () => undefined, output: () => undefined, connected: () => undefined }, pino({ level: 'silent' }), 600_000);
  t.after(async () => {
    proxy.thaw();
    await control.close();
  });
  await control.start();
  proxy.freeze();
  mock.timers.tick(PING_MS);
  assert.equal(pings.length, 1, 'a ping is sent');
  mock.timers.tick(PING_MS);
  mock.timers.tick(PING_MS);
  assert.equal(pings.length, 1, 'none more while it is unanswered');
  proxy.thaw();
  await pings[0];
  // (its settling, after the answer, lets the next ping go)
  await new Promise<void>((resolve) => setImmediate(resolve));
  mock.timers.tick(PING_MS);
  assert.equal(pings.length, 2, 'answered, the next one is sent');
  assert.equal(control.connected, true);
});

test('DATABASE_QUERY_TIMEOUT_MS sets how long a statement on a pooled PostgreSQL connection may go unanswered (30 s by default)', () => {
  assert.equal(loadConfig({}).databaseQueryTimeoutMs, 30_000);
  assert.equal(loadConfig({ DATABASE_QUERY_TIMEOUT_MS: '5000' }).databaseQueryTimeoutMs, 5000);
  assert.throws(() => loadConfig({ DATABASE_QUERY_TIMEOUT_MS: '0' }), (e: Error) => e instanceof ConfigError && e.variable === 'DATABASE_QUERY_TIMEOUT_MS');
});

test('a change whose connection was given up on (DATABASE_QUERY_TIMEOUT_MS) while its COMMIT waited for a row lock is ended on the server too: its locks are freed and it does not commit once the lock comes free', { timeout: 90_000 }, async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const A = await startCoordinator({ databaseUrl: direct, databaseQueryTimeoutMs: 1000, logLevel: 'silent', pollTimeoutSeconds: 600, sweepIntervalMs: 600_000 });
  const a = new AgentqClient({ url: A.url, overloadRetries: 0 });
  const holder = new pg.Client({ connectionString: direct });
  const waiter = new pg.Client({ connectionString: direct });
  t.after(async () => {
    await holder.end().catch(() => undefined);
    await waiter.end().catch(() => undefined);
    await a.destroy();
    await A.close();
  });
  await Promise.all([holder.connect(), waiter.connect()]);
  await start(a, 'a');
  // the row every logged commit updates in its last round trip, with its COMMIT: held elsewhere
  await holder.query('BEGIN');
  await holder.query('SELECT * FROM commit_head FOR UPDATE');
  const details = await rejectsWith(a.sendMessage('a', { text: 'never delivered' }, call()), 503, 'storage_unavailable');
  assert.ok(!('applied' in details), `its COMMIT was sent: ${JSON.stringify(details)}`);
  // the change had written the session's row: it is locked until the server ends that transaction.
  // Without the server noticing that its connection is gone, it waits for commit_head (held until
  // the test ends), and this lock wait gives up (55P03) instead
  await waiter.query("SET lock_timeout = '20s'");
  const { rows } = await waiter.query<{ name: string }>("SELECT name FROM sessions WHERE name = 'a' FOR UPDATE");
  assert.deepEqual(rows, [{ name: 'a' }]);
  await holder.query('ROLLBACK');
  // it was rolled back: nothing of it commits once commit_head is free
  assert.deepEqual((await a.getSession('a', call())).pending_messages, []);
  const { rows: logged } = await waiter.query<{ n: number }>("SELECT count(*)::int AS n FROM commit_log WHERE events LIKE '%never delivered%'");
  assert.deepEqual(logged, [{ n: 0 }]);
});

test('a PostgreSQL server that refuses client_connection_check_interval (its platform cannot see a closed connection: Windows, PostgreSQL 14 off Linux) still takes the TCP keepalives of each pooled connection', { timeout: 60_000 }, async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  // such a server refuses the setting itself; here the value sent is one every server refuses
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  const pooled = new Set<pg.Client>();
  proto.query = function (this: pg.Client, ...args: unknown[]) {
    const values = args[1];
    const at = Array.isArray(values) ? values.indexOf('client_connection_check_interval') : -1;
    if (at >= 0) {
      pooled.add(this);
      args[1] = (values as unknown[]).map((v, i) => (i === at + 1 ? '-1' : v));
    }
    return original.apply(this, args);
  };
  t.after(() => {
    proto.query = original;
  });
  const A = await startCoordinator({ databaseUrl: direct, logLevel: 'silent', pollTimeoutSeconds: 600, sweepIntervalMs: 600_000 });
  const a = new AgentqClient({ url: A.url, overloadRetries: 0 });
  t.after(async () => {
    await a.destroy();
    await A.close();
  });
  await start(a, 'a');
  assert.ok(pooled.size > 0, 'no pooled connection was given the settings');
  for (const client of pooled) {
    const { rows } = await client.query<{ tcp_keepalives_idle: string }>('SHOW tcp_keepalives_idle');
    assert.deepEqual(rows, [{ tcp_keepalives_idle: String(CONTROL_KEEPALIVE.tcp_keepalives_idle) }]);
  }
});
