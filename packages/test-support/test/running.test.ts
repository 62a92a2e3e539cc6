import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { endRunning, goneOrKilledAfter, heldPort, onPortAgain, standInTestProcess, tempDir, trackRunning } from '../src/index.js';

/*
 * node:test runs a test's after-hooks in the order they were added: a directory made before a
 * coordinator or launcher had its removal run while that one still wrote there. The directory's
 * hook ends what the test runs first (running.ts, temp-dir.ts).
 */

const INDEX = new URL('../src/index.js', import.meta.url).href;

test("a test's temporary directory is removed only after what the test still runs has ended", async (t) => {
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

test('ending what the test runs waits for every one, also when another failed to stop', async (t) => {
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

test('a process spawned by a test process that is ended by SIGTERM (its file out of time) is killed with it', async (t) => {
  // a test process that spawned a long-lived child (standing in for a launcher) and is then ended
  // the way the test runner ends a file that ran out of time
  const testProcess = standInTestProcess(
    t,
    `import { spawn } from 'node:child_process';
    import { killOnExit } from '${INDEX}';
    const c = spawn('sleep', ['600'], { stdio: 'ignore' });
    killOnExit(c);
    console.log(c.pid);`,
  );
  const pid = Number(await testProcess.line());
  await testProcess.end();
  await goneOrKilledAfter(t, pid, 'the child of the ended test process');
});

test('a process that ends process groups of its own on SIGTERM is given SIGTERM when the test process is ended, and ends them', async (t) => {
  // standing in for `npm start`'s script: its children run in groups of their own, which it ends
  // on SIGTERM (SIGKILL would end it before it could)
  const starter = `const { spawn } = require('node:child_process');
    const group = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
    process.on('SIGTERM', () => { process.kill(-group.pid, 'SIGKILL'); process.exit(0); });
    console.log(group.pid);`;
  const testProcess = standInTestProcess(
    t,
    `import { spawn } from 'node:child_process';
    import { createInterface } from 'node:readline';
    import { killOnExit } from '${INDEX}';
    const c = spawn(process.execPath, ['-e', ${JSON.stringify(starter)}], { stdio: ['ignore', 'pipe', 'inherit'] });
    killOnExit(c, 'SIGTERM');
    createInterface({ input: c.stdout }).once('line', (group) => console.log(c.pid, group));`,
  );
  const [starterPid, groupPid] = (await testProcess.line()).split(' ').map(Number) as [number, number];
  await testProcess.end();
  await goneOrKilledAfter(t, starterPid, 'the child of the ended test process');
  await goneOrKilledAfter(t, -groupPid, 'the process group that child had started');
});

test('a listen on a port another process held for a moment gets it once that process lets go', async (t) => {
  const held = await heldPort(t);
  const server = createServer();
  t.after(() => void (server.listening && server.close()));
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(held.port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  // the holder lets go once the first listen has been refused
  await onPortAgain(held.port, listen, held.release);
  assert.equal((server.address() as { port: number }).port, held.port);
  assert.ok(held.refusals > 0, 'the port was held when the server first tried it');
});
