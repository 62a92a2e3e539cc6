import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentqClient } from '@agentq/client';
import type { SyncReport } from '@agentq/protocol';
import { ConfigError, loadConfig } from '../src/config.js';
import { CoordinatorError, StoreUnreachableError } from '../src/core/errors.js';
import { startCoordinator } from '../src/start.js';
import { awaitableLogger, fakeLauncher, rejectsWith, start, startTest } from './helpers.js';
import { freshDatabaseUrl, hangingProxy } from './pg-server.js';

/*
 * A sync whose store cannot be reached (no connection to the database can be had) stops at the
 * first report that meets it and answers 503 storage_unavailable for the whole request: each
 * report after it would have waited out the connect timeout again (30 s by default, once per
 * report, then once more for the poll part), long after the launcher gave up on the request.
 */

test('PostgreSQL that hangs on connect: a sync of many reports costs one connection attempt, not one per report, and answers 503 storage_unavailable; sent again once it is back, every report is applied', async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const proxy = await hangingProxy(t, direct);
  const { logger, logged } = awaitableLogger();
  const A = await startCoordinator(
    { databaseUrl: proxy.url, databaseConnectTimeoutMs: 200, pollTimeoutSeconds: 600, sweepIntervalMs: 600_000 },
    { logger },
  );
  const client = new AgentqClient({ url: A.url, overloadRetries: 0 });
  t.after(async () => {
    await client.destroy();
    await A.close();
  });
  const l = await fakeLauncher(client);
  const jobs = [];
  for (const name of ['a', 'b', 'c', 'd']) jobs.push(await start(client, name));
  await l.poll({ batch: true, capacity: 4 });
  const [a, b, c, d] = jobs.map((j) => j.job_id) as [string, string, string, string];

  // the pool's idle connections are cut (the pool drops each, saying so), and every new one hangs
  const dropped = logged('idle PostgreSQL connection failed', proxy.hang());
  await dropped;

  // consecutive status reports, applied in one transaction: that one cannot connect
  const batch: SyncReport[] = [
    { job_id: a, kind: 'started' },
    { job_id: b, kind: 'started' },
    { job_id: c, kind: 'started' },
    { job_id: d, kind: 'started' },
  ];
  const details = await rejectsWith(client.sync({ launcher_id: l.id, capacity: 0, reports: batch }), 503, 'storage_unavailable');
  assert.ok('sql_state' in details, 'the PostgreSQL store\'s 503');
  assert.equal(details['applied'], false, 'nothing of the sync was applied: its first change got no connection');
  assert.equal(proxy.attempts, 1, 'one connection attempt for the whole sync');

  // reports applied one by one (output between them): the first cannot connect, the rest are not tried
  const mixed: SyncReport[] = [
    { job_id: a, kind: 'output', offset: 0, data: 'a says hello\n' },
    { job_id: b, kind: 'completed', result: 'b done' },
    { job_id: c, kind: 'output', offset: 0, data: 'c says hello\n' },
    { job_id: d, kind: 'completed', result: 'd done' },
  ];
  await rejectsWith(client.sync({ launcher_id: l.id, capacity: 0, reports: mixed }), 503, 'storage_unavailable');
  assert.equal(proxy.attempts, 2, 'one connection attempt for the whole sync');

  // a read outside a transaction that gets no connection is the same 503 (it changed nothing)
  const read = await rejectsWith(client.getJob(a), 503, 'storage_unavailable');
  assert.deepEqual(read, { sql_state: null, applied: false });

  // the database is back: the launcher sends them again, and each is applied
  proxy.restore();
  const started = await client.sync({ launcher_id: l.id, capacity: 0, reports: batch });
  assert.deepEqual(started.results.map((r) => r.ok), [true, true, true, true]);
  const ended = await client.sync({ launcher_id: l.id, capacity: 0, reports: mixed });
  assert.deepEqual(ended.results.map((r) => r.ok), [true, true, true, true]);
  assert.deepEqual(
    await Promise.all(jobs.map(async (j) => (await client.getJob(j.job_id)).status)),
    ['running', 'completed', 'running', 'completed'],
  );
  assert.equal((await client.getOutput(a)).output, 'a says hello\n');
});

test('a store that cannot be reached fails a sync at its first report, on every store; a change the store refuses fails only its report', async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const jobs = [];
  for (const name of ['a', 'b', 'c']) jobs.push(await start(client, name));
  await l.poll({ batch: true, capacity: 3 });
  const store = c.core.store;
  const transaction = store.transaction.bind(store);
  // the next `failing` transactions fail with `failure`, the others run
  let tried = 0;
  let failing = 0;
  let failure: () => Error = () => new StoreUnreachableError('the database is unavailable: no connection (test)');
  store.transaction = (fn) => {
    tried++;
    if (failing === 0) return transaction(fn);
    failing--;
    return Promise.reject(failure());
  };
  t.after(() => (store.transaction = transaction));
  const reports: SyncReport[] = jobs.map((j) => ({ job_id: j.job_id, kind: 'started' }));

  failing = 5;
  await rejectsWith(client.sync({ launcher_id: l.id, capacity: 0, reports }), 503, 'storage_unavailable');
  assert.equal(tried, 1, 'the batch was tried, then nothing more');

  // a change the store refused (SQLite's disk full) is that report's own: the others are tried
  // one by one, and each is answered
  tried = 0;
  failing = 2;
  failure = () => new CoordinatorError('storage_unavailable', 'the database refused the change (test)');
  const res = await client.sync({ launcher_id: l.id, capacity: 0, reports });
  assert.deepEqual(
    res.results.map((r) => [r.ok, r.error?.code ?? null]),
    [
      [false, 'storage_unavailable'],
      [true, null],
      [true, null],
    ],
  );
  assert.equal(tried, 1 + 3 + 1, 'the batch, each report on its own, and the poll part of the answer');
  assert.deepEqual(
    await Promise.all(jobs.map(async (j) => (await client.getJob(j.job_id)).status)),
    ['claimed', 'running', 'running'],
  );
});

