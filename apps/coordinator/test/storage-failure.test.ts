import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AgentqClient } from '@agentq/client';
import type { Logger } from 'pino';
import { endRunning, killOnExit, trackRunning } from '@agentq/test-support';
import { loadConfig } from '../src/config.js';
import { systemClock } from '../src/core/clock.js';
import { CoordinatorError } from '../src/core/errors.js';
import { recover } from '../src/core/recovery.js';
import type { SqliteStore } from '../src/core/store/sqlite-store.js';
import type { Store } from '../src/core/store/store.js';
import { tempDir } from './auth-helpers.js';
import { ManualClock } from '../src/core/clock.js';
import { called, fakeLauncher, nextEvent, recordingLogger, rejectsWith, start, startTest } from './helpers.js';
import { noRetryClient } from './limits-helpers.js';

// issue 11, item 9: a change that cannot be written is not acknowledged, and nothing of it is kept

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));
const big = (n: number) => 'b'.repeat(n);

test('SQLite that refuses writes (full): 503 storage_unavailable, nothing changes; raised again, the coordinator carries on by itself', async (t) => {
  const databaseUrl = `sqlite:${join(tempDir(t), 'agentq.db')}`;
  const { c } = await startTest(t, { databaseUrl, overloadRetryAfterSeconds: 1 });
  const client = noRetryClient(t, c.url);
  const store = c.core.store as SqliteStore;
  const l = await fakeLauncher(client);
  const running = await start(client, 'running');
  await l.take();
  await l.started(running.job_id);
  const before = await client.listJobs();
  const eventsBefore = c.core.events.lastId;

  // "full": the database may not grow past the pages it has
  const pages = store.pragma('page_count') as number;
  store.pragma(`max_page_count = ${pages}`);

  const details = await rejectsWith(start(client, 'refused', big(256 * 1024)), 503, 'storage_unavailable');
  assert.equal(details.sqlite_code, 'SQLITE_FULL');
  assert.equal(details.retry_after_seconds, 5);
  await rejectsWith(client.getSession('refused'), 404, 'session_not_found');
  // a report that needs room is refused too, and the job stays as it was
  await rejectsWith(l.completed(running.job_id, big(256 * 1024)), 503, 'storage_unavailable');
  assert.equal((await client.getJob(running.job_id)).status, 'running');
  assert.deepEqual(await client.listJobs(), before, 'no job changed');
  assert.equal(c.core.events.lastId, eventsBefore, 'no event was sent for what was refused');
  assert.equal((await client.health()).status, 'ok', 'the coordinator stays up');

  // room again: the same requests go through, without a restart
  store.pragma(`max_page_count = ${pages * 1000}`);
  const created = await start(client, 'refused', big(256 * 1024));
  assert.equal(created.status, 'pending');
  await l.completed(running.job_id, big(256 * 1024));
  assert.equal((await client.getJob(running.job_id)).status, 'completed');
  assert.equal((await client.getJob(running.job_id)).result, big(256 * 1024));
});

test('a database that refuses writes: the sweeper says so once, not at every sweep, and no line tells of a change that was refused', async (t) => {
  const databaseUrl = `sqlite:${join(tempDir(t), 'agentq.db')}`;
  const clock = new ManualClock();
  const { log, lines } = recordingLogger();
  const { c } = await startTest(t, { databaseUrl, sweepIntervalMs: 5, claimLeaseSeconds: 60 }, { clock, logger: log });
  const client = noRetryClient(t, c.url);
  const store = c.core.store as SqliteStore;
  const l = await fakeLauncher(client);
  const claimed = await start(client, 'claimed');
  await l.take();
  const pending = await start(client, 'pending');
  const said = (msg: string | RegExp) =>
    lines.map((x) => JSON.parse(x) as { msg: string }).filter((x) => (typeof msg === 'string' ? x.msg === msg : msg.test(x.msg))).length;

  store.pragma('query_only = 1'); // every write is refused from now on, as on a full disk
  await rejectsWith(client.stopJob(pending.job_id), 503, 'storage_unavailable');
  assert.equal((await client.getJob(pending.job_id)).status, 'pending');
  // the claim's lease runs out: every sweep tries to put the job back in the queue, and is refused
  clock.advance(61_000);
  for (let i = 0; i < 5; i++) await called(c.core, 'sweep'); // a sweep starts once the one before has ended
  assert.equal((await client.getJob(claimed.job_id)).status, 'claimed');
  assert.equal(said('job stopped'), 0, 'the refused stop is not logged as done');
  assert.equal(said(/^job requeued/), 0, 'the refused requeue is not logged as done');
  assert.equal(said(/^sweep failed/), 1, 'one line for all the refused sweeps');

  store.pragma('query_only = 0'); // room again
  await nextEvent(c.core, 'job.requeued');
  await called(c.core, 'sweep');
  assert.equal((await client.getJob(claimed.job_id)).status, 'pending');
  assert.equal(said(/^job requeued/), 1);
  assert.equal(said('sweeps work again'), 1);
  assert.equal(said(/^sweep failed/), 1);
});

