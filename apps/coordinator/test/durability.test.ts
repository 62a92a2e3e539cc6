import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { chmodSync, chownSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { AgentqClient, AgentqApiError } from '@agentq/client';
import type { Job } from '@agentq/protocol';
import { ConfigError, loadConfig } from '../src/config.js';
import { ManualClock } from '../src/core/clock.js';
import { Coordinator } from '../src/core/coordinator.js';
import { migrate, SCHEMA_VERSION } from '../src/core/store/sqlite-schema.js';
import { rejectsWith, resume, start } from './helpers.js';
import { spawnCoordinator, spawnCoordinatorOn, tempDatabase, type CoordinatorProcess } from './process.js';

/*
 * Restart semantics on the default store (docs/operations.md, "Restarts"): the coordinator
 * process is killed with SIGKILL and started again on the same SQLite file.
 */

/** A launcher played over the client, by id (it keeps its id across coordinator restarts). */
function asLauncher(client: AgentqClient, id: string) {
  return {
    id,
    poll: (capacity = 1) => client.poll(id, { holdSeconds: 1, capacity, batch: true }),
    started: (jobId: string) => client.reportStarted(jobId, { launcher_id: id }),
    output: (jobId: string, offset: number, data: string) => client.reportOutput(jobId, { launcher_id: id, offset, data }),
    completed: (jobId: string, result: string) => client.reportCompleted(jobId, { launcher_id: id, result }),
    stopped: (jobId: string) => client.reportStopped(jobId, { launcher_id: id, signal: 'SIGTERM' }),
    heartbeat: () => client.heartbeat({ launcher_id: id }),
  };
}

/** `POST /jobs` with an Idempotency-Key header: the status and the job. */
async function createKeyed(url: string, key: string, body: object): Promise<{ status: number; job: Job }> {
  const res = await fetch(`${url}/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  });
  return { status: res.status, job: (await res.json()) as Job };
}

async function claimOne(l: ReturnType<typeof asLauncher>, expected: string): Promise<Job> {
  const answer = await l.poll(1);
  assert.equal(answer?.job?.job_id, expected);
  return answer!.job!;
}

async function restart(t: Parameters<typeof spawnCoordinator>[0], old: CoordinatorProcess, env: Record<string, string>) {
  await old.kill();
  return spawnCoordinatorOn(t, old.port, env);
}

test('SIGKILL and restart: every job comes back as the restart semantics say', async (t) => {
  const env = { DATABASE_URL: tempDatabase(t) };
  let c = await spawnCoordinator(t, env);
  const { launcher_id } = await c.client.register({ hostname: 'h1', executor_type: 'test' });
  let l = asLauncher(c.client, launcher_id);

  const done = await start(c.client, 'done');
  await claimOne(l, done.job_id);
  await l.started(done.job_id);
  await l.output(done.job_id, 0, 'hello\n');
  await l.completed(done.job_id, 'the answer');
  const running = await start(c.client, 'running');
  await claimOne(l, running.job_id);
  await l.started(running.job_id);
  await l.output(running.job_id, 0, 'half');
  const stopping = await start(c.client, 'stopping');
  await claimOne(l, stopping.job_id);
  await l.started(stopping.job_id);
  assert.equal((await c.client.stopJob(stopping.job_id)).outcome, 'stopping');
  assert.deepEqual((await l.poll(0))?.stop_jobs, [stopping.job_id]); // told once before the crash
  const claimed = await start(c.client, 'claimed');
  await claimOne(l, claimed.job_id);
  const pendingA = await start(c.client, 'pending-a');
  const pendingB = await start(c.client, 'pending-b');

  c = await restart(t, c, env);
  l = asLauncher(c.client, launcher_id);
  const get = (j: Job) => c.client.getJob(j.job_id);

  const d = await get(done);
  assert.equal(d.status, 'completed');
  assert.equal(d.result, 'the answer');
  assert.equal((await c.client.getOutput(done.job_id, { offset: 0 })).output, 'hello\n', 'output survives');
  assert.equal((await get(running)).status, 'running', 'a running job keeps running');
  assert.equal((await c.client.getOutput(running.job_id, { offset: 0 })).output, 'half');
  assert.equal((await get(stopping)).status, 'stopping');
  const requeued = await get(claimed);
  assert.equal(requeued.status, 'pending', 'a claimed job goes back to the queue');
  assert.equal(requeued.attempts, 1);
  assert.equal((await get(pendingA)).status, 'pending');
  assert.equal((await get(pendingB)).status, 'pending');

  // the launcher carries on with the same id: the stop still stands, its reports are accepted
  assert.deepEqual((await l.heartbeat()).stop_jobs, [stopping.job_id]);
  await l.output(running.job_id, 4, ' and more');
  await l.completed(running.job_id, 'finished across the restart');
  await l.stopped(stopping.job_id);
  assert.equal((await get(running)).status, 'completed');
  assert.equal((await c.client.getOutput(running.job_id, { offset: 0 })).output, 'half and more');
  assert.equal((await get(stopping)).status, 'stopped');
  // claimed first, then the pending ones: the queue kept its creation order
  const answer = await l.poll(3);
  assert.deepEqual(
    answer?.jobs?.map((j) => j.job_id),
    [claimed.job_id, pendingA.job_id, pendingB.job_id],
  );
  // sessions are known: a start is refused, a resume is queued
  await rejectsWith(start(c.client, 'done'), 409, 'session_exists');
  assert.equal((await resume(c.client, 'done')).session_name, 'done');
});

test('a launcher that does not come back within the heartbeat timeout after a restart: its running job is interrupted', async (t) => {
  const env = { DATABASE_URL: tempDatabase(t), LAUNCHER_HEARTBEAT_INTERVAL: '1', LAUNCHER_HEARTBEAT_TIMEOUT: '2', SWEEP_INTERVAL_MS: '100' };
  let c = await spawnCoordinator(t, env);
  const { launcher_id } = await c.client.register({ hostname: 'gone', executor_type: 'test' });
  const l = asLauncher(c.client, launcher_id);
  const job = await start(c.client, 'orphan');
  await claimOne(l, job.job_id);
  await l.started(job.job_id);
  c = await restart(t, c, env);
  const ended = await c.client.waitJob(job.job_id, 20_000);
  assert.equal(ended.status, 'interrupted');
  assert.equal(ended.error_code, 'launcher_lost');
});

test('sessions, queued callbacks, timeouts, Idempotency-Keys and list cursors survive a SIGKILL', async (t) => {
  const env = { DATABASE_URL: tempDatabase(t) };
  let c = await spawnCoordinator(t, env);
  const { launcher_id } = await c.client.register({ hostname: 'h', executor_type: 'test' });
  let l = asLauncher(c.client, launcher_id);

  const parent = await start(c.client, 'parent');
  await claimOne(l, parent.job_id);
  await l.started(parent.job_id);
  const child = await start(c.client, 'child', 'do it', { parent_session_name: 'parent' });
  await claimOne(l, child.job_id);
  await l.completed(child.job_id, 'child result');
  assert.equal((await c.client.getSession('parent')).pending_callbacks.length, 1, 'queued: the parent is busy');

  const keyed = await createKeyed(c.url, 'k-1', { type: 'start_session', session_name: 'keyed', prompt: 'once' });
  assert.equal(keyed.status, 201);
  const expiring = await start(c.client, 'expiring', 'x', { timeout_ms: 1500 });
  const page1 = await c.client.listJobs({ limit: 2 });
  assert.ok(page1.next_cursor);

  c = await restart(t, c, env);
  l = asLauncher(c.client, launcher_id);

  // the page after the cursor given before the restart: the same jobs as without a restart
  const page2 = await c.client.listJobs({ limit: 10, cursor: page1.next_cursor! });
  assert.deepEqual(
    page2.jobs.map((j) => j.job_id),
    [child.job_id, parent.job_id],
  );
  // the same key and body: the first job, not a new one
  const again = await createKeyed(c.url, 'k-1', { type: 'start_session', session_name: 'keyed', prompt: 'once' });
  assert.equal(again.status, 200);
  assert.equal(again.job.job_id, keyed.job.job_id);
  // the queued callback is delivered when the parent's turn ends
  const callbacks = (await c.client.getSession('parent')).pending_callbacks;
  assert.deepEqual(callbacks.map((n) => [n.job_id, n.result]), [[child.job_id, 'child result']]);
  await l.completed(parent.job_id, 'parent turn');
  const s = await c.client.getSession('parent');
  assert.ok(s.callback_job_id);
  assert.deepEqual((await c.client.getJob(s.callback_job_id)).callback_of, [child.job_id]);
  // the timeout still runs
  assert.equal((await c.client.waitJob(expiring.job_id, 20_000)).status, 'timed_out');
});

test('jobs created from several clients while the coordinator is SIGKILLed at random moments: every 201 survives, none twice', async (t) => {
  const env = { DATABASE_URL: tempDatabase(t) };
  let c = await spawnCoordinator(t, env);
  const acknowledged = new Map<string, string>(); // session -> job id
  let attempts = 0;
  let stop = false;
  const creator = async (n: number) => {
    for (let i = 0; !stop; i++) {
      const client = new AgentqClient({ url: c.url, connections: 2 });
      try {
        for (let k = 0; k < 20 && !stop; k++, i++) {
          const session = `w${n}-${i}`;
          attempts++;
          const job = await client.createJob({ type: 'start_session', session_name: session, prompt: 'x' });
          acknowledged.set(session, job.job_id);
        }
      } catch (err) {
        // the coordinator died under us: the answer may be lost, the job may or may not exist
        if (err instanceof AgentqApiError && err.status < 500) throw err;
      } finally {
        await client.destroy();
      }
      if (!stop) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  };
  const creators = [0, 1, 2, 3].map(creator);
  for (let round = 0; round < 3; round++) {
    const target = acknowledged.size + 30 + randomInt(60);
    await new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (acknowledged.size >= target) {
          clearInterval(check);
          resolve();
        }
      }, 5);
    });
    c = await restart(t, c, env);
  }
  stop = true;
  await Promise.all(creators);

  const all: Job[] = [];
  for (let cursor: string | null | undefined = undefined; cursor !== null; ) {
    const page = await c.client.listJobs({ limit: 1000, ...(cursor ? { cursor } : {}) });
    all.push(...page.jobs);
    cursor = page.next_cursor;
  }
  const bySession = new Map<string, Job[]>();
  for (const job of all) bySession.set(job.session_name, [...(bySession.get(job.session_name) ?? []), job]);
  for (const [session, jobId] of acknowledged) {
    assert.deepEqual(bySession.get(session)?.map((j) => j.job_id), [jobId], `${session}: acknowledged once, kept once`);
  }
  assert.equal(new Set(all.map((j) => j.job_id)).size, all.length, 'no job twice');
  assert.ok(all.length <= attempts);
  assert.ok(acknowledged.size >= 90);
});

test('a database made by the first schema version opens with the current code', async (t) => {
  const url = tempDatabase(t);
  const path = url.slice('sqlite:'.length);
  const db = new Database(path);
  migrate(db, 1);
  db.prepare(
    `INSERT INTO sessions (seq, name, root_name, depth, created_at, updated_at, callbacks, messages, deliveries_held,
       accepts_input, usage, cost_usd, tree_usage, tree_cost_usd)
     VALUES (1, 'old', 'old', 0, 1700000000000, 1700000000000, '[]', '[]', 0, 1, ?, 0, ?, 0)`,
  ).run(JSON.stringify(ZERO), JSON.stringify(ZERO));
  db.prepare(
    `INSERT INTO jobs (seq, id, type, session_name, prompt, created_at, status, updated_at, ready_since, route_key)
     VALUES (1, 'job_0123456789ab', 'start_session', 'old', 'from v1', 1700000000000, 'pending', 1700000000000, 1700000000000, ?)`,
  ).run(JSON.stringify([[], null, null]));
  db.close();

  const core = await Coordinator.open(loadConfig({}, { databaseUrl: url, logLevel: 'silent' }));
  t.after(() => core.shutdown());
  const job = await core.getJob('job_0123456789ab');
  assert.equal(job.prompt, 'from v1');
  assert.equal(job.status, 'pending');
  assert.equal((await core.register({ hostname: 'h' })).launcher_id.startsWith('lnch_'), true);
  const check = new Database(path, { readonly: true });
  // the coordinator holds the file exclusively: read the version after it closed
  await core.shutdown();
  assert.equal(check.pragma('user_version', { simple: true }), SCHEMA_VERSION);
  check.close();
});

test('a database of other software at DATABASE_URL is refused and left as it was', async (t) => {
  for (const version of [0, 7]) {
    const url = tempDatabase(t);
    const path = url.slice('sqlite:'.length);
    const db = new Database(path);
    db.exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES (1, 'bob')");
    db.pragma(`user_version = ${version}`);
    db.close();
    await assert.rejects(
      Coordinator.open(loadConfig({}, { databaseUrl: url, logLevel: 'silent' })),
      (e: Error) => e instanceof ConfigError && e.variable === 'DATABASE_URL' && /not an agentq database/.test(e.message),
    );
    const check = new Database(path, { readonly: true });
    assert.deepEqual(check.prepare('SELECT name FROM sqlite_master').pluck().all(), ['users'], 'no table added');
    assert.equal(check.pragma('journal_mode', { simple: true }), 'delete', 'not turned to WAL');
    assert.equal(check.pragma('user_version', { simple: true }), version);
    check.close();
  }
});

test('JOB_SCHEDULE_TIMEOUT goes on counting across a restart: it is neither started over nor cut short', async (t) => {
  const url = tempDatabase(t);
  const clock = new ManualClock();
  const config = loadConfig({}, { databaseUrl: url, logLevel: 'silent', scheduleTimeoutSeconds: 30 });
  let core = await Coordinator.open(config, { clock });
  t.after(() => core.shutdown());
  const { job } = await core.createJob({ type: 'start_session', session_name: 'gpu', prompt: 'x', requires: { gpu: 'a100' } });
  await core.sweep(); // the route is unserved from now on
  clock.advance(20_000);
  await core.sweep();
  await core.shutdown();

  core = await Coordinator.open(config, { clock });
  await core.sweep();
  assert.equal((await core.getJob(job.job_id)).status, 'pending', 'not cut short: 20 s of 30 have passed');
  clock.advance(10_000);
  await core.sweep();
  const failed = await core.getJob(job.job_id);
  assert.equal(failed.status, 'failed', '30 s after the route was first seen unserved, restart or not');
  assert.equal(failed.error_code, 'no_matching_launcher');
});

test('a database file the coordinator may not write is refused at start, naming DATABASE_URL', async (t) => {
  const url = tempDatabase(t);
  const path = url.slice('sqlite:'.length);
  const made = await spawnCoordinator(t, { DATABASE_URL: url });
  await made.kill();
  chmodSync(path, 0o444);
  // root writes whatever the mode says: run the coordinator as nobody then
  const asNobody = process.getuid?.() === 0;
  if (asNobody) {
    chownSync(dirname(path), 65534, 65534);
    for (const f of readdirSync(dirname(path))) chownSync(join(dirname(path), f), 65534, 65534);
  }
  const run = spawnSync(process.execPath, [fileURLToPath(new URL('../src/main.js', import.meta.url))], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: url },
    encoding: 'utf8',
    timeout: 30_000,
    ...(asNobody ? { uid: 65534, gid: 65534 } : {}),
  });
  assert.equal(run.status, 2, `exits as for a configuration error, not ready: ${run.stdout}`);
  assert.match(run.stderr, /DATABASE_URL: cannot open .* read-only/);
});

test('a database whose directory the coordinator may not write is refused at start, naming DATABASE_URL and the lock file', async (t) => {
  const url = tempDatabase(t);
  const path = url.slice('sqlite:'.length);
  const made = await spawnCoordinator(t, { DATABASE_URL: url });
  await made.kill();
  rmSync(`${path}-lock`);
  const asNobody = process.getuid?.() === 0;
  if (asNobody) {
    for (const f of readdirSync(dirname(path))) chownSync(join(dirname(path), f), 65534, 65534);
  }
  chmodSync(dirname(path), 0o555);
  const run = spawnSync(process.execPath, [fileURLToPath(new URL('../src/main.js', import.meta.url))], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: url },
    encoding: 'utf8',
    timeout: 30_000,
    ...(asNobody ? { uid: 65534, gid: 65534 } : {}),
  });
  chmodSync(dirname(path), 0o700); // the temporary directory can be removed again
  assert.equal(run.status, 2, `exits as for a configuration error: ${run.stderr}`);
  assert.match(run.stderr, /DATABASE_URL: cannot open .*: its lock file .*-lock cannot be opened/);
});

const ZERO = { input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 };
