// One publish() at a time into a dashboard folder, across processes: two builds publishing into
// one folder at once (`npm run build` while a test or a second terminal builds too) removed each
// other's temporary files (each one's clean-up took the other's for leftovers of a stopped build)
// and each kept only the assets of the build it had found in place, not those of the page the
// other had just put there.
//
// The lock is a file in the folder, `.publish.lock` (a leading dot: never served), made in one
// step with its contents (written under another name, then hard-linked to the lock's name, which
// fails if the lock is there) and removed when the publish ends. It names the process holding it;
// a lock whose process is gone (a build killed while publishing) is taken over. A build that finds
// the lock held waits for it to go: fs.watch on the folder wakes it at once, and it looks again at
// least once a second in case the holder died without removing it.
//
// Not flock(2): Node has no binding for it. The price is that taking over a dead build's lock is
// two steps (move it aside, then check it is the one found dead): a lock made by another build in
// between is put back, unless a third build took the free name in the microseconds between, the one
// case in which two builds hold the lock.
import { randomBytes } from 'node:crypto';
import { watch } from 'node:fs';
import { link, open, rename, rm, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';

/** The lock's name in the folder. */
export const LOCK = '.publish.lock';

/**
 * Takes the lock on `dir` (which must exist), waiting while a live process holds it.
 * @param {string} dir
 * @param {{ timeoutMs?: number, onWait?: (holder: { pid: number, hostname: string }) => void }} [options]
 *   `timeoutMs` (default 60 s): how long to wait for a live holder before failing; `onWait` is called
 *   once, when the lock is first found held
 * @returns {Promise<() => Promise<void>>} releases the lock
 */
export async function lockFolder(dir, options = {}) {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const path = join(dir, LOCK);
  const me = { pid: process.pid, hostname: hostname() };
  const deadline = Date.now() + timeoutMs;
  let told = false;
  for (;;) {
    if (await tryCreate(dir, path, me)) return () => rm(path, { force: true });
    const holder = await readHolder(path);
    if (holder === undefined) continue; // released since
    if (!isAlive(holder)) {
      await takeAside(dir, path, holder.ino);
      continue;
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      throw new Error(
        `dashboard: ${path} is held by process ${holder.pid} on ${holder.hostname} (another build publishing); ` +
          `waited ${timeoutMs / 1000} s. Remove it if no build runs there`,
      );
    }
    if (!told) {
      told = true;
      options.onWait?.({ pid: holder.pid, hostname: holder.hostname });
    }
    await lockChanged(dir, path, holder.ino, Math.min(1000, left));
  }
}

/** @returns {Promise<boolean>} whether the lock is now this process's */
async function tryCreate(dir, path, me) {
  // a `.tmp` name: if this process dies before the rm below, the next publish removes it
  const candidate = join(dir, `.publish.lock.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const contents = `${JSON.stringify(me)}\n`;
  try {
    await writeFile(candidate, contents);
  } catch (err) {
    await rm(candidate, { force: true });
    // ENOENT: the folder itself is gone (removed while this build waited); looking again for the
    // lock would find none, and try again, for ever
    throw new Error(`dashboard: cannot make ${path}`, { cause: err });
  }
  try {
    await link(candidate, path);
    return true;
  } catch (err) {
    const code = /** @type {NodeJS.ErrnoException} */ (err).code;
    // ENOENT: the holder's clean-up took the candidate for a stopped build's leftover
    if (code === 'EEXIST' || code === 'ENOENT') return false;
    // a file system without hard links: made and written in two steps (read in between, it names
    // no process, and counts as held by a live one)
    if (code === 'EPERM' || code === 'ENOTSUP' || code === 'ENOSYS') return createExclusive(path, contents);
    throw new Error(`dashboard: cannot make ${path}`, { cause: err });
  } finally {
    await rm(candidate, { force: true });
  }
}

/** @returns {Promise<boolean>} whether `path` was made here */
async function createExclusive(path, contents) {
  try {
    await writeFile(path, contents, { flag: 'wx' });
    return true;
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'EEXIST') return false;
    throw new Error(`dashboard: cannot make ${path}`, { cause: err });
  }
}

/** @returns {Promise<{ pid: number, hostname: string, ino: number } | undefined>} undefined: no lock */
async function readHolder(path) {
  let file;
  try {
    file = await open(path, 'r');
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ENOENT') return undefined;
    throw new Error(`dashboard: cannot read ${path}`, { cause: err });
  }
  try {
    const { ino } = await file.stat();
    const text = await file.readFile('utf8');
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = {};
    }
    // a lock not made by lockFolder (by hand): counted as held by a live process, so the wait ends
    // in the error that says to remove it
    const pid = Number.isSafeInteger(parsed.pid) ? parsed.pid : -1;
    return { pid, hostname: typeof parsed.hostname === 'string' ? parsed.hostname : '?', ino };
  } finally {
    await file.close();
  }
}

function isAlive(holder) {
  // a process of another host (a shared folder) cannot be looked at from here
  if (holder.pid <= 0 || holder.hostname !== hostname() || holder.pid === process.pid) return true;
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (err) {
    return /** @type {NodeJS.ErrnoException} */ (err).code !== 'ESRCH'; // EPERM: alive, another user's
  }
}

/** Removes the lock of a dead process, the file `ino`, and nothing else. */
async function takeAside(dir, path, ino) {
  const aside = join(dir, `.publish.lock.${process.pid}.${randomBytes(4).toString('hex')}.dead`);
  try {
    await rename(path, aside);
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ENOENT') return; // another build took it aside
    throw new Error(`dashboard: cannot remove the stale ${path}`, { cause: err });
  }
  try {
    if ((await stat(aside)).ino === ino) return;
    // the lock a live build made since it was read: back in its place (fails only if yet another
    // build took the name in between; see the top of this file)
    await link(aside, path).catch(() => {});
  } finally {
    await rm(aside, { force: true });
  }
}

/** Resolves when the lock file `ino` at `path` may be gone, or after `ms`. */
function lockChanged(dir, path, ino, ms) {
  return new Promise((resolve) => {
    let watcher;
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      watcher?.close();
      resolve();
    }
    try {
      watcher = watch(dir, (_event, name) => {
        if (name === null || name === LOCK) done();
      });
      watcher.on('error', done);
    } catch {
      // no fs.watch here: the timer alone
    }
    // released between the read and the watch: no event comes for that
    stat(path).then(
      (now) => now.ino !== ino && done(),
      () => done(),
    );
  });
}
