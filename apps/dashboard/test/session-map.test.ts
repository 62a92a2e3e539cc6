import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Session } from '@agentq/protocol';
import { SessionMap } from '../web/lib/sessions.js';

// The sessions a page has, without a browser: which answer or event changes which session.

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
function session(name: string, updated: number, over: Partial<Session> = {}): Session {
  return {
    session_name: name,
    parent_session_name: null,
    children: [],
    created_at: at(0),
    updated_at: at(updated),
    ...over,
  } as Session; // the fields the map reads; the others do not matter here
}

test('an evicted session leaves, and a version read before its deletion does not bring it back', () => {
  const map = new SessionMap();
  map.upsert(session('a', 1));
  assert.equal(map.evict(session('a', 2)), true);
  assert.equal(map.all.has('a'), false);
  assert.equal(map.upsert(session('a', 2)), false, 'a list answer read just before the sweep');
  assert.equal(map.all.has('a'), false);
  assert.equal(map.upsert(session('a', 9)), true, 'a new session of the same name');
  assert.equal(map.all.get('a')!.updated_at, at(9));
});

test('a parent no longer names an evicted child, even in a version read before the eviction', () => {
  const map = new SessionMap();
  const parent = session('lead', 1, { children: ['helper', 'other'] });
  map.upsert(parent);
  map.upsert(session('helper', 1, { parent_session_name: 'lead' }));
  assert.equal(map.evict(session('helper', 1, { parent_session_name: 'lead' })), true);
  assert.deepEqual(map.all.get('lead')!.children, ['other']);
  map.clear(); // the page reads its sessions again: the answer may predate the eviction
  map.upsert(parent);
  assert.deepEqual(map.all.get('lead')!.children, ['other']);
});

test('a version older than the one the page has is ignored', () => {
  const map = new SessionMap();
  map.upsert(session('a', 5));
  assert.equal(map.upsert(session('a', 4)), false);
  assert.equal(map.all.get('a')!.updated_at, at(5));
});

// a session object names the newest MAX_SESSION_LIST_ITEMS children and counts them all
test('a parent that no longer names an evicted child does not count it either (no "older child" that is gone)', () => {
  const map = new SessionMap();
  const parent = session('lead', 1, { children: ['helper', 'other'], children_count: 2, children_truncated: false });
  map.upsert(parent);
  map.evict(session('helper', 1, { parent_session_name: 'lead' }));
  const lead = map.all.get('lead')!;
  assert.deepEqual([lead.children, lead.children_count, lead.children_truncated], [['other'], 1, false]);
  map.clear();
  map.upsert(parent);
  assert.equal(map.all.get('lead')!.children_count, 1, 'a version read before the eviction');
  // a cut list: the older children it does not name are still counted
  map.upsert(session('lead', 2, { children: ['helper', 'other'], children_count: 5, children_truncated: true }));
  const cut = map.all.get('lead')!;
  assert.deepEqual([cut.children, cut.children_count, cut.children_truncated], [['other'], 4, true]);
});

// a session object names only its newest MAX_SESSION_LIST_ITEMS children: the node draws the others too
test('the children of a session are every child the page has, named by the parent or not, oldest first', () => {
  const map = new SessionMap();
  const parent = session('lead', 1, { children: ['c2', 'c3'], children_count: 4, children_truncated: true });
  map.upsert(parent);
  const child = (name: string, created: number, updated = created) => session(name, updated, { parent_session_name: 'lead', created_at: at(created) });
  for (const [name, created] of [['c3', 3], ['c0', 0], ['c2', 3], ['c1', 1]] as const) map.upsert(child(name, created));
  map.upsert(session('other', 1));
  const names = () => map.childrenOf(map.all.get('lead')!).map((s) => s.session_name);
  // c2 and c3 were created at the same instant: in the order the parent names them
  assert.deepEqual(names(), ['c0', 'c1', 'c2', 'c3']);
  map.upsert(child('c1', 1, 5)); // a newer version: still once
  assert.deepEqual(names(), ['c0', 'c1', 'c2', 'c3']);
  map.evict(child('c0', 0, 6));
  assert.deepEqual(names(), ['c1', 'c2', 'c3']);
  map.clear();
  map.upsert(parent);
  assert.deepEqual(names(), [], 'read again from nothing');
});

// every render of a node asks for its children, and any session's change re-renders the tree:
// sorting 10,000 children on each render (most created at one instant by a batch) took 30-40 ms
test("a node's children are sorted once for a version of its parent, not on every render", (t) => {
  const map = new SessionMap();
  map.upsert(session('lead', 1, { children: ['c1', 'c2'] }));
  const child = (name: string, created: number, updated = created) => session(name, updated, { parent_session_name: 'lead', created_at: at(created) });
  for (const [name, created] of [['c2', 2], ['c0', 0], ['c1', 1]] as const) map.upsert(child(name, created));
  const sort = Array.prototype.sort;
  let sorts = 0;
  Array.prototype.sort = function (this: unknown[], ...args: Parameters<typeof sort>) {
    sorts++;
    return sort.apply(this, args);
  } as typeof sort;
  t.after(() => (Array.prototype.sort = sort));
  const read = () => map.childrenOf(map.all.get('lead')!);
  const names = () => read().map((s) => s.session_name);

  assert.deepEqual(names(), ['c0', 'c1', 'c2']);
  for (let i = 0; i < 5; i++) names();
  assert.equal(sorts, 1, 'sorted once for six renders');
  // a newer version of a child keeps its place, and is the one drawn
  map.upsert(child('c1', 1, 7));
  assert.deepEqual([names(), read()[1]!.updated_at], [['c0', 'c1', 'c2'], at(7)]);
  assert.equal(sorts, 1);
  // a child that comes, a child that goes, a newer version of the parent: sorted again
  map.upsert(child('c3', 3));
  assert.deepEqual(names(), ['c0', 'c1', 'c2', 'c3']);
  map.evict(child('c0', 0, 8));
  assert.deepEqual(names(), ['c1', 'c2', 'c3']);
  map.upsert(session('lead', 9, { children: ['c1', 'c2', 'c3'] }));
  assert.deepEqual(names(), ['c1', 'c2', 'c3']);
  assert.equal(sorts, 4);
  Array.prototype.sort = sort;
});

test('children created at one instant that their parent does not name are drawn in creation order (seq), as the API pages them, not by name', () => {
  const map = new SessionMap();
  // the parent names its newest child only (MAX_SESSION_LIST_ITEMS): the others were read from pages
  const parent = session('hub', 1, { children: ['a'], children_count: 3, children_truncated: true });
  map.upsert(parent);
  for (const [name, seq] of [['a', 12], ['c', 10], ['b', 11]] as const) {
    map.upsert(session(name, 1, { parent_session_name: 'hub', seq }));
  }
  assert.deepEqual(
    map.childrenOf(map.all.get('hub')!).map((c) => c.session_name),
    ['c', 'b', 'a'],
  );
});
