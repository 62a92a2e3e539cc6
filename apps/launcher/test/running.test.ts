import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { tempDir } from './helpers.js';
import { trackRunning } from './running.js';

test("a test's temporary directory is removed only after the launchers the test still runs have ended", async (t) => {
  let dir = '';
  const seen: boolean[] = [];
  await t.test('a test that ends with a launcher still writing into its directory', (st) => {
    dir = tempDir(st);
    // registered after the directory, so node:test would run its own hook after the removal
    trackRunning(st, async () => {
      seen.push(existsSync(dir));
      writeFileSync(join(dir, 'last-write'), 'x');
    });
  });
  assert.deepEqual(seen, [true], 'ended once, while its directory was still there');
  assert.equal(existsSync(dir), false, 'then the directory was removed');
});
