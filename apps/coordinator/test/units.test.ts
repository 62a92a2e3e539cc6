import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, DEFAULT_CONFIG, loadConfig } from '../src/config.js';
import { systemClock } from '../src/core/clock.js';
import { DeadlineHeap } from '../src/core/deadline-heap.js';
import { ReadyQueue, type QueueLinks } from '../src/core/ready-queue.js';
import { MemoryStore } from '../src/core/store/memory-store.js';
import type { JobRow } from '../src/core/rows.js';
import { jobRowFixture, recordingLogger } from './helpers.js';

interface Item extends QueueLinks<Item> {
  name: string;
}
const item = (seq: number): Item => ({ seq, name: `#${seq}`, prev: null, next: null, queued: false });
const names = (q: ReadyQueue<Item>) => [...q].map((i) => i.seq);

test('ReadyQueue keeps creation order: appends, re-admissions at their place, removal', () => {
  const q = new ReadyQueue<Item>();
  const items = [1, 2, 3, 4, 5].map(item);
  q.insert(items[0]!);
  q.insert(items[2]!);
  q.insert(items[4]!);
  q.insert(items[1]!); // waited behind its session: goes back between 1 and 3
  q.insert(items[3]!);
  assert.deepEqual(names(q), [1, 2, 3, 4, 5]);
  q.insert(items[3]!); // already queued: no-op
  assert.equal(q.size, 5);
  q.remove(items[2]!);
  assert.deepEqual(names(q), [1, 2, 4, 5]);
  assert.equal(q.shift()?.seq, 1);
  assert.equal(q.shift()?.seq, 2);
  q.insert(items[0]!); // requeued: back to the head
  assert.deepEqual(names(q), [1, 4, 5]);
  q.remove(items[4]!);
  q.remove(items[4]!);
  assert.deepEqual(names(q), [1, 4]);
  assert.equal(q.size, 2);
});

test('DeadlineHeap yields due values in deadline order and keeps the rest', () => {
  const h = new DeadlineHeap<string>();
  for (const [at, v] of [[50, 'e'], [10, 'a'], [30, 'c'], [20, 'b'], [40, 'd']] as const) h.push(at, v);
  assert.deepEqual(h.popDue(30), ['a', 'b', 'c']);
  assert.equal(h.size, 2);
  assert.deepEqual(h.popDue(100), ['d', 'e']);
});

test('loadConfig reads the original variables and their defaults', () => {
  assert.deepEqual(loadConfig({}), DEFAULT_CONFIG);
  assert.equal(DEFAULT_CONFIG.pollTimeoutSeconds, 30);
  assert.equal(DEFAULT_CONFIG.heartbeatIntervalSeconds, 60);
  assert.equal(DEFAULT_CONFIG.heartbeatTimeoutSeconds, 120);
  assert.equal(DEFAULT_CONFIG.host, '127.0.0.1');
  assert.equal(DEFAULT_CONFIG.port, 8765);
  const c = loadConfig({ LAUNCHER_POLL_TIMEOUT: '5', PORT: '9000', HOST: '0.0.0.0', LOG_LEVEL: 'debug', JOB_DEFAULT_TIMEOUT_MS: '60000' });
  assert.equal(c.pollTimeoutSeconds, 5);
  assert.equal(c.port, 9000);
  assert.equal(c.host, '0.0.0.0');
  assert.equal(c.logLevel, 'debug');
  assert.equal(c.defaultJobTimeoutMs, 60000);
  // 0 leaves V8's own heap growth
  assert.equal(DEFAULT_CONFIG.heapGrowthPercent, 20);
  assert.equal(loadConfig({ HEAP_GROWTH_PERCENT: '0' }).heapGrowthPercent, 0);
});

test('loadConfig stops on a bad value with a message naming the variable', () => {
  const bad: Array<[Record<string, string>, string]> = [
    [{ PORT: 'eighty' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ PORT: '0x1F90' }, 'PORT'],
    [{ MAX_PROMPT_BYTES: '1e6' }, 'MAX_PROMPT_BYTES'],
    [{ LAUNCHER_POLL_TIMEOUT: '-1' }, 'LAUNCHER_POLL_TIMEOUT'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ HEAP_GROWTH_PERCENT: '-5' }, 'HEAP_GROWTH_PERCENT'],
    [{ HEAP_GROWTH_PERCENT: '2.5' }, 'HEAP_GROWTH_PERCENT'],
    // more than a job may ask for itself (30 days)
    [{ JOB_DEFAULT_TIMEOUT_MS: '2592000001' }, 'JOB_DEFAULT_TIMEOUT_MS'],
    // under 4 KiB a delivery resume has no room for a message of the parent's
    [{ MAX_PROMPT_BYTES: '2048' }, 'MAX_PROMPT_BYTES'],
    [{ LAUNCHER_HEARTBEAT_TIMEOUT: '30', LAUNCHER_HEARTBEAT_INTERVAL: '60' }, 'LAUNCHER_HEARTBEAT_TIMEOUT'],
  ];
  for (const [env, variable] of bad) {
    assert.throws(
      () => loadConfig(env),
      (err: unknown) => err instanceof ConfigError && err.variable === variable && err.message.startsWith(variable),
      JSON.stringify(env),
    );
  }
});

