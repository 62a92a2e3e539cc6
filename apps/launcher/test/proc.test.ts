import assert from 'node:assert/strict';
import { test } from 'node:test';
import { escapedDescendants } from '../src/lifeline/proc.js';

/** escapedDescendants over a given process table (what killGroupTree reads from /proc or `ps`). */

test('escapedDescendants: the children of the group\'s members outside the group, and theirs; not the members, nor anything else', () => {
  const table = [
    { pid: 1, ppid: 0, pgid: 1 },
    { pid: 100, ppid: 1, pgid: 100 }, // the executor, leader of group 100
    { pid: 101, ppid: 100, pgid: 100 }, // a member
    { pid: 200, ppid: 101, pgid: 200 }, // a member's child in a session of its own
    { pid: 201, ppid: 200, pgid: 200 }, // and its child
    { pid: 300, ppid: 1, pgid: 300 }, // unrelated
    { pid: 301, ppid: 300, pgid: 300 },
  ];
  assert.deepEqual(escapedDescendants(100, table).sort(), [200, 201]);
});

// The children map was built by copying a parent's list at each child: quadratic in the number of
// children of one parent (init, a container's init, kthreadd). At 20 000 that was seconds, with
// the launcher's event loop blocked and the executor's group SIGSTOPped meanwhile; at the 200 000
// here, a quarter of an hour. The bound only catches that: one pass takes milliseconds.
test('escapedDescendants: a parent with very many children costs one pass over the table', { timeout: 120_000 }, () => {
  const table = [{ pid: 10, ppid: 1, pgid: 10 }, { pid: 11, ppid: 10, pgid: 11 }];
  for (let i = 0; i < 200_000; i++) table.push({ pid: 1_000 + i, ppid: 1, pgid: 1_000 + i });
  assert.deepEqual(escapedDescendants(10, table), [11]);
});
