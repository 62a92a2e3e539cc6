import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { fixture } from './helpers.js';

/**
 * A group id is its leader's pid, and can be given to another process once the group is gone. To
 * make that happen when the test wants it, the fixture runs in a PID namespace of its own, where the
 * next pid can be set: that takes root (or a user namespace) and util-linux's unshare.
 */
const namespaced = ['--pid', '--fork', '--mount-proc', 'sh', '-c'];
const canUnshare =
  process.platform === 'linux' && spawnSync('unshare', [...namespaced, 'echo 1 > /proc/sys/kernel/ns_last_pid'], { stdio: 'ignore' }).status === 0;

// The SIGKILL kept for members that outlived the executor (after --kill-grace, or at a forced
// exit) went to the group id whatever group had it by then: once those members had died, the id
// could be a new group's, another executor's or a shell job's, and it was stopped and killed.
test("the launcher's SIGKILL for an executor's group spares the unrelated group that got its id after it ended", { skip: !canUnshare && 'needs unshare --pid (root)' }, async () => {
  // sh as the namespace's init reaps the orphans (node would not); `; :` keeps it from exec'ing node
  const { stdout } = await promisify(execFile)('unshare', [...namespaced, `"${process.execPath}" "${fixture('pgid-reuse.js')}"; :`]);
  const out = JSON.parse(stdout) as { pgid: number; sleep_pid: number; signal: string | null };
  assert.equal(out.sleep_pid, out.pgid, 'the new process got the ended group\'s id');
  assert.equal(out.signal, 'SIGTERM', 'it was not killed by the SIGKILL meant for the ended group');
});