test('a step after a commit that throws is logged: the transaction stands and the other steps run', async () => {
  const { log, lines } = recordingLogger();
  const store = new MemoryStore({ clock: systemClock, log, outputMaxBytes: 1024 });
  const ran: string[] = [];
  const answer = await store.transaction(async (tx) => {
    tx.afterCommit(() => {
      throw new Error('a broken log line');
    });
    tx.afterCommit(() => ran.push('second'));
    return 'committed';
  });
  assert.equal(answer, 'committed');
  assert.deepEqual(ran, ['second']);
  assert.ok(lines.some((l) => l.includes('after-commit step failed') && l.includes('a broken log line')));
});

test("a memory transaction's activeJobOf: the session's committed active job unless the transaction changed it, else the one it made active", async () => {
  const store = new MemoryStore({ clock: systemClock, log: recordingLogger().log, outputMaxBytes: 1024 });
  const row = (seq: number, sessionName: string, status: JobRow['status']) => jobRowFixture(seq, { sessionName, status });
  await store.transaction(async (tx) => {
    await tx.insertJob(row(1, 's', 'running'));
    await tx.insertJob(row(2, 's', 'pending'));
    await tx.insertJob(row(3, 't', 'pending'));
    assert.equal((await tx.activeJobOf('s'))?.id, 'job_1', 'its own inserts');
  });
  await store.transaction(async (tx) => {
    assert.equal((await tx.activeJobOf('s'))?.id, 'job_1', 'committed');
    await tx.updateJob('job_2', { updatedAt: 1 });
    await tx.updateJob('job_3', { status: 'claimed' });
    assert.equal((await tx.activeJobOf('s'))?.id, 'job_1', 'committed, beside a touched job of the session that is not active');
    assert.equal((await tx.activeJobOf('t'))?.id, 'job_3', "another session's, made active here");
    await tx.updateJob('job_1', { status: 'completed' });
    assert.equal(await tx.activeJobOf('s'), undefined, 'the committed one ended here');
    await tx.updateJob('job_2', { status: 'claimed' });
    assert.equal((await tx.activeJobOf('s'))?.id, 'job_2', 'the one claimed here');
    await tx.deleteJob('job_2');
    assert.equal(await tx.activeJobOf('s'), undefined, 'deleted here');
    assert.equal(await tx.activeJobOf('u'), undefined, 'a session without jobs');
  });
});

// Job ids are 48 random bits, drawn again only when taken by a job held now: an id retention
// deleted may come back. The memory store's lists of jobs in creation order drop a deleted job
// lazily, and told its entry from a live one by the id alone: the id came back listed twice.
test('a job id drawn again after its job was deleted is listed once, at its new place, in the lists of all jobs and of live jobs', async () => {
  const store = new MemoryStore({ clock: systemClock, log: recordingLogger().log, outputMaxBytes: 1024 });
  await store.transaction(async (tx) => {
    await tx.insertJob(jobRowFixture(1, { status: 'pending' }));
    await tx.insertJob(jobRowFixture(2, { status: 'pending' }));
  });
  await store.transaction(async (tx) => void (await tx.updateJob('job_1', { status: 'stopped' })));
  await store.transaction(async (tx) => tx.deleteJob('job_1'));
  await store.transaction(async (tx) => tx.insertJob(jobRowFixture(3, { id: 'job_1', status: 'pending' })));
  const ids = async (f: Partial<Parameters<typeof store.listJobs>[0]>) => (await store.listJobs({ limit: 10, ...f })).rows.map((j) => `${j.id}@${j.seq}`);
  assert.deepEqual(await ids({}), ['job_1@3', 'job_2@2'], 'all');
  assert.deepEqual(await ids({ terminal: false }), ['job_1@3', 'job_2@2'], 'live');
  assert.deepEqual(await ids({ before: 3 }), ['job_2@2'], 'a page after the new one');
});