test('an output batch refused by a full database is stored when the launcher sends it again', async (t) => {
  const databaseUrl = `sqlite:${join(tempDir(t), 'agentq.db')}`;
  const { c } = await startTest(t, { databaseUrl });
  const client = noRetryClient(t, c.url);
  const store = c.core.store as SqliteStore;
  const l = await fakeLauncher(client);
  const job = await start(client, 'talkative');
  await l.take();
  await l.started(job.job_id);
  await client.reportOutput(job.job_id, { launcher_id: l.id, offset: 0, data: 'first ' });
  const pages = store.pragma('page_count') as number;
  store.pragma(`max_page_count = ${pages}`);
  const batch = { launcher_id: l.id, offset: 6, data: big(200 * 1024) };
  await rejectsWith(client.reportOutput(job.job_id, batch), 503, 'storage_unavailable');
  assert.equal((await client.getOutput(job.job_id, { offset: 0 })).total_bytes, 6, 'nothing of the refused batch is kept');
  store.pragma(`max_page_count = ${pages * 1000}`);
  await client.reportOutput(job.job_id, batch); // the launcher's retry: same offset
  const out = await client.getOutput(job.job_id, { offset: 0, limit_bytes: 1024 * 1024 });
  assert.equal(out.total_bytes, 6 + 200 * 1024);
  assert.equal(out.output, `first ${big(200 * 1024)}`);
});

/** Whether this process may mount a tmpfs (root in CI; the test is skipped, loudly, elsewhere). */
function canMount(): boolean {
  if (process.getuid?.() !== 0) return false;
  const dir = mkdtempSync(join(tmpdir(), 'agentq-mount-probe-'));
  try {
    const ok = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir]).status === 0;
    if (ok) spawnSync('umount', [dir]);
    return ok;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
const mountable = canMount();
if (!mountable) {
  console.error('\n*** SKIPPED: the full-disk test needs root to mount a small tmpfs; CI (root) must run it ***\n');
}

/** The real coordinator process on `databaseUrl`; resolves with its URL once it listens. */
async function coordinatorProcess(
  t: TestContext,
  databaseUrl: string,
  env: Record<string, string> = {},
): Promise<{ url: string; kill(): Promise<void>; stop(): Promise<void>; log: string[] }> {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: databaseUrl, OVERLOAD_RETRY_AFTER: '1', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    await once(child, 'exit');
  };
  const kill = () => end('SIGKILL');
  const log: string[] = [];
  killOnExit(child);
  trackRunning(t, kill); // before its database's directory goes
  t.after(kill);
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`the coordinator exited (${String(code)}) before it was ready`);
  });
  const ready = (async () => {
    const lines = createInterface({ input: child.stdout });
    for await (const line of lines) {
      const entry = JSON.parse(line) as { msg?: string; url?: string };
      log.push(entry.msg ?? '');
      if (entry.msg === 'coordinator ready') {
        lines.on('line', (l) => log.push((JSON.parse(l) as { msg?: string }).msg ?? '')); // keep draining the log
        return entry.url!;
      }
    }
    throw new Error('stdout ended');
  })();
  const url = await Promise.race([ready, exited]);
  return { url, kill, stop: () => end('SIGTERM'), log };
}

