import type { TestContext } from 'node:test';

/**
 * The launchers a test has running, each with the way to end it. node:test runs a test's
 * after-hooks in the order they were added, so a temporary directory made before a launcher
 * would be removed while that launcher still writes into it; the directory's hook ends them
 * first (endRunning), and each launcher's own hook stays as it was (ending twice is harmless).
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
  await Promise.all([...ends].map((end) => end()));
}
