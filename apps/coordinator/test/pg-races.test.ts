import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test, type TestContext } from 'node:test';
import type { AgentqClient } from '@agentq/client';
import pg from 'pg';
import { startCoordinator } from '../src/start.js';
import { newSecret, tokenFileText } from './auth-helpers.js';
import { clientOf, SLOW, tempDir } from './cluster-helpers.js';
import { spawnCoordinatorProcess, type CoordinatorProcess } from './coordinator-process.js';
import { failTreeStopSecondPass, fakeLauncher, holdAppends, rejectsWith, start, startTest } from './helpers.js';
import { freshDatabaseUrl } from './pg-server.js';

/*
 * Races between real coordinator processes on one PostgreSQL database, made certain instead of
 * likely: the test holds a row lock of its own, lets the coordinators' transactions pile up behind
 * it (PostgreSQL says when they wait: pg_locks), then lets them go at once.
 */

/** A connection of the test's own to the database, closed when the test ends. */
async function connect(t: TestContext, url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  t.after(() => client.end());
  return client;
}

/**
 * How many coordinator connections wait for a lock now, as PostgreSQL sees it. pg_stat_activity is
 * read once per transaction and then kept (the statistics snapshot), and the test's connection
 * asks from inside the transaction that holds the lock: without clearing the snapshot at each
 * look, a connection opened after the first look (a coordinator whose pool had no idle connection
 * left, and opened one for the request) was never seen, waiting or not, and the test held its
 * lock until the request's connection timed out (HTTP_IDLE_TIMEOUT_MS, 75 s). pg_locks is read live.
 */
