import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { loadConfig } from '../src/config.js';
import { systemClock } from '../src/core/clock.js';
import { Coordinator } from '../src/core/coordinator.js';
import type { CheckpointResult } from '../src/core/store/sqlite-checkpointer.js';
import { SqliteStore } from '../src/core/store/sqlite-store.js';
import { tempDir } from './auth-helpers.js';

// WAL checkpoints run on a thread of their own, never on the event loop (sqlite-checkpointer.ts)

const options = { clock: systemClock, log: pino({ level: 'silent' }), outputMaxBytes: 1024 * 1024, hotJobs: 100, hotSessions: 100 };

test('one coordinator per SQLite file: a second store is refused while the first has it, and opens once it is closed', async (t) => {
  const path = join(tempDir(t), 'agentq.db');
  const first = await SqliteStore.open(path, options);
  await assert.rejects(SqliteStore.open(path, options), /in use by another coordinator/);
  await first.close();
  const second = await SqliteStore.open(path, options);
  await second.close();
});

test('the store never checkpoints on its own connection; the thread copies the WAL into the file, and a quiet pass lets a grown WAL start over', async (t) => {
  const path = join(tempDir(t), 'agentq.db');
  // a pass after every megabyte, and a quiet one once the WAL holds 64 pages or more
  const store = await SqliteStore.open(path, { ...options, checkpointPacing: { nudgeBytes: 1024 * 1024, nudgeDelayMs: 50, restartFrames: 64 } });
  const core = new Coordinator(loadConfig({}, { maxPromptBytes: 2 * 1024 * 1024 }), store);
  t.after(() => core.shutdown());
  assert.equal(store.pragma('wal_autocheckpoint'), 0, 'no checkpoint inside a commit');

  const quiet = new Promise<CheckpointResult>((resolve) => {
    store.checkpoints.signals.on('pass', (r, isQuiet) => {
      if (isQuiet) resolve(r);
    });
  });
  const prompt = 'w'.repeat(1024 * 1024);
  for (let i = 0; i < 4; i++) await core.createJob({ type: 'start_session', session_name: `w-${i}`, prompt: `${i}:${prompt}` });
  const r = await quiet;
  assert.ok(r.ok, JSON.stringify(r));
  assert.equal(r.checkpointed, r.frames, 'while writes were held back, the thread copied every frame');

  // the first write after it starts the WAL over: the WAL holds only that write's frames
  await core.createJob({ type: 'start_session', session_name: 'after', prompt: 'small' });
  const next = await store.checkpoints.checkpoint();
  assert.ok(next?.ok, JSON.stringify(next));
  assert.ok(next.frames < 64, `the WAL started over (${next.frames} frames in it)`);
  // every job is in the file, as another connection reads it
  const reader = new Database(path, { readonly: true });
  t.after(() => reader.close());
  assert.equal((reader.prepare('SELECT COUNT(*) AS n FROM jobs').get() as { n: number }).n, 5);
});
