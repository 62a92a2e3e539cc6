import assert from 'node:assert/strict';
import { copyFileSync, linkSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { loadConfig } from '../src/config.js';
import { systemClock } from '../src/core/clock.js';
import { Coordinator } from '../src/core/coordinator.js';
import type { CheckpointResult } from '../src/core/store/sqlite-checkpointer.js';
import { ConfigError } from '../src/config.js';
import { SqliteStore } from '../src/core/store/sqlite-store.js';
import { tempDir } from './auth-helpers.js';
import { closeAfter } from './helpers.js';

// WAL checkpoints run on a thread of their own, never on the event loop (sqlite-checkpointer.ts)

const options = { clock: systemClock, log: pino({ level: 'silent' }), outputMaxBytes: 1024 * 1024, hotJobs: 100, hotSessions: 100 };

test('one coordinator per SQLite file: a second store is refused while the first has it, and opens once it is closed', async (t) => {
  const path = join(tempDir(t), 'agentq.db');
  const first = closeAfter(t, await SqliteStore.open(path, options));
  await assert.rejects(
    SqliteStore.open(path, options),
    (e: Error) => e instanceof ConfigError && e.variable === 'DATABASE_URL' && /in use by another coordinator .*; give this one a database of its own/.test(e.message),
  );
  await first.close();
  const second = closeAfter(t, await SqliteStore.open(path, options));
  await second.close();
});

test('one coordinator per SQLite file also through a symbolic link to it', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'agentq.db');
  closeAfter(t, await SqliteStore.open(path, options));
  symlinkSync(path, join(dir, 'link.db'));
  await assert.rejects(
    SqliteStore.open(join(dir, 'link.db'), options),
    (e: Error) => e instanceof ConfigError && e.variable === 'DATABASE_URL' && /in use by another coordinator/.test(e.message),
  );
});

test('a database file with a second hard link is refused, under either name: neither lock would see the other', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'agentq.db');
  await (await SqliteStore.open(path, options)).close();
  linkSync(path, join(dir, 'other.db'));
  for (const name of [path, join(dir, 'other.db')]) {
    await assert.rejects(
      SqliteStore.open(name, options),
      (e: Error) => e instanceof ConfigError && e.variable === 'DATABASE_URL' && /has 2 hard links/.test(e.message),
      name,
    );
  }
});

test('a symbolic link to a database not created yet locks the file it will be: the first start through it, the next by its name', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'agentq.db');
  symlinkSync(path, join(dir, 'link.db')); // dangling until the first open creates agentq.db
  closeAfter(t, await SqliteStore.open(join(dir, 'link.db'), options));
  await assert.rejects(
    SqliteStore.open(path, options),
    (e: Error) => e instanceof ConfigError && e.variable === 'DATABASE_URL' && /in use by another coordinator/.test(e.message),
  );
});

test('the store never checkpoints on its own connection; the thread copies the WAL into the file, and a quiet pass lets a grown WAL start over', async (t) => {
  const path = join(tempDir(t), 'agentq.db');
  // a pass after every megabyte, and a quiet one once the WAL holds 64 pages or more
  const store = await SqliteStore.open(path, { ...options, checkpointPacing: { nudgeBytes: 1024 * 1024, nudgeDelayMs: 50, restartFrames: 64 } });
  const core = new Coordinator(loadConfig({}, { maxPromptBytes: 2 * 1024 * 1024 }), store);
  closeAfter(t, { close: () => core.shutdown() });
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

  // after the pass in progress, one more copies what is left (nothing is written meanwhile)
  const drained = await store.checkpoints.checkpoint();
  assert.ok(drained?.ok && drained.checkpointed === drained.frames, JSON.stringify(drained));
  // the database file alone (without its WAL) holds every job and prompt
  const copy = join(tempDir(t), 'copy.db');
  copyFileSync(path, copy);
  const fromFile = new Database(copy);
  t.after(() => fromFile.close());
  assert.deepEqual(
    fromFile.prepare('SELECT j.session_name AS s, length(p.prompt) AS n FROM jobs j JOIN job_prompts p ON p.job_id = j.id ORDER BY j.seq').all(),
    [0, 1, 2, 3].map((i) => ({ s: `w-${i}`, n: prompt.length + 2 })),
  );

  // the first write after it starts the WAL over: the WAL holds only that write's frames
  await core.createJob({ type: 'start_session', session_name: 'after', prompt: 'small' });
  const next = await store.checkpoints.checkpoint();
  assert.ok(next?.ok, JSON.stringify(next));
  assert.ok(next.frames < 64, `the WAL started over (${next.frames} frames in it)`);
});

test('a store that fails to open lets go of the file: the next attempt opens it', async (t) => {
  const path = join(tempDir(t), 'agentq.db');
  await (await SqliteStore.open(path, options)).close();
  const db = new Database(path);
  const version = db.pragma('user_version', { simple: true }) as number;
  db.pragma('user_version = 999'); // agentq's database, of a schema from the future: migrate() refuses it
  db.close();
  await assert.rejects(
    SqliteStore.open(path, options),
    (e: Error) => e instanceof ConfigError && e.variable === 'DATABASE_URL' && /schema version 999, newer than this coordinator knows/.test(e.message),
  );
  const again = new Database(path);
  again.pragma(`user_version = ${version}`);
  again.close();
  const store = closeAfter(t, await SqliteStore.open(path, options));
  await store.close();
});

test('under a steady stream of writes, each quiet pass holds every write back until it has copied every frame', async (t) => {
  const path = join(tempDir(t), 'agentq.db');
  const errors: unknown[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => errors.push(JSON.parse(line)) });
  const store = await SqliteStore.open(path, {
    ...options,
    log,
    checkpointPacing: { nudgeBytes: 256 * 1024, nudgeDelayMs: 1, restartFrames: 64 },
  });
  const core = new Coordinator(loadConfig({}, { maxPromptBytes: 2 * 1024 * 1024 }), store);
  closeAfter(t, { close: () => core.shutdown() });
  const quietPasses: CheckpointResult[] = [];
  let passes = 0;
  store.checkpoints.signals.on('pass', (r, isQuiet) => {
    passes++;
    if (isQuiet) quietPasses.push(r);
  });
  const prompt = 'q'.repeat(300 * 1024);
  // four writers, each creating jobs and appending output as fast as it can
  await Promise.all(
    [0, 1, 2, 3].map(async (w) => {
      for (let i = 0; i < 12; i++) {
        const { job } = await core.createJob({ type: 'start_session', session_name: `q-${w}-${i}`, prompt: `${w}/${i}:${prompt}` });
        await store.appendOutput(job.job_id, 0, 'o'.repeat(64 * 1024));
      }
    }),
  );
  await store.checkpoints.checkpoint();
  assert.deepEqual(errors, [], 'no checkpoint failed');
  assert.ok(quietPasses.length > 0, `quiet passes ran (${passes} passes)`);
  for (const r of quietPasses) assert.ok(r.ok && r.checkpointed === r.frames, `a quiet pass copied every frame: ${JSON.stringify(r)}`);
  assert.equal(store.checkpoints.stats.quiet, quietPasses.length, 'every quiet pass was answered as one');
});
