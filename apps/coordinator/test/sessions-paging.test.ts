import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import type { AgentqClient } from '@agentq/client';
import Database from 'better-sqlite3';
import type { ListSessionsQuery } from '@agentq/protocol';
import type { CoordinatorConfig } from '../src/config.js';
import { ManualClock } from '../src/core/clock.js';
import { tempDir } from './auth-helpers.js';
import { fakeLauncher, rejectsWith, start, startTest } from './helpers.js';

// issue 11, item 11: sessions do not pile up for ever, and their list is paged

/** Both local stores: the memory store, and SQLite (history read from the file). */
const STORES: Array<[string, (t: TestContext) => Partial<CoordinatorConfig>]> = [
  ['memory', () => ({ databaseUrl: 'memory:' })],
  ['sqlite', (t) => ({ databaseUrl: `sqlite:${join(tempDir(t), 'agentq.db')}`, hotSessions: 5 })],
];

/** Follow next_cursor to the end: each page's session names. */
async function pages(client: AgentqClient, query: ListSessionsQuery): Promise<string[][]> {
  const out: string[][] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await client.listSessions({ ...query, ...(cursor !== undefined ? { cursor } : {}) });
    out.push(page.sessions.map((s) => s.session_name));
    if (page.next_cursor === null) return out;
    cursor = page.next_cursor;
  }
}

