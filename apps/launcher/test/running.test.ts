import assert from 'node:assert/strict';
import { test } from 'node:test';
import { closedBeforeRemoval, heldPort } from '@agentq/test-support';
import { coordinator, coordinatorAgain, tempDir } from './helpers.js';

/*
 * What the launcher's tests rely on their helpers for. The shared part (a test's temporary
 * directory removed after what the test runs, processes killed with the test process) is checked
 * in packages/test-support; these check that this app's helpers use it.
 */

test("a test's temporary directory is removed only after the coordinator with its database there has closed", (t) =>
  closedBeforeRemoval(t, 'a test that ends with a coordinator on a SQLite file in its directory', tempDir, async (st, databaseUrl) => {
    const { c } = await coordinator(st, { databaseUrl });
    return c;
  }));

test("the test's coordinator closes before the test's client: a wait a failed test left parked does not hold the cleanup", async (t) => {
  const order: string[] = [];
  await t.test("a test that ends with the test's coordinator", async (st) => {
    const { c, client } = await coordinator(st);
    for (const [name, o] of [['coordinator', c], ['client', client]] as const) {
      const close = o.close.bind(o);
      o.close = () => {
        order.push(name);
        return close();
      };
    }
  });
  // the other way round, the client's close waits for the answer of any wait still parked (a
  // failed test's): until its hold runs out, up to ten minutes
  assert.deepEqual(order.slice(0, 2), ['coordinator', 'client']);
});

test('a coordinator restarted on its port gets it back after another process held it for a moment', async (t) => {
  // the holder lets go once the first listen has been refused
  const held = await heldPort(t);
  const c = await coordinatorAgain(t, held.port, {}, undefined, held.release);
  assert.equal(c.port, held.port);
  assert.ok(held.refusals > 0, 'the port was held when the coordinator first tried it');
});
