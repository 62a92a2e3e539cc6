import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { AgentqClient } from '@agentq/client';
import { startCoordinator } from '../src/start.js';
import { start } from './helpers.js';

/*
 * The SQLite store reserves event ids in blocks and writes only the end of the block to the file
 * (not the last id on every commit): ids must still only grow across restarts.
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
  const dir = mkdtempSync(join(tmpdir(), 'agentq-event-ids-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'agentq.db');
  const config = { databaseUrl: `sqlite:${file}`, sweepIntervalMs: 600_000 };

  const first = await startCoordinator(config);
  const client = new AgentqClient({ url: first.url });
  for (let i = 0; i < 5; i++) await start(client, `ids-${i}`);
  const lastBefore = first.core.events.lastId;
  assert.ok(lastBefore >= 5, `five creates made events (last id ${lastBefore})`);
  await client.close();
  await first.close();
  const ceiling = storedCeiling(file);
  assert.ok(ceiling > lastBefore, `the reserved block (${ceiling}) covers every id used (${lastBefore})`);

  const second = await startCoordinator(config);
  const client2 = new AgentqClient({ url: second.url });
  const seen: number[] = [];
  try {
    assert.equal(second.core.events.lastId, ceiling, 'numbering resumes at the end of the reserved block');
    const unsubscribe = second.core.events.subscribe((e) => seen.push(e.id));
    await start(client2, 'ids-after-restart'); // one commit: reserves the next block
    const firstCommit = Math.max(...seen);
    await start(client2, 'ids-same-block');
    unsubscribe();
    assert.ok(seen.every((id) => id > lastBefore), `ids after the restart (${seen.join(', ')}) are above ${lastBefore}`);
    await client2.close();
    await second.close();
    assert.equal(storedCeiling(file), firstCommit + 10_000, 'one reservation for the new block, not a write per commit');
  } finally {
    await client2.close();
    await second.close();
  }
});
