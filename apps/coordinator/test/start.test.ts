import assert from 'node:assert/strict';
import { readdirSync, readlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { startCoordinator } from '../src/start.js';
import { tempDir } from './helpers.js';

/** The files under `dir` this process has open (Linux: /proc/self/fd). */
function openFilesUnder(dir: string): string[] {
  return readdirSync('/proc/self/fd').flatMap((fd) => {
    try {
      const target = readlinkSync(join('/proc/self/fd', fd));
      return target.startsWith(`${dir}/`) ? [target] : [];
    } catch {
      return []; // closed meanwhile (the fd of readdirSync itself)
    }
  });
}

test('startCoordinator on a port in use rejects with EADDRINUSE and closes the database it opened', async (t) => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => taken.close(() => resolve())));
  const { port } = taken.address() as { port: number };
  const dir = tempDir(t);
  await assert.rejects(startCoordinator({ port, databaseUrl: `sqlite:${join(dir, 'agentq.db')}` }), { code: 'EADDRINUSE' });
  // a caller that retries on the port would otherwise run two coordinators (two sweepers) on it
  assert.deepEqual(openFilesUnder(dir), [], 'nothing of the database is left open');
});
