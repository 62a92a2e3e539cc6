import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { createServer } from 'node:net';
import { alive, coordinator, coordinatorAgain, gone, tempDir } from './helpers.js';
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

test('a launcher spawned by a test process that is ended by SIGTERM (its file out of time) is killed with it', async (t) => {
  // a test process that spawned a long-lived child (standing in for a launcher) and is then ended
  // the way the test runner ends a file that ran out of time
  const running = new URL('./running.js', import.meta.url).href;
  const script = `import('${running}').then(({ killOnExit }) => {
    const c = require('node:child_process').spawn('sleep', ['600'], { stdio: 'ignore' });
    killOnExit(c);
    console.log(c.pid);
  });`;
  const testProcess = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(createInterface({ input: testProcess.stdout! }), 'line')) as [string];
  const pid = Number(line);
  // not our child: once it is gone its id may be another process's, which must not be killed
  let wentAway = false;
  t.after(() => {
    if (!wentAway && alive(pid)) process.kill(pid, 'SIGKILL');
  });
  const exited = once(testProcess, 'exit');
  testProcess.kill('SIGTERM');
  await exited;
  await gone(pid, 'the launcher of the ended test process');
  wentAway = true;
});

test("a test's temporary directory is removed only after the coordinator with its database there has closed", async (t) => {
  let dir = '';
  const seen: boolean[] = [];
  await t.test('a test that ends with a coordinator on a SQLite file in its directory', async (st) => {
    dir = tempDir(st);
    const { c } = await coordinator(st, { databaseUrl: `sqlite:${join(dir, 'agentq.db')}` });
    const close = c.close.bind(c);
    c.close = () => {
      seen.push(existsSync(join(dir, 'agentq.db')));
      return close();
    };
  });
  assert.equal(seen[0], true, 'closed while its database was still there');
  assert.equal(existsSync(dir), false, 'then the directory was removed');
});

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
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  t.after(() => void (holder.listening && holder.close()));
  const { port } = holder.address() as { port: number };
  let refusals = 0;
  // the holder lets go once the first listen has been refused
  const c = await coordinatorAgain(t, port, {}, undefined, () => {
    if (refusals++ === 0) holder.close();
  });
  assert.equal(c.port, port);
  assert.ok(refusals > 0, 'the port was held when the coordinator first tried it');
});
