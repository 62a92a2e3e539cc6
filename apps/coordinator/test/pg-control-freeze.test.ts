import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mock, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { AgentqClient } from '@agentq/client';
import { killOnExit } from '@agentq/test-support';
import { PgControl } from '../src/core/store/pg-control.js';
import { startCoordinator } from '../src/start.js';
import { rejectsWith, start } from './helpers.js';
import { coordinatorThroughProxy } from './pg-freeze-helpers.js';
import { cuttableProxy, freshDatabaseUrl } from './pg-server.js';

/*
 * The PostgreSQL store's control connection (LISTEN, the sweeper lock) against a database host
 * that freezes (packets dropped, nothing reset): every wait on it is bounded (its set-up when it
 * reconnects, the sweeper lock's queries, its close at shutdown), so that neither the reconnect
 * loop, nor the sweeper, nor the coordinator's shutdown waits for TCP to give up (minutes).
 *
 * Without a bound these tests hang (and fail on the test's timeout): nothing on loopback ever
 * gives up on a connection the proxy holds.
 */

const silent = pino({ level: 'silent' });
const channels = { commits: 'c', output: 'o' };

test('PostgreSQL freezing in the middle of the control connection reconnecting (connected, not yet listening): the set-up is given up on within DATABASE_QUERY_TIMEOUT_MS and tried again, and the coordinator is ready again on a fresh connection', { timeout: 60_000 }, async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const { proxy, logged, client: a } = await coordinatorThroughProxy(t, direct);
  const lost = logged('PostgreSQL control connection lost; reconnecting', 1);
  await proxy.cut();
  await lost;
  // the next set-up that gets as far as its LISTEN is never answered; later connections are
  const stalled = proxy.stallAt('LISTEN ');
  // waited for from now: the stalled set-up is given up on DATABASE_QUERY_TIMEOUT_MS after it began
  const restored = logged('PostgreSQL control connection restored', 1);
  await proxy.restore();
  await stalled;
  // not listening (nor sweeping): not ready, though the database answers reads on other connections
  await rejectsWith(a.ready(), 503, 'storage_unavailable');
  assert.equal((await a.health()).store, 'ok');

  await restored;
  assert.deepEqual(await a.ready(), { ready: true });
});

test('PostgreSQL frozen: the sweeper lock queries (the check of a lock held, the request of one not held) are given up on within the ping timeout and say "not the sweeper"; reconnect attempts to a host that takes connections and never answers give up too', { timeout: 60_000 }, async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const proxy = await cuttableProxy(t, direct);
  // no pings (their timer driven by the test, never moved): only the lock's own queries can notice
  mock.timers.enable({ apis: ['setInterval'] });
  t.after(() => mock.timers.reset());
  let connected = (): void => undefined;
  // no connectionTimeoutMillis in the config: the control connection bounds its connect itself
  const control = new PgControl(
    { connectionString: proxy.url },
    channels,
    'k',
    { commit: () => undefined, output: () => undefined, connected: () => connected() },
    silent,
    1000,
  );
  t.after(async () => {
    proxy.thaw();
    await control.close();
  });
  await control.start();
  assert.equal(await control.sweeperLease(), true, 'the lock is taken');

  proxy.freeze();
  assert.equal(await control.sweeperLease(), false, 'its check unanswered: not held any more');
  assert.equal(control.connected, false);
  // a new connection is taken and never answered: its start fails rather than waits
  const another = new PgControl({ connectionString: proxy.url }, channels, 'k', { commit: () => undefined, output: () => undefined, connected: () => undefined }, silent, 1000);
  await assert.rejects(another.start(), /timeout/);

  // the reconnect attempts made while frozen gave up; once the host answers, one gets through
  const reconnected = new Promise<void>((resolve) => (connected = resolve));
  proxy.thaw();
  await reconnected;
  proxy.freeze();
  assert.equal(await control.sweeperLease(), false, 'its request unanswered: not taken');
  assert.equal(control.connected, false);
});

test('PostgreSQL frozen: a coordinator still stops (its shutdown does not wait for the frozen host to close the connections)', { timeout: 60_000 }, async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const proxy = await cuttableProxy(t, direct);
  const A = await startCoordinator({ databaseUrl: proxy.url, databaseQueryTimeoutMs: 2000, databasePoolSize: 2, logLevel: 'silent', pollTimeoutSeconds: 600, sweepIntervalMs: 600_000 });
  const a = new AgentqClient({ url: A.url, overloadRetries: 0 });
  t.after(async () => {
    proxy.thaw();
    await a.destroy();
  });
  // the pool's connections opened and idle
  await Promise.all([start(a, 'one'), start(a, 'two')]);
  await a.destroy();
  proxy.freeze();
  await A.close();
});

test('PostgreSQL frozen: a program that embeds the coordinator exits once it closed it (the sockets of its pool are not left waiting for the frozen host to close its end)', { timeout: 60_000 }, async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const proxy = await cuttableProxy(t, direct);
  const child = fork(fileURLToPath(new URL('./fixtures/embedded-coordinator.js', import.meta.url)), [proxy.url], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  killOnExit(child);
  const exited = once(child, 'exit');
  t.after(async () => {
    proxy.thaw();
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  await message(child, 'opened');
  proxy.freeze();
  child.send('close');
  await message(child, 'closed');
  // without a bound, its pool's idle connections wait for ever for the host to close its end
  const [code, signal] = await exited;
  assert.deepEqual({ code, signal }, { code: 0, signal: null });
});

/** Resolves on `child`'s next IPC message, which must be `expected`; rejects if it exits first. */
async function message(child: ChildProcess, expected: string): Promise<void> {
  const [got] = (await Promise.race([
    once(child, 'message'),
    once(child, 'exit').then(([code]) => {
      throw new Error(`the embedding program exited (${String(code)}) before saying ${expected}`);
    }),
  ])) as [unknown];
  assert.equal(got, expected);
}
