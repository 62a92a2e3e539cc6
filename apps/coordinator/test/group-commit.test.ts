import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { AgentqApiError, AgentqClient } from '@agentq/client';
import { ZERO_USAGE, type JobRow, type SessionRow } from '../src/core/rows.js';
import { emptyChangeSet, inverseOf } from '../src/core/store/changes.js';
import { MemoryState } from '../src/core/store/memory-state.js';
import { SqliteStore } from '../src/core/store/sqlite-store.js';
import { systemClock } from '../src/core/clock.js';
import { pino } from 'pino';
import { spawnCoordinatorProcess } from './coordinator-process.js';
import { closeAfter, jobRowFixture, start, startTest, tempDir as tempDirOf } from './helpers.js';

/*
 * The SQLite store commits the transactions of concurrent requests as one group (sqlite-store.ts):
 * an answer leaves only once its group is on disk, and a group that cannot be written is undone
 * in memory and refused as a whole.
 */

/** Removed once the test's stores and coordinators (closeAfter, startTest) have closed. */
const tempDir = (t: TestContext): string => tempDirOf(t, 'agentq-group-commit-');

/** Commits in the database's write-ahead log since it was last reset (frames that end a transaction). */
function walCommits(dbPath: string): number {
  const wal = readFileSync(`${dbPath}-wal`);
  if (wal.length < 32) return 0;
  const pageSize = wal.readUInt32BE(8);
  const salt1 = wal.readUInt32BE(16);
  const salt2 = wal.readUInt32BE(20);
  let commits = 0;
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    if (wal.readUInt32BE(at + 8) !== salt1 || wal.readUInt32BE(at + 12) !== salt2) break; // left from before a reset
    if (wal.readUInt32BE(at + 4) !== 0) commits++;
  }
  return commits;
}

/**
 * Hold the write-ahead log from starting over while its commits are counted: a checkpoint that
 * copied every frame back lets the next write start the log from its beginning (the counts would
 * go down), and the store's checkpointer runs a pass a quarter second after writes, as a slow
 * machine leaves between two of them. A reader with a snapshot keeps the frames after it in use.
 */
function holdWal(t: TestContext, dbPath: string): void {
  const reader = new Database(dbPath, { readonly: true });
  reader.exec('BEGIN');
  reader.prepare('SELECT count(*) FROM jobs').get();
  closeAfter(t, {
    close: async () => {
      if (!reader.open) return;
      reader.exec('COMMIT');
      reader.close();
    },
  });
}

test('SQLite: each answer leaves after its commit; concurrent requests share commits', async (t) => {
  const path = join(tempDir(t), 'agentq.db');
  const { c, client } = await startTest(t, { databaseUrl: `sqlite:${path}`, sweepIntervalMs: 600_000 });
  await start(client, 'warm-up');
  holdWal(t, path);
  // a checkpoint between two counts, as a slow machine has: the log must not start over
  await (c.core.store as SqliteStore).checkpoints.checkpoint();

  // one at a time: each 201 finds its own commit already in the log
  for (let i = 0; i < 5; i++) {
    const before = walCommits(path);
    await start(client, `one-by-one-${i}`);
    assert.equal(walCommits(path), before + 1, `create ${i} was committed before it was answered`);
  }

  // twenty at once: every one is answered, in fewer commits than requests
  const before = walCommits(path);
  const jobs = await Promise.all(Array.from({ length: 20 }, (_, i) => start(client, `at-once-${i}`)));
  const commits = walCommits(path) - before;
  assert.equal(new Set(jobs.map((j) => j.job_id)).size, 20);
  assert.ok(commits >= 1 && commits < 20, `20 concurrent creates took ${commits} commits`);
  assert.equal((await client.listJobs({ limit: 100 })).jobs.length, 26);
});

test('SQLite: a group of commits that cannot be written is refused whole and undone; nothing of it is seen, before or after a restart', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'agentq.db');
  const env = { DATABASE_URL: `sqlite:${path}` };
  const first = await spawnCoordinatorProcess(t, env);
  const client = new AgentqClient({ url: first.url, overloadRetries: 0 });
  t.after(() => client.close());
  await start(client, 'warm-up');

  // the process may not write past 512 KiB more of write-ahead log (RLIMIT_FSIZE: a disk that
  // fills up): writes fail when a group is committed, not before
  const limit = readFileSync(`${path}-wal`).length + 512 * 1024;
  execFileSync('prlimit', ['--pid', String(first.child.pid), `--fsize=${limit}:`]);

  const prompt = 'p'.repeat(24 * 1024);
  const acknowledged = new Set<string>();
  let refused = 0;
  for (let round = 0; round < 50 && refused === 0; round++) {
    const answers = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => start(client, `r${round}-${i}`, prompt)));
    for (const a of answers) {
      if (a.status === 'fulfilled') acknowledged.add(a.value.job_id);
      else if (a.reason instanceof AgentqApiError && a.reason.code === 'storage_unavailable') refused++;
      else throw a.reason;
    }
  }
  assert.ok(refused > 0, 'the log filled up');
  assert.ok(acknowledged.size > 0);

  // memory holds exactly what was acknowledged: the refused groups were undone
  const listed = async (c: AgentqClient) => {
    const { jobs } = await c.listJobs({ limit: 1000 });
    return new Set(jobs.filter((j) => j.session_name !== 'warm-up').map((j) => j.job_id));
  };
  assert.deepEqual(await listed(client), acknowledged);

  // room again: the coordinator carries on by itself
  execFileSync('prlimit', ['--pid', String(first.child.pid), '--fsize=unlimited:']);
  const after = await start(client, 'after', prompt);
  acknowledged.add(after.job_id);
  assert.deepEqual(await listed(client), acknowledged);

  // and the file holds the same
  await first.kill();
  const second = await spawnCoordinatorProcess(t, env);
  const again = new AgentqClient({ url: second.url });
  t.after(() => again.close());
  assert.deepEqual(await listed(again), acknowledged);
});

