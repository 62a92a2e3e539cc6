import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { startTest, tempDir } from './helpers.js';
import { spawnCoordinator, tempDatabase } from './process.js';

/*
 * node:test runs a test's after-hooks in the order they were added: a directory made before a
 * coordinator had its removal run while the coordinator still had its database open there. The
 * directory's hook ends the test's coordinators first (running.ts).
 */

test("a test's temporary directory is removed only after the coordinator using it has closed", async (t) => {
  let dir = '';
  const seen: boolean[] = [];
  await t.test('a test that ends with a coordinator on a database in its directory', async (st) => {
    dir = tempDir(st);
    const { c } = await startTest(st, { databaseUrl: `sqlite:${join(dir, 'agentq.db')}` });
    const close = c.close.bind(c);
    c.close = () => {
      seen.push(existsSync(join(dir, 'agentq.db')));
      return close();
    };
  });
  assert.equal(seen[0], true, 'closed while its database was still there');
  assert.equal(existsSync(dir), false, 'then the directory was removed');
});

test("a test's temporary database is removed only after the coordinator process on it has been killed", async (t) => {
  let file = '';
  const seen: boolean[] = [];
  await t.test('a test that ends with a coordinator process on its database', async (st) => {
    const url = tempDatabase(st);
    file = url.slice('sqlite:'.length);
    const c = await spawnCoordinator(st, { DATABASE_URL: url });
    c.child.once('exit', () => seen.push(existsSync(file)));
  });
  assert.deepEqual(seen, [true], 'gone while its database was still there');
  assert.equal(existsSync(file), false, 'then the database was removed');
});
