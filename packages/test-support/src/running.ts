import type { TestContext } from 'node:test';

/**
 * The coordinators and launchers a test has running (in this process or spawned), each with the
 * way to end it. node:test runs a test's after-hooks in the order they were added, so a temporary
 * directory made before a coordinator or launcher would be removed while it still has its database
 * open there, or still writes its state there (a checkpointer thread, or the process, may make a
 * file in it meanwhile: ENOTEMPTY); the directory's hook (tempDir) ends them first (endRunning),
 * and each one's own hook stays as it was (ending twice is harmless).
 */
const running = new WeakMap<TestContext, Set<() => Promise<unknown>>>();

/** Registers something the test runs; `end` stops it and resolves once it has stopped. */
export function trackRunning(t: TestContext, end: () => Promise<unknown>): void {
  let ends = running.get(t);
  if (!ends) running.set(t, (ends = new Set()));
  ends.add(end);
}

/** Ends everything the test still has running and waits until it has stopped. */
export async function endRunning(t: TestContext): Promise<void> {
  const ends = running.get(t);
  if (!ends) return;
  running.delete(t);
  // every one is ended, also when another failed to (Promise.all would go on at the first error,
  // and the caller would remove the directory under the others still running)
  const failed = (await Promise.allSettled([...ends].map((end) => end()))).find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}
