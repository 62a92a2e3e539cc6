import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { escapedDescendants, killGroupTree, startTimeOf } from '../src/lifeline/proc.js';
import { alive, fixture, gone } from './helpers.js';

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

/** Resolves once the process is stopped (state T in /proc/PID/stat): no event says so. */
async function stopped(pid: number): Promise<'stopped'> {
  for (;;) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat[stat.lastIndexOf(')') + 2] === 'T') return 'stopped';
    } catch {
      // gone: not stopped, and no longer to be waited for
      return new Promise(() => {});
    }
    await delay(10);
  }
}

// A launcher (or its reaper) that descended from a member of the group it killed, outside it (one
// an agent's Bash command started), was among the descendants found, and SIGSTOPped itself: it
// never sent the SIGKILL, and the group and all it had found stayed stopped for good.
test('killGroupTree called from a descendant of the group, outside it, kills the group and returns', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const leader = spawn(process.execPath, [fixture('tree-killer.js'), 'leader'], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  const leaderExit = once(leader, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  let killer = 0;
  t.after(() => {
    for (const pid of [-leader.pid!, killer]) if (pid !== 0 && alive(pid)) process.kill(pid, 'SIGKILL');
  });
  const lines = createInterface({ input: leader.stdout! })[Symbol.asyncIterator]();
  const first = String((await lines.next()).value);
  assert.match(first, /^killer \d+$/);
  killer = Number(first.split(' ')[1]);
  const outcome = await Promise.race([lines.next().then((r) => String(r.value)), stopped(killer)]);
  assert.equal(outcome, 'returned', 'the killer went on after stopping the group');
  assert.deepEqual(await leaderExit, [null, 'SIGKILL'], 'the group was killed');
});

// The leader of a group; its member (a child in the group) starts `sh` in a session of its own
// (setsid, as claude runs a Bash command), and that sh a `sleep`: both outside the group, one a
// grandchild of the leader, the other its great-grandchild. The sh prints both pids.
const ESCAPING_GROUP = `
  const { spawn } = require('node:child_process');
  spawn('setsid', ['sh', '-c', 'sleep 600 & echo $$ $!; wait'], { stdio: ['ignore', 'inherit', 'inherit'] });
  setInterval(() => {}, 60_000);
`;

// killGroupTree read every /proc/PID/stat on the launcher's event loop, at each of its passes: a
// second a pass at 20 000 processes, with heartbeats, output reports and every other job waiting.
test('killGroupTree kills, on a worker thread, the group and what its members started in sessions of their own, and theirs; the event loop runs meanwhile', { skip: process.platform !== 'linux' && 'reads /proc', timeout: 60_000 }, async (t) => {
  const leader = spawn(process.execPath, ['-e', ESCAPING_GROUP], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  const leaderExit = once(leader, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  let escaped: number[] = [];
  t.after(() => {
    for (const pid of [-leader.pid!, ...escaped]) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  const line = String((await createInterface({ input: leader.stdout! })[Symbol.asyncIterator]().next()).value);
  escaped = line.split(' ').map(Number);
  assert.equal(escaped.length, 2, line);
  for (const pid of escaped) assert.notEqual(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[2], String(leader.pid), 'out of the group');

  const killing = killGroupTree(leader.pid!);
  const first = await Promise.race([new Promise((resolve) => setImmediate(() => resolve('event loop'))), killing.then(() => 'killed')]);
  assert.equal(first, 'event loop', 'this thread ran on while killGroupTree looked for the descendants');
  await killing;
  assert.deepEqual(await leaderExit, [null, 'SIGKILL'], 'the group was killed');
  // sent SIGKILL: gone as soon as the kernel has ended them (a bound only for a kill not sent)
  for (const pid of escaped) await gone(pid, 'an escaped descendant');
});

// The caller checked that the group was still its own, then started the worker; the worker's kill
// came tens of milliseconds later (more on a loaded machine), by which time the group could have
// ended and its id gone to an unrelated group, which the worker stopped and killed. The worker now
// checks the group itself: here, a leader whose start time is not the one named stands for the
// group that got the id meanwhile.
test('killGroupTree leaves alone the group that has the id by the time its worker runs, when the leader\'s start time is not the one named', { skip: process.platform !== 'linux' && 'reads /proc', timeout: 60_000 }, async (t) => {
  const leader = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60_000)'], { detached: true, stdio: 'ignore' });
  const leaderExit = once(leader, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  t.after(() => {
    if (alive(-leader.pid!)) process.kill(-leader.pid!, 'SIGKILL');
  });
  await once(leader, 'spawn');
  const startTime = startTimeOf(leader.pid!);
  assert.notEqual(startTime, null);

  await killGroupTree({ pgid: leader.pid!, start_time: `${startTime}0` });
  // sent after what killGroupTree sent: the leader dies of a SIGKILL sent before it, of this if none was
  process.kill(leader.pid!, 'SIGTERM');
  assert.deepEqual(await leaderExit, [null, 'SIGTERM'], 'the group named by another start time was not killed');
});

test('killGroupTree kills the group whose leader has the start time named', { skip: process.platform !== 'linux' && 'reads /proc', timeout: 60_000 }, async (t) => {
  const leader = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60_000)'], { detached: true, stdio: 'ignore' });
  const leaderExit = once(leader, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  t.after(() => {
    if (alive(-leader.pid!)) process.kill(-leader.pid!, 'SIGKILL');
  });
  await once(leader, 'spawn');
  await killGroupTree({ pgid: leader.pid!, start_time: startTimeOf(leader.pid!) });
  assert.deepEqual(await leaderExit, [null, 'SIGKILL']);
});

// process.exit ends a worker thread wherever it is: a launcher that exited just after a kill's
// worker started (its shutdown over while the SIGKILL after --kill-grace was on its way) left the
// group running, or stopped (SIGSTOP sent, not the SIGKILL), until the reaper's kill after its grace.
test('killGroupTree started just before this process exits: the group is killed before the exit', { skip: process.platform !== 'linux' && 'reads /proc', timeout: 60_000 }, async (t) => {
  const leader = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60_000)'], { detached: true, stdio: 'ignore' });
  const leaderExit = once(leader, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  t.after(() => {
    if (alive(-leader.pid!)) process.kill(-leader.pid!, 'SIGKILL');
  });
  await once(leader, 'spawn');
  const killer = spawn(process.execPath, [fixture('kill-then-exit.js'), String(leader.pid), startTimeOf(leader.pid!)!], { stdio: 'inherit' });
  assert.deepEqual(await once(killer, 'exit'), [0, null]);
  // sent after what the killer sent before it exited: the leader dies of a SIGKILL sent then, of
  // this if none was (the SIGCONT for a leader left stopped); ESRCH: already dead and reaped
  for (const signal of ['SIGTERM', 'SIGCONT'] as const) {
    try {
      process.kill(leader.pid!, signal);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
  assert.deepEqual(await leaderExit, [null, 'SIGKILL'], 'the group was killed before the killer exited');
});