async function lockWaitsNow(db: pg.Client): Promise<number> {
  await db.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
     WHERE a.application_name = 'agentq-coordinator' AND NOT l.granted`,
  );
  return rows[0]!.n;
}

/**
 * Resolves once `n` coordinator connections wait for a lock (PostgreSQL's own view of it). Fails
 * as soon as one of the `racing` requests ends first: it was answered without waiting for the
 * lock, and the test would otherwise hold the lock until the other's connection timed out.
 */
async function lockWaiters(db: pg.Client, n: number, racing: ReadonlyArray<Promise<unknown>> = []): Promise<void> {
  let early: { outcome: unknown } | undefined;
  for (const p of racing) p.then((answer) => (early ??= { outcome: answer }), (err: unknown) => (early ??= { outcome: err }));
  for (;;) {
    if (early) {
      const { outcome } = early;
      const said = outcome instanceof Error ? outcome.message : JSON.stringify(outcome);
      // what each coordinator connection was doing meanwhile, as PostgreSQL saw it (now: see lockWaitsNow)
      await db.query('SELECT pg_stat_clear_snapshot()');
      const { rows: doing } = await db.query(
        `SELECT a.pid, a.state, a.wait_event_type, a.wait_event, left(a.query, 100) AS query,
                (SELECT count(*)::int FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted) AS waiting_locks
           FROM pg_stat_activity a WHERE a.application_name = 'agentq-coordinator' ORDER BY a.pid`,
      );
      throw new Error(`a request ended before ${n} waited for the lock: ${said}; coordinator connections: ${JSON.stringify(doing)}`, { cause: outcome });
    }
    if ((await lockWaitsNow(db)) >= n) return;
    await sleep(20); // PostgreSQL announces no lock wait: ask again
  }
}

/**
 * `fetch` to a coordinator process, or an error that says why it failed: fetch says only "fetch
 * failed", so the cause, and what became of the coordinator (still running? its last warnings,
 * its stderr), are added.
 */
async function request(c: CoordinatorProcess, path: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(`${c.url}${path}`, init);
  } catch (err) {
    const state = c.child.exitCode !== null || c.child.signalCode !== null ? `exited (${c.child.exitCode ?? c.child.signalCode})` : 'still running';
    const cause = (err as Error).cause as { code?: string; message?: string } | undefined;
    const warnings = c.lines.filter((l) => Number(l['level']) >= 40).slice(-5);
    throw new Error(
      `${init.method ?? 'GET'} ${c.url}${path}: ${(err as Error).message} (${cause?.code ?? ''} ${cause?.message ?? ''}); the coordinator is ${state}; ` +
        `its last warnings: ${JSON.stringify(warnings)}; its stderr: ${c.stderr()}`,
      { cause: err },
    );
  }
}

/** `secret` null: a coordinator without authentication. */
async function register(
  c: CoordinatorProcess,
  secret: string | null,
  body: object,
): Promise<{ status: number; body: { error?: { code: string }; launcher_id?: string; launcher_token?: string } }> {
  const res = await request(c, '/launcher/register', {
    method: 'POST',
    headers: { ...(secret === null ? {} : { authorization: `Bearer ${secret}` }), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as { error?: { code: string }; launcher_id?: string; launcher_token?: string } };
}

/** The status of a heartbeat of `launcherId` with the credential `token`, through `c`. */
async function heartbeat(c: CoordinatorProcess, token: string | undefined, launcherId: string | undefined): Promise<number> {
  const res = await request(c, '/launcher/heartbeat', {
    method: 'POST',
    headers: { authorization: `Bearer ${token ?? ''}`, 'content-type': 'application/json' },
    body: JSON.stringify({ launcher_id: launcherId }),
  });
  await res.arrayBuffer();
  return res.status;
}

/**
 * Two coordinator processes (A and B) on a fresh PostgreSQL database, with authentication: launcher
 * tokens from a file (`tokens`, name → secret) that the test may write again. Null when PostgreSQL
 * is not available (the test is skipped).
 */
async function twoCoordinators(
  t: TestContext,
  tokens: Record<string, string>,
): Promise<{ url: string; file: string; A: CoordinatorProcess; B: CoordinatorProcess } | null> {
  const url = await freshDatabaseUrl(t);
  if (url === null) return null;
  const file = join(tempDir(t), 'tokens');
  writeFileSync(file, launcherTokens(tokens));
  const [A, B] = await Promise.all([0, 1].map(() => spawnCoordinatorProcess(t, { DATABASE_URL: url, AUTH_TOKENS_FILE: file, ...SLOW })));
  return { url, file, A: A!, B: B! };
}

/** A token file's text with a launcher token for each name → secret. */
const launcherTokens = (tokens: Record<string, string>): string =>
  tokenFileText(Object.entries(tokens).map(([name, secret]) => ({ name, role: 'launcher' as const, secret })));

/**
 * The two requests of `race`, made to wait behind a lock of the test's (`lock`, taken in a
 * transaction of its own connection) until both wait for it, then let go at once (COMMIT).
 * Resolves with both answers and the test's connection (to read the database with).
 */
async function raceBehindLock<A, B>(
  t: TestContext,
  url: string,
  lock: { sql: string; params?: unknown[] },
  race: () => readonly [Promise<A>, Promise<B>],
): Promise<{ db: pg.Client; answers: [A, B] }> {
  const db = await connect(t, url);
  await db.query('BEGIN');
  await db.query(lock.sql, lock.params);
  const answers = race();
  await lockWaiters(db, 2, answers);
  await db.query('COMMIT');
  return { db, answers: await Promise.all(answers) };
}

test('a host whose token was revoked is bound again to one token only, though two register it at once on two coordinators', async (t) => {
  const secrets = { first: newSecret(), second: newSecret(), third: newSecret() };
  const started = await twoCoordinators(t, { first: secrets.first });
  if (started === null) return;
  const { url, file, A, B } = started;
  const box = { hostname: 'box', host_id: 'h_box00001', executor_type: 'test' };
  assert.equal((await register(A, secrets.first, box)).status, 200);

  // `first` revoked, two new launcher tokens, on both coordinators
  writeFileSync(file, launcherTokens({ second: secrets.second, third: secrets.third }));
  for (const c of [A, B]) {
    const reloaded = c.waitFor((l) => l.msg === 'token file reloaded');
    c.child.kill('SIGHUP');
    await reloaded;
  }

  // both registrations read the binding (to `first`, revoked) before either writes it
  const {
    db,
    answers: [second, third],
  } = await raceBehindLock(t, url, { sql: 'SELECT * FROM host_bindings WHERE host_id = $1 FOR UPDATE', params: [box.host_id] }, () => [
    register(A, secrets.second, box),
    register(B, secrets.third, box),
  ]);

  const statuses = [second.status, third.status].sort();
  assert.deepEqual(statuses, [200, 403], `one is bound, the other refused: ${JSON.stringify([second.body, third.body])}`);
  const refused = second.status === 403 ? second : third;
  assert.equal(refused.body.error?.code, 'host_bound');
  const { rows } = await db.query<{ token_name: string }>('SELECT token_name FROM host_bindings WHERE host_id = $1', [box.host_id]);
  assert.equal(rows[0]!.token_name, second.status === 200 ? 'second' : 'third');
});

test('a SIGHUP while the coordinator waits for the database to be migrated is answered once it is ready, and does not end it', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const file = join(tempDir(t), 'tokens');
  const secret = newSecret();
  writeFileSync(file, tokenFileText([{ name: 'first', role: 'launcher', secret: newSecret() }]));
  // another coordinator migrating: the test holds the migration lock
  const db = await connect(t, url);
  const { rows } = await db.query<{ db: string; schema: string }>('SELECT current_database() AS db, current_schema() AS schema');
  await db.query('BEGIN');
  await db.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`agentq:migrate:${rows[0]!.db}.${rows[0]!.schema}`]);
  let child: ChildProcess | undefined;
  const starting = spawnCoordinatorProcess(t, { DATABASE_URL: url, AUTH_TOKENS_FILE: file, ...SLOW }, (c) => (child = c));
  await lockWaiters(db, 1);
  // the operator adds a token and says so while the coordinator still waits
  writeFileSync(file, tokenFileText([{ name: 'second', role: 'launcher', secret }]));
  const exited = new Promise((resolve) => child!.once('exit', resolve));
  child!.kill('SIGHUP');
  await db.query('COMMIT');
  const c = await Promise.race([starting, exited.then((code) => assert.fail(`the coordinator ended (${String(code)})`))]);
  await c.waitFor((l) => l.msg === 'token file reloaded');
  assert.equal((await register(c, secret, { hostname: 'box', host_id: 'h_box00002', executor_type: 'test' })).status, 200);
});

test("an output batch on its way through A when B lets the job go (its launcher replaced) is refused, not stored in the ended job's output", async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const [A, B] = await Promise.all([0, 1].map(() => startCoordinator({ databaseUrl: url, pollTimeoutSeconds: 5 })));
  t.after(() => Promise.all([A!.close(), B!.close()]));
  const [a, b] = [A!, B!].map((c) => clientOf(t, c.url)) as [AgentqClient, AgentqClient];
  const host = { hostname: 'box', executor_type: 'test', host_id: 'h_output-race' };
  const old = await a.register(host);
  const job = await a.createJob({ type: 'start_session', session_name: 'interrupted', prompt: 'go' });
  assert.equal((await a.poll(old.launcher_id, { holdSeconds: 1 }))?.job?.job_id, job.job_id);
  await a.reportStarted(job.job_id, { launcher_id: old.launcher_id });

  // on A, the batch passed the check of its job (held by `old`, running) and is about to be stored
  const held = holdAppends(A!.core.store);
  const late = a.reportOutput(job.job_id, { launcher_id: old.launcher_id, offset: 0, data: 'after the end' });
  late.catch(() => undefined);
  await held.reached;
  // on B, the launcher's restart replaces it: the job it ran ends, interrupted (still naming it)
  await b.register({ ...host, replaces: [old.launcher_id] });
  const ended = await b.getJob(job.job_id);
  assert.deepEqual([ended.status, ended.launcher_id], ['interrupted', old.launcher_id]);
  held.go();

  await rejectsWith(late, 401, 'launcher_unknown');
  assert.equal((await b.getOutput(job.job_id)).total_bytes, 0);
});

test('a registration sent again through B while its first try is still under way on A (a lost answer) is answered twice, the host bound once to its token', async (t) => {
  const secret = newSecret();
  const started = await twoCoordinators(t, { first: secret });
  if (started === null) return;
  const { url, A, B } = started;
  const box = { hostname: 'box', host_id: 'h_box00003', executor_type: 'test' };

  // neither finds a binding (there is none to lock): both insert one, and one of them meets the other's
  const {
    db,
    answers: [first, again],
  } = await raceBehindLock(t, url, { sql: 'LOCK TABLE host_bindings IN EXCLUSIVE MODE' }, () => [register(A, secret, box), register(B, secret, box)]);
  assert.deepEqual([first.status, again.status], [200, 200], JSON.stringify([first.body, again.body]));
  const { rows } = await db.query<{ host_id: string; token_name: string }>('SELECT host_id, token_name FROM host_bindings ORDER BY host_id');
  assert.deepEqual(rows, [
    { host_id: box.host_id, token_name: 'first' },
    { host_id: 'hostname:box', token_name: 'first' },
  ]);
});

test('a lock wait of a connection opened after the test saw another wait is seen from inside the transaction holding the lock', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const db = await connect(t, url);
  await db.query('CREATE TABLE watched (id int)');
  await db.query('BEGIN');
  await db.query('LOCK TABLE watched IN EXCLUSIVE MODE');
  /** a connection as a coordinator's pool opens one, waiting for the lock */
  const waiter = async () => {
    const c = new pg.Client({ connectionString: url, application_name: 'agentq-coordinator' });
    await c.connect();
    t.after(() => c.end());
    const blocked = c.query('SELECT * FROM watched FOR UPDATE');
    blocked.catch(() => undefined); // awaited below
    return { blocked };
  };
  // one registration waits, and the test sees it (as the race of two does, one first)
  const first = await waiter();
  await lockWaiters(db, 1);
  // the other coordinator's pool had no idle connection: it opens one, which waits too
  const second = await waiter();
  // seen from a connection outside any transaction ...
  await lockWaiters(await connect(t, url), 2);
  // ... and from the one holding the lock, whose earlier look must not hide it
  assert.equal(await lockWaitsNow(db), 2);
  await db.query('COMMIT');
  await Promise.all([first.blocked, second.blocked]);
});

test('a registration sent again through B with its registration_key while its first try is under way on A is one launcher, answered to both', async (t) => {
  const secret = newSecret();
  const started = await twoCoordinators(t, { 'box-launchers': secret });
  if (started === null) return;
  const { url, A, B } = started;
  const box = { hostname: 'box', host_id: 'h_box00004', executor_type: 'test', registration_key: 'first-life-of-box-0001' };

  // both look the key up and find nothing before either inserts its launcher: the lookups
  // (SELECT ... FOR UPDATE) pass the test's lock, the inserts wait for it
  const {
    db,
    answers: [first, again],
  } = await raceBehindLock(t, url, { sql: 'LOCK TABLE launchers IN SHARE MODE' }, () => [register(A, secret, box), register(B, secret, box)]);
  assert.deepEqual([first.status, again.status], [200, 200], JSON.stringify([first.body, again.body]));
  assert.equal(again.body.launcher_id, first.body.launcher_id);
  const { rows } = await db.query<{ id: string }>('SELECT id FROM launchers');
  assert.deepEqual(rows, [{ id: first.body.launcher_id }]);
  // whichever of the two committed last, the credential of the answer the launcher got works
  assert.equal(await heartbeat(B, again.body.launcher_token, again.body.launcher_id), 200);
  assert.equal(await heartbeat(A, first.body.launcher_token, first.body.launcher_id), 200);
});

test('a first try that reaches A only after its retry was answered by B (its answer lost) leaves the credential of B\'s answer in force', async (t) => {
  const secret = newSecret();
  const started = await twoCoordinators(t, { 'box-launchers': secret });
  if (started === null) return;
  const { A, B } = started;
  const box = { hostname: 'box', host_id: 'h_box00005', executor_type: 'test', registration_key: 'first-life-of-box-0002' };

  const received = await register(B, secret, box);
  const late = await register(A, secret, box);
  assert.deepEqual([received.status, late.status], [200, 200], JSON.stringify([received.body, late.body]));
  assert.equal(late.body.launcher_id, received.body.launcher_id);
  for (const c of [A, B]) assert.equal(await heartbeat(c, received.body.launcher_token, received.body.launcher_id), 200);
});

test("two copies of a keyed tree stop carrying on its unfinished key at once: the key's answer keeps what each stopped", async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const { c, client } = await startTest(t, { databaseUrl: url });
  const l = await fakeLauncher(client);
  const lead = await start(client, 'lead');
  await l.take();
  await l.started(lead.job_id);

  // A first attempt that stops the lead in its first pass and fails in its second, which was to
  // stop a child started just after the tree was read: the key is left unfinished
  const injected = failTreeStopSecondPass(c.core.store, client);
  const stop = async () => {
    const res = await fetch(`${c.url}/sessions/lead/stop?tree=true`, { method: 'POST', headers: { 'idempotency-key': 'twice' } });
    return { status: res.status, body: (await res.json()) as { stopped: Array<{ job_id: string; session_name: string }>; replayed?: true } };
  };
  assert.equal((await stop()).status, 503);
  const { child } = injected;
  assert.ok(child);

  // Sent again twice at once (a retry through another coordinator while the first is under way):
  // both carry on the key, and both come to stop the child, whose session the test holds; the
  // one that gets there second must read the key as the first left it, not as both read it before
  const db = await connect(t, url);
  await db.query('BEGIN');
  await db.query('SELECT * FROM sessions WHERE name = $1 FOR UPDATE', ['child']);
  const copies = [stop(), stop()] as const;
  await lockWaiters(db, 2, copies);
  await db.query('COMMIT');
  const answers = await Promise.all(copies);
  assert.deepEqual(answers.map((a) => a.status), [200, 200], JSON.stringify(answers));

  const whole = [
    { job_id: lead.job_id, session_name: 'lead' },
    { job_id: child.job_id, session_name: 'child' },
  ];
  const ids = (a: { stopped: Array<{ job_id: string; session_name: string }> }) => a.stopped.map(({ job_id, session_name }) => ({ job_id, session_name }));
  for (const a of answers) assert.deepEqual(ids(a.body), whole, JSON.stringify(a.body));
  assert.deepEqual(answers.map((a) => a.body.replayed).sort(), [true, undefined], 'one stopped the child, the other nothing more');
  const replay = await stop();
  assert.deepEqual([ids(replay.body), replay.body.replayed], [whole, true], JSON.stringify(replay.body));
  assert.equal((await client.getJob(child.job_id)).status, 'stopped');
});
