import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { closedBeforeRemoval, heldPort } from '@agentq/test-support';
import { startCoordinator } from '../src/start.js';
import { closeAfter, startTest, tempDir } from './helpers.js';
import { spawnCoordinator, spawnCoordinatorOn, tempDatabase } from './process.js';

/*
 * node:test runs a test's after-hooks in the order they were added: a directory made before a
 * coordinator had its removal run while the coordinator still had its database open there. The
 * directory's hook ends the test's coordinators first (@agentq/test-support's tempDir); these
 * check that this app's ways of starting one register it.
 */

test("a test's temporary directory is removed only after the coordinator using it has closed", (t) =>
  closedBeforeRemoval(t, 'a test that ends with a coordinator on a database in its directory', tempDir, async (st, databaseUrl) => {
    const { c } = await startTest(st, { databaseUrl });
    return c;
  }));

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

test("a test's temporary directory is removed only after a coordinator the test started itself (closeAfter) has closed", (t) =>
  closedBeforeRemoval(t, 'a test that ends with its own coordinator on a database in its directory', tempDir, async (st, databaseUrl) =>
    closeAfter(st, await startCoordinator({ databaseUrl })),
  ));

test('a coordinator process restarted on its port gets it back after another process held it for a moment', async (t) => {
  // the holder lets go once the first start has been refused
  const held = await heldPort(t);
  const c = await spawnCoordinatorOn(t, held.port, { DATABASE_URL: 'memory:' }, held.release);
  assert.equal(c.port, held.port);
  assert.equal((await c.client.health()).status, 'ok');
  assert.ok(held.refusals > 0, 'the port was held when the coordinator first tried it');
});
