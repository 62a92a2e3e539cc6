import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AgentqClient } from '@agentq/client';
import type { Launcher, ListLaunchersQuery } from '@agentq/protocol';
import { ManualClock } from '../src/core/clock.js';
import { rejectsWith, startTest } from './helpers.js';

// GET /launchers is paged like GET /jobs and GET /sessions (limit, cursor, next_cursor): before,
// every answer carried the whole registry, up to MAX_LAUNCHERS (10,000) launchers with their
// labels. The store is the one of AGENTQ_TEST_STORE (memory, sqlite, postgres).

/** Follow next_cursor to the end: each page's launcher ids. */
async function pages(client: AgentqClient, query: ListLaunchersQuery): Promise<string[][]> {
  const out: string[][] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await client.listLaunchers({ ...query, ...(cursor !== undefined ? { cursor } : {}) });
    out.push(page.launchers.map((l) => l.launcher_id));
    if (page.next_cursor === null) return out;
    assert.equal(typeof page.next_cursor, 'string', 'a coordinator that pages always says next_cursor');
    cursor = page.next_cursor!;
  }
}

/** Registration order: by registration time, launchers registered at the same instant by id. */
const registrationOrder = (list: Launcher[]) =>
  [...list]
    .sort((a, b) => (a.registered_at !== b.registered_at ? (a.registered_at < b.registered_at ? -1 : 1) : a.launcher_id < b.launcher_id ? -1 : 1))
    .map((l) => l.launcher_id);

test('GET /launchers pages in registration order with a cursor: none skipped or listed twice, even when launchers come and go', async (t) => {
  const clock = new ManualClock(Date.now());
  const { client } = await startTest(t, {}, { clock });
  // batches registered at one instant (their order is their ids'), the instants apart; one
  // registered "earlier" than the one before (a clock stepped back) comes before it
  for (const batch of [4, 3, 1, 3]) {
    for (let i = 0; i < batch; i++) await client.register({ hostname: `host-${batch}-${i}`, labels: { pool: 'paging' } });
    clock.advance(batch === 1 ? -5 : 10);
  }
  const whole = await client.listLaunchers();
  assert.equal(whole.launchers.length, 11);
  assert.equal(whole.next_cursor, null, 'without limit: every launcher, as before paging');
  const order = registrationOrder(whole.launchers);
  assert.deepEqual(whole.launchers.map((l) => l.launcher_id), order);

  const paged = await pages(client, { limit: 3 });
  assert.deepEqual(paged.map((p) => p.length), [3, 3, 3, 2]);
  assert.deepEqual(paged.flat(), order);
  // exactly at a page boundary: next_cursor null, no empty page after it
  assert.deepEqual(await pages(client, { limit: 11 }), [order]);
  assert.deepEqual(await client.listAllLaunchers({ pageSize: 2 }).then((l) => l.map((x) => x.launcher_id)), order);

  // the last launcher of a page leaves, and another registers, before the next page is read:
  // the next page goes on after the one that left, and the new one comes last
  const first = await client.listLaunchers({ limit: 4 });
  assert.deepEqual(first.launchers.map((l) => l.launcher_id), order.slice(0, 4));
  await client.deleteLauncher(order[3]!, { self: true });
  clock.advance(10);
  const late = await client.register({ hostname: 'late' });
  const rest = await pages(client, { limit: 4, cursor: first.next_cursor! });
  assert.deepEqual(rest.flat(), [...order.slice(4), late.launcher_id]);
  // without limit, from a cursor: the rest in one answer
  const tail = await client.listLaunchers({ cursor: first.next_cursor! });
  assert.deepEqual([tail.launchers.map((l) => l.launcher_id), tail.next_cursor], [[...order.slice(4), late.launcher_id], null]);
});

test('GET /launchers refuses a bad limit or cursor with 400 naming the field; other parameters are ignored as before', async (t) => {
  const { client, c } = await startTest(t);
  const reg = await client.register({ hostname: 'only' });
  for (const [path, field] of [
    ['/launchers?limit=0', 'limit'],
    ['/launchers?limit=1001', 'limit'],
    ['/launchers?limit=ten', 'limit'],
    ['/launchers?limit=1.5', 'limit'],
    ['/launchers?limit=', 'limit'],
    ['/launchers?cursor=', 'cursor'],
    ['/launchers?cursor=not-a-cursor', 'cursor'],
    ['/launchers?cursor=123', 'cursor'],
    ['/launchers?cursor=1e3.lnch_0123456789ab', 'cursor'],
    ['/launchers?cursor=12.lnch%2F..', 'cursor'],
    [`/launchers?cursor=${'9'.repeat(17)}.lnch_0123456789ab`, 'cursor'],
    [`/launchers?limit=2&cursor=${'1'.repeat(201)}`, 'cursor'],
  ] as const) {
    const res = await fetch(`${c.url}${path}`);
    assert.equal(res.status, 400, path);
    const { error } = (await res.json()) as { error: { code: string; details: { field: string } } };
    assert.deepEqual([error.code, error.details.field], ['validation_failed', field], path);
  }
  const details = await rejectsWith(client.listLaunchers({ limit: 0 }), 400, 'validation_failed');
  assert.equal(details.field, 'limit');

  // a request that worked before the list was paged still does (a cache-busting parameter, say)
  const res = await fetch(`${c.url}/launchers?_=1700000000`);
  assert.equal(res.status, 200);
  const body = (await res.json()) as { launchers: Launcher[]; next_cursor: string | null };
  assert.deepEqual([body.launchers.map((l) => l.launcher_id), body.next_cursor], [[reg.launcher_id], null]);
});
