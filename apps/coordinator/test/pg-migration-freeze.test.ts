import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StartupError } from '../src/config.js';
import { startCoordinator } from '../src/start.js';
import { cuttableProxy, freshDatabaseUrl } from './pg-server.js';

/*
 * The schema migration at start against a database host that freezes under it (packets dropped,
 * nothing reset): it runs on a connection with no query timeout (a migration may rightly take
 * minutes), so the start checks that the database answers on connections of its own meanwhile,
 * and fails once it does not, rather than hanging for as long as TCP keeps the connection.
 *
 * Without that bound this test hangs (and fails on its timeout): nothing on loopback ever gives up
 * on a connection the proxy holds.
 */

test('PostgreSQL freezing in the middle of the schema migration at start: the start fails, naming the database, once a check on a new connection is not answered (DATABASE_CONNECT_TIMEOUT_MS, DATABASE_QUERY_TIMEOUT_MS), instead of hanging', { timeout: 60_000 }, async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const proxy = await cuttableProxy(t, direct);
  t.after(() => proxy.thaw());
  // the migration's lock statement goes to the database and is never answered; then nothing is
  const frozen = proxy.stallAt('pg_advisory_xact_lock').then(() => proxy.freeze());
  const starting = startCoordinator({ databaseUrl: proxy.url, databaseQueryTimeoutMs: 2000, databaseConnectTimeoutMs: 2000 });
  await frozen;
  const port = new URL(proxy.url).port;
  await assert.rejects(starting, (err: unknown) => {
    assert.ok(err instanceof StartupError, String(err));
    assert.match(err.message, new RegExp(`^cannot open the PostgreSQL database postgres://agentq@127\\.0\\.0\\.1:${port}/postgres\\b`));
    assert.match(err.message, /the database stopped answering while its schema was checked and migrated: a check on a new connection failed \(.*timeout/);
    return true;
  });
});