const jobRow = (seq: number): JobRow => jobRowFixture(seq);

test('undoing a group that ended jobs makes them live again in the lists, also after the live list dropped them', () => {
  const state = new MemoryState(false);
  const rows = Array.from({ length: 1100 }, (_, i) => jobRow(i + 1));
  const created = emptyChangeSet(rows.length, 0);
  for (const r of rows) created.jobs.set(r.id, { kind: 'insert', before: undefined, after: r, patch: r });
  state.apply(created);
  // 1,100 end at once: the list of live jobs is compacted on the way (over 1,024 dead entries)
  const ended = emptyChangeSet(rows.length, 0);
  for (const r of rows) {
    const patch = { status: 'completed' as const, completedAt: 1 };
    ended.jobs.set(r.id, { kind: 'update', before: r, after: { ...r, ...patch }, patch });
  }
  state.apply(ended);
  assert.deepEqual(state.listJobs({ terminal: false, limit: 10 }), []);
  assert.deepEqual(state.statusCounts(), { completed: 1100 });

  state.apply(inverseOf(ended));
  const live = state.listJobs({ terminal: false, limit: 2000 }).map((j) => j.seq);
  assert.deepEqual(live, rows.map((r) => r.seq).reverse(), 'every job once, newest first');
  assert.deepEqual(state.statusCounts(), { pending: 1100 }, 'the counts undone with the group');
});

test('undoing a group that queued, carried or deleted child outcomes gives the held outcome bytes back as they were', () => {
  const state = new MemoryState(false);
  const parent: SessionRow = {
    seq: 1, name: 'parent', agentName: null, projectDir: null, parentName: null, rootName: 'parent', depth: 0, createdAt: 0,
    createdBy: null, updatedAt: 0, executorSessionId: null, lastJobStatus: null, lastResult: null, lastError: null, callbacks: [],
    messages: [], deliveryJobId: null, inFlight: null, deliveriesHeld: false, affinity: null, acceptsInput: true, usage: ZERO_USAGE,
    costUsd: 0, treeUsage: ZERO_USAGE, treeCostUsd: 0, budgetUsd: null, requires: null,
  };
  const outcome = { child_session_name: 'kid', job_id: 'job_000000000001', outcome: 'completed' as const, result: 'r'.repeat(100), error: 'é', ended_at: '1970-01-01T00:00:00.000Z' };
  const change = (before: SessionRow | undefined, patch: Partial<SessionRow> | null) => {
    const c = emptyChangeSet(0, 1);
    if (!before) c.sessions.set(parent.name, { kind: 'insert', before: undefined, after: parent, patch: parent });
    else if (patch === null) c.sessions.set(parent.name, { kind: 'delete', before, after: undefined, patch: null });
    else c.sessions.set(parent.name, { kind: 'update', before, after: { ...before, ...patch }, patch });
    return c;
  };
  state.apply(change(undefined, {}));
  // the outcome is queued, then undone
  const queued = change(parent, { callbacks: [outcome] });
  state.apply(queued);
  assert.equal(state.outcomeBytes, 102);
  state.apply(inverseOf(queued));
  assert.equal(state.outcomeBytes, 0);
  // queued again, then carried by a delivery whose group is undone: queued as before
  state.apply(queued);
  const withOutcome = state.sessions.get('parent')!;
  const delivered = change(withOutcome, { callbacks: [], deliveryJobId: 'job_000000000002', inFlight: { callbacks: [outcome], messages: [] } });
  state.apply(delivered);
  assert.equal(state.outcomeBytes, 102, 'carried, still held');
  state.apply(inverseOf(delivered));
  assert.equal(state.outcomeBytes, 102);
  assert.deepEqual(state.sessions.get('parent')!.callbacks, [outcome]);
  // deleted with the outcome (retention), then undone: the session and its bytes are back
  const deleted = change(state.sessions.get('parent')!, null);
  state.apply(deleted);
  assert.equal(state.outcomeBytes, 0);
  state.apply(inverseOf(deleted));
  assert.equal(state.outcomeBytes, 102);
});