test('a sync that a store it cannot reach stops part-way keeps the reports applied before: sent again (twice), each answers ok and none is applied twice', async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const jobs: Array<Awaited<ReturnType<typeof start>>> = [];
  for (const name of ['a', 'b']) jobs.push(await start(client, name));
  await l.poll({ batch: true, capacity: 2 });
  const [a, b] = jobs.map((j) => j.job_id) as [string, string];
  const store = c.core.store;
  const appendOutput = store.appendOutput.bind(store);
  // the next output report meets a store it cannot reach (the pool stayed full, say): after the
  // batch of status reports before it was applied
  let unreachable = 1;
  store.appendOutput = (...args) => {
    if (unreachable === 0) return appendOutput(...args);
    unreachable--;
    return Promise.reject(new StoreUnreachableError('the database is unavailable: timeout exceeded when trying to connect (test)', { sql_state: null, applied: false }));
  };
  t.after(() => (store.appendOutput = appendOutput));
  const reports: SyncReport[] = [
    { job_id: a, kind: 'started' },
    { job_id: b, kind: 'started' },
    { job_id: a, kind: 'output', offset: 0, data: 'a says hello\n' },
    { job_id: b, kind: 'completed', result: 'b done' },
  ];
  const details = await rejectsWith(client.sync({ launcher_id: l.id, capacity: 0, reports }), 503, 'storage_unavailable');
  assert.ok(!('applied' in details), `true of the output report, not of the sync, whose batch before it was applied: ${JSON.stringify(details)}`);
  const statuses = () => Promise.all(jobs.map(async (j) => (await client.getJob(j.job_id)).status));
  assert.deepEqual(await statuses(), ['running', 'running'], 'the batch before the output report was applied, the report after it was not');
  assert.equal((await client.getOutput(a)).output, '');

  // the launcher sends them all again, and again (its answer lost): each is ok, nothing twice
  for (let i = 0; i < 2; i++) {
    const res = await client.sync({ launcher_id: l.id, capacity: 0, reports });
    assert.deepEqual(res.results.map((r) => r.ok), [true, true, true, true]);
    assert.deepEqual(await statuses(), ['running', 'completed']);
    assert.equal((await client.getOutput(a)).output, 'a says hello\n');
    assert.equal((await client.getJob(b)).result, 'b done');
  }
});

test('PostgreSQL that is up but whose pool stays busy past DATABASE_CONNECT_TIMEOUT_MS: a sync answers 503 and changes nothing, the busy transaction commits, and the sync sent again is applied', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const A = await startCoordinator({ databaseUrl: url, databasePoolSize: 1, databaseConnectTimeoutMs: 200, sweepIntervalMs: 600_000 });
  const client = new AgentqClient({ url: A.url, overloadRetries: 0 });
  t.after(async () => {
    await client.destroy();
    await A.close();
  });
  const l = await fakeLauncher(client);
  const jobs: Array<Awaited<ReturnType<typeof start>>> = [];
  for (const name of ['a', 'b', 'c']) jobs.push(await start(client, name));
  await l.poll({ batch: true, capacity: 3 });
  const [a, b, c] = jobs.map((j) => j.job_id) as [string, string, string];

  // a transaction holds the pool's only connection until told to finish
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  let holding!: () => void;
  const held = new Promise<void>((resolve) => (holding = resolve));
  const busy = A.core.store.transaction(async (tx) => {
    await tx.job(a);
    holding();
    await finished;
    return 'committed';
  });
  await held;
  const reports: SyncReport[] = [
    { job_id: a, kind: 'output', offset: 0, data: 'a says hello\n' },
    { job_id: b, kind: 'started' },
    { job_id: c, kind: 'started' },
  ];
  await rejectsWith(client.sync({ launcher_id: l.id, capacity: 0, reports }), 503, 'storage_unavailable');
  finish();
  assert.equal(await busy, 'committed');
  const statuses = () => Promise.all(jobs.map(async (j) => (await client.getJob(j.job_id)).status));
  assert.deepEqual(await statuses(), ['claimed', 'claimed', 'claimed'], 'nothing of the sync was applied');

  const res = await client.sync({ launcher_id: l.id, capacity: 0, reports });
  assert.deepEqual(res.results.map((r) => r.ok), [true, true, true]);
  assert.deepEqual(await statuses(), ['claimed', 'running', 'running']);
  assert.equal((await client.getOutput(a)).output, 'a says hello\n');
});

test('DATABASE_CONNECT_TIMEOUT_MS sets how long a connection to PostgreSQL may take (30 s by default)', () => {
  assert.equal(loadConfig({}).databaseConnectTimeoutMs, 30_000);
  assert.equal(loadConfig({ DATABASE_CONNECT_TIMEOUT_MS: '5000' }).databaseConnectTimeoutMs, 5000);
  assert.throws(() => loadConfig({ DATABASE_CONNECT_TIMEOUT_MS: '0' }), (e: Error) => e instanceof ConfigError && e.variable === 'DATABASE_CONNECT_TIMEOUT_MS');
});