for (const [kind, store] of STORES) {
  test(`${kind}: GET /sessions pages newest first with a cursor, after the filters, without overlap`, async (t) => {
    const { client } = await startTest(t, store(t));
    const names: string[] = [];
    for (let i = 0; i < 23; i++) {
      const name = `s${String(i).padStart(2, '0')}`;
      names.push(name);
      const job = await start(client, name, 'p', i % 2 === 0 && i > 0 ? { parent_session_name: 's00' } : {});
      if (i % 3 !== 0) await client.stopJob(job.job_id); // idle; the others stay busy (pending)
    }
    const newestFirst = [...names].reverse();
    const all = await pages(client, { limit: 10 });
    assert.deepEqual(all.map((p) => p.length), [10, 10, 3]);
    assert.deepEqual(all.flat(), newestFirst);

    // exactly at a page boundary: next_cursor null, no empty page
    assert.deepEqual((await pages(client, { limit: 23 })).map((p) => p.length), [23]);

    // filters apply before paging
    const busy = (await pages(client, { status: 'busy', limit: 3 })).flat();
    assert.deepEqual(busy, newestFirst.filter((n) => Number(n.slice(1)) % 3 === 0));
    const children = (await pages(client, { parent: 's00', limit: 4 })).flat();
    assert.deepEqual(children, newestFirst.filter((n) => Number(n.slice(1)) % 2 === 0 && n !== 's00'));

    // sessions created meanwhile do not shift later pages
    const first = await client.listSessions({ limit: 5 });
    await start(client, 'newer');
    const second = await client.listSessions({ limit: 5, cursor: first.next_cursor! });
    assert.deepEqual(second.sessions.map((s) => s.session_name), newestFirst.slice(5, 10));

    await rejectsWith(client.listSessions({ cursor: 'not-a-cursor' }), 400, 'validation_failed');
  });

  test(`${kind}: a session is deleted one sweep after its last job; with children or a busy turn it stays`, async (t) => {
    const clock = new ManualClock();
    const retention = 60_000;
    // only the test sweeps; a launcher that never goes stale across the clock jumps
    const { c, client } = await startTest(t, { ...store(t), jobRetentionMs: retention, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
    const l = await fakeLauncher(client);
    const many = 1200; // more than one sweep's batch (1,000)
    for (let i = 0; i < many; i++) {
      const job = await start(client, `old-${i}`);
      await client.stopJob(job.job_id);
    }
    await start(client, 'parent');
    const own = await l.take();
    await l.completed(own.job_id);
    const child = await start(client, 'child', 'p', { parent_session_name: 'parent' });
    await l.take();
    await l.started(child.job_id);

    clock.advance(retention);
    for (let i = 0; i < 4; i++) await c.core.sweep(); // jobs go first, their sessions a sweep later
    const left = (await pages(client, { limit: 1000 })).flat().sort();
    assert.deepEqual(left, ['child', 'parent'], 'the parent stays while its child does');
    for (const name of ['old-0', `old-${many - 1}`]) await rejectsWith(client.getSession(name), 404, 'session_not_found');

    await l.completed(child.job_id);
    const callback = await l.take(); // the parent is told: its delivery resume
    await l.completed(callback.job_id);
    clock.advance(retention);
    for (let i = 0; i < 3; i++) await c.core.sweep();
    assert.deepEqual((await client.listSessions()).sessions, []);
    await rejectsWith(client.getSession('parent'), 404, 'session_not_found');
  });
}

// The memory store's list of sessions in creation order drops a deleted name lazily: its entry
// stays until the list is compacted, and was told from a live one by the name alone. A name that
// retention deleted and that was started again then had two live entries, its old one and its new
// one, and every list of sessions (a parent's children, the roots, all) gave it twice.
test('a session name deleted by retention and started again is listed once, at its new place, in every list of sessions', async (t) => {
  // the store of AGENTQ_TEST_STORE (memory, sqlite, postgres)
  const clock = new ManualClock();
  const retention = 60_000;
  const { c, client } = await startTest(t, { jobRetentionMs: retention, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const l = await fakeLauncher(client);
  const hub = await start(client, 'hub');
  await l.take();
  await l.started(hub.job_id); // busy: it outlives retention
  for (const [name, extra] of [['kid', { parent_session_name: 'hub' }], ['solo', {}]] as const) {
    const job = await start(client, name, 'p', extra);
    await client.stopJob(job.job_id);
  }
  clock.advance(retention);
  for (let i = 0; i < 4; i++) await c.core.sweep(); // the jobs go first, their sessions a sweep later
  for (const name of ['kid', 'solo']) await rejectsWith(client.getSession(name), 404, 'session_not_found');
  assert.deepEqual((await pages(client, { limit: 100 })).flat(), ['hub']);

  await start(client, 'kid', 'p', { parent_session_name: 'hub' });
  await start(client, 'solo');
  assert.deepEqual((await pages(client, { parent: 'hub', limit: 1 })).flat(), ['kid'], 'the children');
  assert.deepEqual((await pages(client, { root: 'true', limit: 1 })).flat(), ['solo', 'hub'], 'the roots');
  assert.deepEqual((await pages(client, { status: 'busy', limit: 1 })).flat(), ['solo', 'kid', 'hub'], 'by status');
  assert.deepEqual((await pages(client, { limit: 1 })).flat(), ['solo', 'kid', 'hub'], 'all');
  assert.equal((await client.getSession('hub')).children_count, 1);
});

// the dashboard's tree pages its roots with it: reading all sessions newest first, a tree with
// many children filled the first page with children whose parent and siblings were not read
test('GET /sessions?root=true pages the sessions without a parent only, newest first; not with parent', async (t) => {
  // the store of AGENTQ_TEST_STORE (memory, sqlite, postgres)
  const { client } = await startTest(t);
  await start(client, 'old-root');
  await start(client, 'boss');
  for (let i = 0; i < 12; i++) await start(client, `child-${i}`, 'p', { parent_session_name: i < 6 ? 'boss' : `child-${i - 6}` });
  await start(client, 'new-root');

  assert.deepEqual(await pages(client, { root: 'true', limit: 2 }), [['new-root', 'boss'], ['old-root']]);
  assert.equal((await pages(client, { root: 'false', limit: 100 })).flat().length, 15, 'false: every session, as without it');
  await rejectsWith(client.listSessions({ root: 'true', parent: 'boss' }), 400, 'validation_failed');
});

// A page of roots reads about a page of rows, however many children there are: SQLite's
// sessions_by_parent leaves roots out (migration 5), and without an index of its own the page
// walked every session newer than it, a tree's million children included, at every page. What
// the store asks is caught as it prepares it, and its plan read from the file.
test('sqlite: GET /sessions?root=true reads the roots from an index of their own, not through the children', async (t) => {
  const path = join(tempDir(t), 'agentq.db');
  const asked: string[] = [];
  const prepare = Database.prototype.prepare;
  Database.prototype.prepare = function (this: Database.Database, source: string) {
    if (/parent_name IS NULL/.test(source)) asked.push(source);
    return prepare.call(this, source);
  } as typeof prepare;
  const { client } = await startTest(t, { databaseUrl: `sqlite:${path}` });
  await start(client, 'root');
  for (let i = 0; i < 3; i++) await start(client, `child-${i}`, 'p', { parent_session_name: 'root' });
  try {
    assert.deepEqual((await client.listSessions({ root: 'true' })).sessions.map((s) => s.session_name), ['root']);
  } finally {
    Database.prototype.prepare = prepare;
  }

  assert.ok(asked.length > 0, 'the store asked for roots with parent_name IS NULL');
  const db = new Database(path, { readonly: true });
  t.after(() => db.close());
  for (const source of asked) {
    const args = Array.from({ length: (source.match(/\?/g) ?? []).length }, () => 1);
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${source}`).all(...args) as { detail: string }[]).map((r) => r.detail);
    assert.ok(
      plan.some((d) => /^(SEARCH|SCAN) sessions USING (COVERING )?INDEX sessions_roots\b/.test(d)),
      `a page of roots reads them by sessions_roots; plan: ${plan.join(' / ')}`,
    );
  }
});
