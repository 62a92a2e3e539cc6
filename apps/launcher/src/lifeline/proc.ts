import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { Worker } from 'node:worker_threads';

/**
 * Process identity checks for the lifeline. A pid alone is not an identity: once a process is
 * gone its pid (and process group id) can be given to an unrelated process. So every recorded
 * group carries its leader's start time, and a group is signalled only when that still holds.
 */

const hasProc = process.platform === 'linux';

/**
 * When the process started, as an opaque string (Linux: clock ticks since boot from
 * /proc/PID/stat; elsewhere `ps -o lstart`), or null if there is no such process.
 */
export function startTimeOf(pid: number): string | null {
  if (!Number.isInteger(pid) || pid <= 0) return null;
  if (hasProc) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // fields after the command name (which may contain spaces and parentheses) start at field 3
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return fields[19] ?? null; // field 22: starttime
    } catch {
      return null;
    }
  }
  try {
    const out = execFileSync('ps', ['-o', 'lstart=', '-p', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return out.trim() || null;
  } catch {
    return null;
  }
}

/**
 * Whether the process `pid` that started at `startTime` is still running: there, with that start
 * time, and not a zombie (dead, waiting for its parent to reap it; a killed launcher whose parent
 * has not reaped it yet must count as gone).
 */
export function isRunning(pid: number, startTime: string | null): boolean {
  return startTime !== null && startTimeOf(pid) === startTime && !isZombie(pid);
}

function isZombie(pid: number): boolean {
  if (hasProc) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return stat[stat.lastIndexOf(')') + 2] === 'Z';
    } catch {
      return false;
    }
  }
  try {
    const out = execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return out.trim().startsWith('Z');
  } catch {
    return false;
  }
}

/** Changes at every boot: start times of one boot mean nothing after the next. */
/**
 * This process's PID namespace (Linux: `pid:[4026531836]`), null where there is none to read.
 * Two containers mounting one state directory each number their processes afresh: a pid in a
 * record from another namespace says nothing about the process it was in this one.
 */
export function pidNamespace(): string | null {
  if (!hasProc) return null;
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return null;
  }
}

export function bootId(): string {
  if (hasProc) {
    try {
      return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      // fall through
    }
  }
  // `ps -o lstart` start times carry the date, so they stay unique across boots
  return 'unknown';
}

/** True while some process is in the group (and we may signal it). */
export function groupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false; // ESRCH: gone; EPERM: not ours to signal
  }
}

/**
 * Whether the group `pgid`, whose leader started at `startTime`, is still the group we started.
 * The leader still there with the same start time: yes. The leader gone but members left: yes,
 * since an id can only be reused by a new process with that pid, which would be its leader.
 * A process with that pid but another start time: the id was reused, never signal it.
 */
export function isSameGroup(pgid: number, startTime: string | null): boolean {
  const leader = startTimeOf(pgid);
  if (leader !== null) return startTime !== null && leader === startTime;
  return groupExists(pgid);
}

/** Signal the group if it is still the one we started. Returns whether it was signalled. */
export function signalGroup(pgid: number, startTime: string | null, signal: NodeJS.Signals): boolean {
  if (!isSameGroup(pgid, startTime)) return false;
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/** A process group an executor runs in: its id (the leader's pid) and the leader's start time. */
export interface Group {
  pgid: number;
  start_time: string | null;
}

/** How often endGroups looks whether the groups are gone (see there). */
const CHECK_MS = 50;

/**
 * SIGTERM every group that is still ours, SIGKILL the ones left after `graceMs`, and resolve
 * once all are gone (or were SIGKILLed). These are not our children (their launcher is gone),
 * so no event says when they exit: checking on a short interval is the only way to know.
 */
export async function endGroups(groups: readonly Group[], graceMs: number): Promise<Group[]> {
  const ended = groups.filter((g) => signalGroup(g.pgid, g.start_time, 'SIGTERM'));
  const deadline = Date.now() + graceMs;
  let left = ended;
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, CHECK_MS));
    left = left.filter((g) => isSameGroup(g.pgid, g.start_time) && !onlyZombies(g.pgid));
  }
  // with what its members started outside it (claude's Bash commands): see killGroupTreeSync
  for (const g of left) if (isSameGroup(g.pgid, g.start_time)) await killGroupTree(g);
  return ended;
}