test('a job revived by an undo gets its deadline back, even after a sweep dropped it while the job had ended', () => {
  const state = new MemoryState(false);
  const row = { ...jobRow(1), createdAt: 0, timeoutMs: 1_000 };
  const created = emptyChangeSet(1, 0);
  created.jobs.set(row.id, { kind: 'insert', before: undefined, after: row, patch: row });
  state.apply(created);
  const ended = emptyChangeSet(1, 0);
  const patch = { status: 'completed' as const, completedAt: 500 };
  ended.jobs.set(row.id, { kind: 'update', before: row, after: { ...row, ...patch }, patch });
  state.apply(ended);
  // a sweep past the deadline while the job had ended takes the deadline and drops it
  const due = state.deadlines.popDue(2_000).filter((id) => state.jobs.get(id)?.status !== 'completed');
  assert.deepEqual(due, []);
  state.apply(inverseOf(ended));
  assert.deepEqual(state.deadlines.popDue(2_000), [row.id], 'the revived job times out as it would have');
});

test('trimming the hot window keeps a job an undo revived, though it is still in the list of ended jobs', async (t) => {
  const store = await SqliteStore.open(join(tempDir(t), 'agentq.db'), {
    clock: systemClock,
    log: pino({ level: 'silent' }),
    outputMaxBytes: 1024,
    hotJobs: 1,
    hotSessions: 100,
  });
  closeAfter(t, store);
  const state = (store as unknown as { state: MemoryState }).state;
  const rows = [jobRow(1), jobRow(2), jobRow(3)];
  const created = emptyChangeSet(3, 0);
  for (const r of rows) created.jobs.set(r.id, { kind: 'insert', before: undefined, after: r, patch: r });
  state.apply(created);
  const ended = emptyChangeSet(3, 0);
  for (const r of rows) {
    const patch = { status: 'completed' as const, completedAt: 1 };
    ended.jobs.set(r.id, { kind: 'update', before: r, after: { ...r, ...patch }, patch });
  }
  state.apply(ended);
  // the first job's end is undone; the list of ended jobs still names it first
  const first = emptyChangeSet(3, 0);
  first.jobs.set(rows[0]!.id, ended.jobs.get(rows[0]!.id)!);
  state.apply(inverseOf(first));
  store.trimCache();
  assert.equal(state.jobs.get(rows[0]!.id)?.status, 'pending', 'the live job stays in memory');
  assert.equal(state.jobs.has(rows[1]!.id), false, 'an ended one beyond the hot window goes');
  assert.equal(state.jobs.get(rows[2]!.id)?.status, 'completed', 'the newest ended one stays');
});

test('SQLite: transactions that race the store closing are either on disk when they succeed or refused; none is lost', async (t) => {
  const path = join(tempDir(t), 'agentq.db');
  const options = { clock: systemClock, log: pino({ level: 'silent' }), outputMaxBytes: 1024, hotJobs: 100, hotSessions: 100 };
  const store = closeAfter(t, await SqliteStore.open(path, options));
  /** each transaction's outcome: true, or the code it was refused with */
  const outcomes = new Map<string, Promise<true | string>>();
  const insert = (seq: number) => {
    const row = jobRow(seq);
    outcomes.set(row.id, store.transaction((tx) => tx.insertJob(row)).then(() => true as const, (err: { code?: string }) => err.code ?? String(err)));
  };
  // the first commits on its own; the second, in the same turn, opens a group
  insert(1);
  insert(2);
  for (let i = 0; i < 100 && store.settled() === undefined; i++) await Promise.resolve();
  assert.ok(store.settled(), 'a group of commits is open when the store starts to close');
  let closing = true;
  const closed = store.close().finally(() => (closing = false));
  // transactions that come while the store closes: one per microtask and one per turn of the
  // event loop until it is closed, so that some fall between each of its steps
  let seq = 3;
  while (closing) {
    insert(seq++);
    await Promise.resolve();
    insert(seq++);
    await new Promise((resolve) => setImmediate(resolve));
  }
  await closed;
  const last = `job_${seq}`;
  insert(seq);
  // writes outside transactions too
  await assert.rejects(store.appendOutput('job_1', 0, 'late output'), (err: { code?: string; details?: { retry_after_seconds?: number } }) => {
    assert.equal(err.code, 'shutting_down');
    assert.equal(err.details?.retry_after_seconds, 1);
    return true;
  });
  const acknowledged = new Set<string>();
  for (const [id, outcome] of outcomes) {
    const o = await outcome;
    if (o === true) acknowledged.add(id);
    else assert.equal(o, 'shutting_down', `${id} was refused as the shutdown`);
  }

  const reopened = closeAfter(t, await SqliteStore.open(path, options));
  for (const id of outcomes.keys()) {
    const onDisk = (await reopened.transaction((tx) => tx.job(id))) !== undefined;
    assert.equal(onDisk, acknowledged.has(id), `${id}: acknowledged ${acknowledged.has(id)}, on disk ${onDisk}`);
  }
  assert.ok(acknowledged.has('job_1') && acknowledged.has('job_2'), 'what came before the close was written');
  assert.ok(!acknowledged.has(last), 'a closed store takes nothing');
  assert.ok(seq > 5, `transactions came while the store closed (${seq - 3})`);
});
