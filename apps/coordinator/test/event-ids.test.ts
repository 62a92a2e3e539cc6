import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { AgentqClient } from '@agentq/client';
import type { LifecycleEvent } from '@agentq/protocol';
import { startCoordinator } from '../src/start.js';
import { closeAfter, openEvents, start, tempDir } from './helpers.js';

/*
 * Events of the SQLite store: ids are reserved in blocks (only the end of the block is written to
 * the file, not the last id on every commit) and must still only grow across restarts; a session
 * event's lists of jobs and children are read from the file only when the event is read, and
 * must still be those of its commit.
 */

const storedCeiling = (file: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return Number((db.prepare("SELECT value FROM meta WHERE key = 'last_event_id'").get() as { value: string }).value);
  } finally {
    db.close();
  }
};

test('event ids go on growing after a restart of the SQLite store, and the file is written once per block of ids', async (t) => {
  const dir = tempDir(t, 'agentq-event-ids-');
  const file = join(dir, 'agentq.db');
  const config = { databaseUrl: `sqlite:${file}`, sweepIntervalMs: 600_000 };

  const first = closeAfter(t, await startCoordinator(config));
  const client = new AgentqClient({ url: first.url });
  for (let i = 0; i < 5; i++) await start(client, `ids-${i}`);
  const lastBefore = first.core.events.lastId;
  assert.ok(lastBefore >= 5, `five creates made events (last id ${lastBefore})`);
  await client.close();
  await first.close();
  const ceiling = storedCeiling(file);
  assert.ok(ceiling > lastBefore, `the reserved block (${ceiling}) covers every id used (${lastBefore})`);

  const second = closeAfter(t, await startCoordinator(config));
  const client2 = new AgentqClient({ url: second.url });
  const seen: number[] = [];
  let firstCommit = 0;
  try {
    assert.equal(second.core.events.lastId, ceiling, 'numbering resumes at the end of the reserved block');
    const unsubscribe = second.core.events.subscribe((e) => seen.push(e.id));
    await start(client2, 'ids-after-restart'); // one commit: reserves the next block
    firstCommit = Math.max(...seen);
    await start(client2, 'ids-same-block');
    unsubscribe();
    assert.ok(seen.every((id) => id > lastBefore), `ids after the restart (${seen.join(', ')}) are above ${lastBefore}`);
  } finally {
    await client2.close();
    await second.close();
  }
  assert.equal(storedCeiling(file), firstCommit + 10_000, 'one reservation for the new block, not a write per commit');
});

test('a session event read later shows the session as it was at its commit (the SQLite store reads its lists lazily)', async (t) => {
  const dir = tempDir(t, 'agentq-event-extras-');
  const c = closeAfter(t, await startCoordinator({ databaseUrl: `sqlite:${join(dir, 'agentq.db')}`, sweepIntervalMs: 600_000 }));
  const client = new AgentqClient({ url: c.url });
  t.after(() => client.close());
  const events: LifecycleEvent[] = [];
  t.after(c.core.events.subscribe((e) => events.push(e)));
  const first = await start(client, 'parent');
  const sessionEventsBefore = events.filter((e) => 'session' in e).length;
  // more jobs and a child session after it: the first event must not show them
  const second = await client.createJob({ type: 'resume_session', session_name: 'parent', prompt: 'again' });
  await start(client, 'child', 'do child', { parent_session_name: 'parent' });
  const sessionEvents = events.filter((e): e is Extract<LifecycleEvent, { session: unknown }> => 'session' in e);
  assert.ok(sessionEvents.length > sessionEventsBefore, 'the later changes made session events too');
  const early = sessionEvents[0]!.session;
  assert.equal(early.session_name, 'parent');
  assert.deepEqual([early.job_ids, early.children], [[first.job_id], []]);
  const now = await client.getSession('parent');
  assert.deepEqual([now.job_ids, now.children], [[first.job_id, second.job_id], ['child']]);
});

test('a client that saw the last event before a clean restart of the SQLite store resumes without a gap; after a crash it is told of one', async (t) => {
  const dir = tempDir(t, 'agentq-event-resume-');
  const file = join(dir, 'agentq.db');
  const config = { databaseUrl: `sqlite:${file}`, sweepIntervalMs: 600_000 };
  const first = closeAfter(t, await startCoordinator(config));
  const client = new AgentqClient({ url: first.url });
  await start(client, 'before');
  const seen = first.core.events.lastId;
  await client.close();
  await first.close(); // a clean stop: it says which id it used last
  const stale = (() => {
    const db = new Database(file, { readonly: true });
    try {
      return (db.prepare("SELECT value FROM meta WHERE key = 'last_event_id_used'").get() as { value: string }).value;
    } finally {
      db.close();
    }
  })();

  const resumeAfterRestart = async (): Promise<string[]> => {
    const c = closeAfter(t, await startCoordinator(config));
    const c2 = new AgentqClient({ url: c.url });
    try {
      await start(c2, `after-${c.core.events.lastId}`);
      const events = openEvents(t, c.url, seen);
      const first = events.next();
      await events.opened;
      return [(await first).event, (await events.next()).event];
    } finally {
      await c2.close();
      await c.close();
    }
  };
  assert.deepEqual(await resumeAfterRestart(), ['session.created', 'job.created'], 'the ids the restart skipped were never used: nothing was missed');

  // a run that used ids and did not stop cleanly (killed) leaves the word of the stop before it,
  // from an older block of ids: it is not believed, and the client is told of a gap
  const db = new Database(file);
  db.prepare("UPDATE meta SET value = ? WHERE key = 'last_event_id_used'").run(stale);
  db.close();
  assert.equal((await resumeAfterRestart())[0], 'stream.gap');
});