/**
 * True when the only process left in the group is a zombie leader (dead, waiting for a parent to
 * reap it): there is nothing left to stop. Linux only; elsewhere assume it is alive.
 */
function onlyZombies(pgid: number): boolean {
  if (!hasProc) return false;
  try {
    const stat = readFileSync(`/proc/${pgid}/stat`, 'utf8');
    if (stat[stat.lastIndexOf(')') + 2] !== 'Z') return false;
  } catch {
    return false;
  }
  // the leader is a zombie; a member still alive keeps the group signallable, which we cannot
  // tell apart from the zombie alone without scanning /proc: scan it
  for (const entry of readProcPids()) {
    if (entry === pgid) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') return false; // field 5: pgrp
    } catch {
      // gone meanwhile
    }
  }
  return true;
}

function readProcPids(): number[] {
  try {
    return readdirSync('/proc')
      .filter((n) => /^\d+$/.test(n))
      .map(Number);
  } catch {
    return [];
  }
}

/** One process: its id, its parent's, and its process group's. */
interface ProcessEntry {
  pid: number;
  ppid: number;
  pgid: number;
}

/** Every process this one can see (Linux: /proc; elsewhere `ps`), or none when they cannot be listed. */
function processTable(): ProcessEntry[] {
  if (hasProc) {
    const table: ProcessEntry[] = [];
    for (const pid of readProcPids()) {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        // after the command name: state, ppid, pgrp
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        table.push({ pid, ppid: Number(fields[1]), pgid: Number(fields[2]) });
      } catch {
        // gone meanwhile
      }
    }
    return table;
  }
  try {
    const out = execFileSync('ps', ['-A', '-o', 'pid=,ppid=,pgid='], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 5_000 });
    return out
      .split('\n')
      .map((line) => line.trim().split(/\s+/).map(Number))
      .filter((f) => f.length === 3 && f.every(Number.isInteger))
      .map(([pid, ppid, pgid]) => ({ pid: pid!, ppid: ppid!, pgid: pgid! }));
  } catch {
    return [];
  }
}

/**
 * The processes outside group `pgid` that descend from one of its members: a child that went to
 * a session (and group) of its own, as claude runs each Bash command, is out of the group's
 * reach but still its parent's child, and so are its own children. `spare` (this process) and
 * what descends from it through it are left out: see killGroupTreeSync.
 */
export function escapedDescendants(pgid: number, table: readonly ProcessEntry[] = processTable(), spare = process.pid): number[] {
  // one pass over the table: copying a parent's list at each child made this quadratic in the
  // children of one parent (init, a container's init, kthreadd), seconds of a blocked event loop
  // (with the group stopped) at 20 000 of them
  const children = new Map<number, number[]>();
  for (const p of table) {
    const siblings = children.get(p.ppid);
    if (siblings) siblings.push(p.pid);
    else children.set(p.ppid, [p.pid]);
  }
  const members = table.filter((p) => p.pgid === pgid).map((p) => p.pid);
  const inGroup = new Set(members);
  const found = new Set<number>();
  for (const queue = [...members]; queue.length > 0; ) {
    for (const child of children.get(queue.pop()!) ?? []) {
      if (child === spare || found.has(child) || inGroup.has(child)) continue;
      found.add(child);
      queue.push(child);
    }
  }
  return [...found];
}

/** How many times killGroupTree looks again for descendants that appeared while it stopped the others. */
const TREE_ROUNDS = 10;

/**
 * killGroupTreeSync on a worker thread, resolving once it is done: each of its passes over the
 * process table reads every /proc/PID/stat, a second at 20 000 processes, and on the launcher's
 * event loop that second held heartbeats, output reports and every other job's pipes. Where no
 * worker can start (out of memory, thread limits), it runs here instead: late beats none.
 *
 * `group` is checked (isSameGroup, its leader's start time) on the worker, right before it stops
 * the group: the worker starts tens of milliseconds after this call (more on a loaded machine),
 * time enough for the group to end and its id to go to an unrelated group, which a check made by
 * the caller before the call would not see. A bare id (a leader whose start time could not be
 * read) goes unchecked.
 *
 * (Reading only the children of the group's members, /proc/PID/task/TID/children, would make each
 * pass cheap, but it needs CONFIG_PROC_CHILDREN, which kernels do not all have, and it misses
 * members whose parent exited, init's children by then, and what they started outside the group.)
 */
