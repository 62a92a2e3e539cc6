import assert from 'node:assert/strict';
import { connect, createServer } from 'node:net';
import { test } from 'node:test';
import { goneOrKilledAfter, standInTestProcess, tempDir } from '@agentq/test-support';
import { coordinator, deadUrl } from './helpers.js';

/* What the CLI's tests rely on their helpers for. */

test("the test's coordinator closes before the test's client: a wait a failed test left parked does not hold the cleanup", async (t) => {
  const order: string[] = [];
  await t.test("a test that ends with the test's coordinator", async (st) => {
    const c = await coordinator(st);
    const coreClose = c.core.close.bind(c.core); // called as the server closes
    c.core.close = () => {
      order.push('coordinator');
      return coreClose();
    };
    const clientClose = c.client.close.bind(c.client);
    c.client.close = () => {
      order.push('client');
      return clientClose();
    };
  });
  // the other way round, the client's close waits for the answer of any wait still parked (a
  // failed test's): until its hold runs out, up to ten minutes
  assert.deepEqual([...new Set(order)], ['coordinator', 'client']);
});

test('a dead URL refuses connections, and no other server can take its port meanwhile', async () => {
  const url = new URL(await deadUrl());
  const refused = await new Promise<string | undefined>((resolve) => {
    const socket = connect(Number(url.port), url.hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code));
  });
  assert.equal(refused, 'ECONNREFUSED');
  // a test file beside this one listening on port 0 could be given this port, and answer on it
  for (const host of ['127.0.0.1', '0.0.0.0']) {
    const other = createServer();
    const bound = await new Promise<string>((resolve) => {
      other.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? String(err)));
      other.listen(Number(url.port), host, () => other.close(() => resolve('bound')));
    });
    assert.equal(bound, 'EADDRINUSE', `a server on ${host}`);
  }
});

test('the launcher process the tests run (coordinatorAndLauncher) is killed when the test process is ended (its file out of time)', async (t) => {
  const c = await coordinator(t);
  const state = tempDir(t, 'agentq-mcp-test-state-');
  const testProcess = standInTestProcess(
    t,
    `import { createInterface } from 'node:readline';
    import { spawnLauncherProcess } from '${new URL('./mcp-helpers.js', import.meta.url).href}';
    const child = spawnLauncherProcess(${JSON.stringify(c.url)}, ${JSON.stringify(state)});
    createInterface({ input: child.stdout }).on('line', (line) => line.includes('launcher ready') && console.log(child.pid));`,
  );
  const pid = Number(await testProcess.line());
  await testProcess.end();
  await goneOrKilledAfter(t, pid, 'the launcher of the ended test process');
});
