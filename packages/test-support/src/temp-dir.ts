import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { endRunning } from './running.js';

/**
 * A temporary directory, removed when the test ends: after what the test runs (trackRunning) has
 * stopped, whichever was made first. Its hook runs before theirs when it was added first, and a
 * coordinator or launcher still running there writes into it.
 */
export function tempDir(t: TestContext, prefix = 'agentq-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.after(async () => {
    try {
      await endRunning(t);
    } finally {
      rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
    }
  });
  return dir;
}