export async function killGroupTree(group: Group | number): Promise<void> {
  let worker: Worker;
  try {
    worker = new Worker(new URL('./kill-tree-worker.js', import.meta.url), { workerData: group });
  } catch {
    return killSameGroupTree(group);
  }
  // this process exiting meanwhile (process.exit at the end of a shutdown) ends the worker
  // wherever it is, before its kill or after its SIGSTOP: the group left running, or stopped until
  // the reaper's SIGKILL after its grace period. The kill is then done here, before the exit.
  const atExit = () => killSameGroupTree(group);
  addExitListener(atExit);
  try {
    const failed = await new Promise<boolean>((resolve) => {
      worker.once('error', () => resolve(true));
      worker.once('exit', (code) => resolve(code !== 0));
    });
    // a worker that failed may have done any part of it; all of it again is harmless, the check
    // included (a group it killed may have given its id to another since)
    if (failed) killSameGroupTree(group);
  } finally {
    removeExitListener(atExit);
  }
}

/** One listener per kill under way, each its own: the limit of the warning is raised with them. */
function addExitListener(listener: () => void): void {
  const max = process.getMaxListeners();
  if (max !== 0) process.setMaxListeners(max + 1);
  process.once('exit', listener);
}
function removeExitListener(listener: () => void): void {
  process.off('exit', listener);
  const max = process.getMaxListeners();
  if (max !== 0) process.setMaxListeners(max - 1);
}

/** killGroupTreeSync of `group` if it is still the one its leader's start time says (see killGroupTree). */
export function killSameGroupTree(group: Group | number): void {
  if (typeof group === 'number') return killGroupTreeSync(group);
  if (isSameGroup(group.pgid, group.start_time)) killGroupTreeSync(group.pgid);
}

/**
 * SIGKILL group `pgid` and every process that descends from one of its members outside it. Killed
 * with the group alone, those would lose their parent and run on as init's children, out of
 * anyone's reach: claude ends its Bash commands (each in a session of its own) on SIGTERM, and a
 * claude killed before it did leaves them running. The group and what is found are stopped
 * (SIGSTOP) first, then looked at again until nothing new shows, so that none of them starts a
 * process between the look and the kill. A process whose parent had already exited (a daemon
 * that forked twice) is init's child and cannot be found. Blocks this thread for each pass over
 * the process table: killGroupTree runs it on a worker thread; this is for a process about to exit.
 */
export function killGroupTreeSync(pgid: number): void {
  const send = (pid: number, signal: NodeJS.Signals) => {
    try {
      process.kill(pid, signal);
    } catch {
      // ESRCH: gone already; EPERM: not ours to signal
    }
  };
  // This process may itself descend from a member (a launcher, or its reaper, started by an
  // agent's command), or even be one: stopped, it would never send the SIGKILL, and leave the
  // group and all it found stopped for good. It is spared by the search, and in the group it
  // stops nothing (its SIGKILL to the group ends it too, as it always did).
  const inGroup = ownGroup() === pgid;
  if (!inGroup) send(-pgid, 'SIGSTOP');
  const found = new Set<number>();
  for (let round = 0; round < TREE_ROUNDS; round++) {
    const fresh = escapedDescendants(pgid).filter((pid) => !found.has(pid));
    if (fresh.length === 0) break;
    for (const pid of fresh) {
      found.add(pid);
      send(pid, 'SIGSTOP');
    }
  }
  // the group last: this process may be in it
  for (const pid of found) send(pid, 'SIGKILL');
  send(-pgid, 'SIGKILL');
}

/** This process's group id, or null if it cannot be read. */
function ownGroup(): number | null {
  try {
    if (hasProc) {
      const stat = readFileSync('/proc/self/stat', 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]); // field 5: pgrp
    }
    const out = execFileSync('ps', ['-o', 'pgid=', '-p', String(process.pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return Number(out.trim()) || null;
  } catch {
    return null;
  }
}
