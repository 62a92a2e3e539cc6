import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { startCoordinator } from '../src/start.js';
import { closeAfter, startTest, tempDir } from './helpers.js';
import { spawnCoordinator, spawnCoordinatorOn, tempDatabase } from './process.js';
import { endRunning, trackRunning } from './running.js';

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

test("a test's temporary directory is removed only after a coordinator the test started itself (closeAfter) has closed", async (t) => {
  let dir = '';
  const seen: boolean[] = [];
  await t.test('a test that ends with its own coordinator on a database in its directory', async (st) => {
    dir = tempDir(st);
    const c = closeAfter(st, await startCoordinator({ databaseUrl: `sqlite:${join(dir, 'agentq.db')}` }));
    const close = c.close.bind(c);
    c.close = () => {
      seen.push(existsSync(join(dir, 'agentq.db')));
      return close();
    };
  });
  assert.equal(seen[0], true, 'closed while its database was still there');
  assert.equal(existsSync(dir), false, 'then the directory was removed');
});

test('ending the running coordinators waits for every one, also when another failed to stop', async (t) => {
  let stopped = false;
  let stop!: () => void;
  trackRunning(t, () => Promise.reject(new Error('this one would not close')));
  trackRunning(t, () => new Promise<void>((resolve) => (stop = resolve)).then(() => (stopped = true)));
  const ending = endRunning(t);
  setImmediate(stop); // it stops after the other's failure is known
  await assert.rejects(ending, /would not close/);
  // the caller removes the directory next: the other one must have stopped by then
  assert.equal(stopped, true);
});

test('a coordinator process restarted on its port gets it back after another process held it for a moment', async (t) => {
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  t.after(() => void (holder.listening && holder.close()));
  const { port } = holder.address() as { port: number };
  let refusals = 0;
  // the holder lets go once the first start has been refused
  const c = await spawnCoordinatorOn(t, port, { DATABASE_URL: 'memory:' }, () => {
    if (refusals++ === 0) holder.close();
  });
  assert.equal(c.port, port);
  assert.equal((await c.client.health()).status, 'ok');
  assert.ok(refusals > 0, 'the port was held when the coordinator first tried it');
});
