import type { ChildProcess } from 'node:child_process';
import type { TestContext } from 'node:test';

/**
 * The launchers (and coordinators) a test has running, each with the way to end it. node:test
 * runs a test's after-hooks in the order they were added, so a temporary directory made before a
 * launcher would be removed while that launcher still writes into it (or a coordinator still has
 * its database open there); the directory's hook ends them first (endRunning), and each one's own
 * hook stays as it was (ending twice is harmless).
 */
const running = new WeakMap<TestContext, Set<() => Promise<unknown>>>();

/** Registers a launcher of the test; `end` stops it and resolves once it has stopped. */
export function trackRunning(t: TestContext, end: () => Promise<unknown>): void {
  let ends = running.get(t);
  if (!ends) running.set(t, (ends = new Set()));
  ends.add(end);
}

/** Ends every launcher the test still has running and waits until they have stopped. */
export async function endRunning(t: TestContext): Promise<void> {
  const ends = running.get(t);
  if (!ends) return;
  running.delete(t);
  // every one is ended, also when another failed to (Promise.all would go on at the first error,
  // and the caller would remove the directory under the others still running)
  const failed = (await Promise.allSettled([...ends].map((end) => end()))).find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

const children = new Set<ChildProcess>();
let hooked = false;
/**
 * Kill `child` when this test process ends, also when its after-hooks never ran: the test runner
 * ends a file that ran out of time with SIGTERM, and a launcher left behind polls (and keeps its
 * executors) for ever. (apps/coordinator/test/coordinator-process.ts does the same for coordinators.)
 */
export function killOnExit(child: ChildProcess): void {
  if (!hooked) {
    hooked = true;
    const killAll = () => children.forEach((c) => c.kill('SIGKILL'));
    process.once('exit', killAll);
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.once(signal, () => {
        killAll();
        process.exit(signal === 'SIGTERM' ? 143 : 130);
      });
    }
  }
  children.add(child);
  child.once('exit', () => children.delete(child));
}