/** Fill what is left of the file system holding `path`, to the last byte. */
function fillUp(path: string): void {
  const fd = openSync(path, 'w');
  try {
    for (const size of [64 * 1024, 4096, 512, 1]) {
      for (;;) {
        try {
          writeSync(fd, Buffer.alloc(size));
        } catch {
          break;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
}

/** A 4 MiB tmpfs of its own (root only: see `mountable`), unmounted when the test ends. */
function smallDisk(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-full-disk-'));
  assert.equal(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', dir]).status, 0);
  t.after(async () => {
    await endRunning(t); // the coordinators with their database on it
    spawnSync('umount', ['-l', dir]);
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

test('a full disk: creates are refused, every acknowledged job survives kill -9, the restart needs no space, freed space is used at once', { skip: !mountable, timeout: 120_000 }, async (t) => {
  const dir = smallDisk(t);
  const databaseUrl = `sqlite:${join(dir, 'agentq.db')}`;
  writeFileSync(join(dir, 'filler'), Buffer.alloc(1024 * 1024));

  const first = await coordinatorProcess(t, databaseUrl);
  let client = new AgentqClient({ url: first.url, overloadRetries: 0 });
  // one job claimed by a launcher: after a restart it goes back to the queue (a write)
  const l = await fakeLauncher(client);
  const claimed = await start(client, 'claimed', 'p');
  assert.equal((await l.take()).job_id, claimed.job_id);
  const acknowledged: string[] = [];
  let refusedAt = -1;
  for (let i = 0; i < 200 && refusedAt < 0; i++) {
    try {
      acknowledged.push((await start(client, `s${i}`, big(64 * 1024))).job_id);
    } catch (err) {
      assert.equal((err as { code?: string }).code, 'storage_unavailable', String(err));
      refusedAt = i;
    }
  }
  assert.ok(refusedAt > 0, 'the disk filled up');
  assert.equal((await client.health()).status, 'ok');
  await rejectsWith(client.getSession(`s${refusedAt}`), 404, 'session_not_found');
  await client.close();
  await first.kill(); // kill -9: no clean shutdown, no checkpoint
  fillUp(join(dir, 'last-bytes')); // not even a page left

  // the disk is full: the restart reads its state all the same. (Its recovery, the claimed job
  // back to the queue, is written if SQLite can reuse room in its WAL, else left to the sweeper.)
  const second = await coordinatorProcess(t, databaseUrl, { JOB_CLAIM_LEASE: '1', SWEEP_INTERVAL_MS: '100' });
  client = new AgentqClient({ url: second.url, overloadRetries: 0 });
  t.after(() => client.close());
  for (const id of acknowledged) assert.equal((await client.getJob(id)).status, 'pending');
  const claimedNow = (await client.getJob(claimed.job_id)).status;
  assert.ok(claimedNow === 'pending' || claimedNow === 'claimed', claimedNow);
  assert.equal((await client.health()).queue_depth, acknowledged.length + (claimedNow === 'pending' ? 1 : 0));
  await rejectsWith(start(client, 'still-full', big(64 * 1024)), 503, 'storage_unavailable');

  // space comes back: writes go through with no restart, and the recovery left to the sweeper is done
  const events = client.events({ lastEventId: 0 });
  rmSync(join(dir, 'filler'));
  rmSync(join(dir, 'last-bytes'));
  for await (const m of events) {
    if (m.event === 'job.requeued' && (JSON.parse(m.data) as { job: { job_id: string } }).job.job_id === claimed.job_id) break;
  }
  assert.equal((await client.getJob(claimed.job_id)).status, 'pending');
  assert.equal((await start(client, 'room-again', big(64 * 1024))).status, 'pending');
  assert.equal((await client.health()).queue_depth, acknowledged.length + 2);
});

test('a full disk after a clean shutdown: the restart reads its state without room for the WAL index, and writes once space returns', { skip: !mountable, timeout: 120_000 }, async (t) => {
  const dir = smallDisk(t);
  const databaseUrl = `sqlite:${join(dir, 'agentq.db')}`;
  const first = await coordinatorProcess(t, databaseUrl);
  let client = new AgentqClient({ url: first.url, overloadRetries: 0 });
  const jobs = [await start(client, 'one'), await start(client, 'two')];
  await client.close();
  // a clean shutdown checkpoints the WAL and deletes it and its index (-shm): a start must make them again
  await first.stop();
  fillUp(join(dir, 'filler'));

  const second = await coordinatorProcess(t, databaseUrl);
  client = new AgentqClient({ url: second.url, overloadRetries: 0 });
  t.after(() => client.close());
  for (const job of jobs) assert.equal((await client.getJob(job.job_id)).status, 'pending');
  assert.equal((await client.health()).queue_depth, 2);
  await rejectsWith(start(client, 'full', big(64 * 1024)), 503, 'storage_unavailable');
  rmSync(join(dir, 'filler'));
  assert.equal((await start(client, 'room-again', big(64 * 1024))).status, 'pending');
  assert.equal((await client.health()).queue_depth, 3);
  assert.ok(second.log.includes('database opened without room for its shared-memory index: checkpoints run in commits until a restart'), second.log.join('\n'));
});

test('a restart whose recovery cannot be written still starts: recovery is left to the sweeper', async () => {
  const logged: string[] = [];
  const log = { info: () => undefined, error: (_o: unknown, msg: string) => logged.push(msg) } as unknown as Logger;
  const store = {
    shared: false,
    activeJobIds: async () => ['job_000000000001'],
    transaction: async () => {
      throw new CoordinatorError('storage_unavailable', 'the database refused the change: database or disk is full');
    },
  } as unknown as Store;
  await recover({ store, log, config: loadConfig({}), clock: systemClock });
  assert.deepEqual(logged, ['recovery not written (the database refuses writes): left to the sweeper']);
  // any other failure still stops the start
  const broken = { ...store, transaction: async () => Promise.reject(new Error('bug')) } as unknown as Store;
  await assert.rejects(recover({ store: broken, log, config: loadConfig({}), clock: systemClock }), /bug/);
});

test('SQLite keeps at most 64 MiB of finished jobs in memory; the rest is read back from the file', async (t) => {
  const databaseUrl = `sqlite:${join(tempDir(t), 'agentq.db')}`;
  const { c, client } = await startTest(t, { databaseUrl, maxPromptBytes: 2 * 1024 * 1024 });
  const store = c.core.store as SqliteStore;
  const l = await fakeLauncher(client);
  const ids: string[] = [];
  for (let i = 0; i < 40; i++) {
    const job = await start(client, `big-${i}`, big(1024 * 1024));
    await l.take();
    await l.completed(job.job_id, big(1024 * 1024)); // 2 MiB a job, and 1 MiB in its session
    ids.push(job.job_id);
  }
  await c.core.sweep();
  const hot = store.hotWindow();
  assert.ok(hot.endedJobs <= 32, `${hot.endedJobs} finished jobs of 2 MiB in memory`);
  assert.ok(hot.endedJobs >= 20, 'the window is used');
  for (const id of [ids[0]!, ids.at(-1)!]) {
    const job = await client.getJob(id);
    assert.equal(job.prompt.length, 1024 * 1024);
    assert.equal(job.result?.length, 1024 * 1024);
  }
  assert.equal((await client.getSession('big-0')).last_result?.length, 1024 * 1024);
});

test('a full database under a sync: a report it could not store is answered storage_unavailable (not acknowledged), one that fits is stored', async (t) => {
  const databaseUrl = `sqlite:${join(tempDir(t), 'agentq.db')}`;
  const { c } = await startTest(t, { databaseUrl });
  const client = noRetryClient(t, c.url);
  const store = c.core.store as SqliteStore;
  const l = await fakeLauncher(client);
  const a = await start(client, 'a');
  const b = await start(client, 'b');
  await l.poll({ batch: true, capacity: 2 });
  const pages = store.pragma('page_count') as number;
  store.pragma(`max_page_count = ${pages}`);
  // the batch's one transaction is refused (the results do not fit); each on its own: the start
  // fits, the results do not and are refused with the 503 their single endpoint answers
  const res = await client.sync({
    launcher_id: l.id,
    capacity: 0,
    reports: [
      { job_id: a.job_id, kind: 'started' },
      { job_id: b.job_id, kind: 'completed', result: big(256 * 1024) },
      { job_id: a.job_id, kind: 'completed', result: big(256 * 1024) },
    ],
  });
  assert.deepEqual(
    res.results.map((r) => [r.job_id, r.kind, r.ok, r.error?.code ?? null]),
    [
      [a.job_id, 'started', true, null],
      [b.job_id, 'completed', false, 'storage_unavailable'],
      [a.job_id, 'completed', false, 'storage_unavailable'],
    ],
  );
  assert.equal((await client.getJob(a.job_id)).status, 'running');
  assert.equal((await client.getJob(b.job_id)).status, 'claimed');
});
