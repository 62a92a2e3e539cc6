import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';

/**
 * Checks that a test's temporary directory is removed only after what keeps a database open in it
 * has closed: runs the subtest `name` of `t`, which makes a directory with `makeDir` and then starts
 * something on a SQLite file there with `start` (it must be ended by the test's cleanup); asserts
 * that the database was still there when it closed, and the directory gone after the subtest.
 */
export async function closedBeforeRemoval(
  t: TestContext,
  name: string,
  makeDir: (t: TestContext) => string,
  start: (t: TestContext, databaseUrl: string) => Promise<{ close(): Promise<unknown> }>,
): Promise<void> {
  let dir = '';
  const seen: boolean[] = [];
  await t.test(name, async (st) => {
    dir = makeDir(st);
    const c = await start(st, `sqlite:${join(dir, 'agentq.db')}`);
    const close = c.close.bind(c);
    c.close = () => {
      seen.push(existsSync(join(dir, 'agentq.db')));
      return close();
    };
  });
  assert.equal(seen[0], true, 'closed while its database was still there');
  assert.equal(existsSync(dir), false, 'then the directory was removed');
}
