import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, watch } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AgentqClient } from '@agentq/client';
import { killOnExit, trackRunning } from '@agentq/test-support';
import { tempDir } from './auth-helpers.js';
import { metricValue } from './limits-helpers.js';

// issue 11, item 6: a log destination that does not drain must not stop the coordinator

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

test('with a stdout nobody reads, requests are still answered; log lines are dropped and counted, and logging resumes', { timeout: 60_000 }, async (t) => {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'debug', DATABASE_URL: 'memory:', LOG_BUFFER_BYTES: '65536' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  // read up to the line that gives the port, then never again: the pipe fills and stays full
  const lines = createInterface({ input: child.stdout });
  let url = '';
  for await (const line of lines) {
    const entry = JSON.parse(line) as { msg?: string; url?: string };
    if (entry.msg === 'coordinator ready') {
      url = entry.url!;
      break;
    }
  }
  lines.close();
  child.stdout.pause();
  const client = new AgentqClient({ url });
  t.after(() => client.close());

  // every request logs two lines at debug: keep asking until lines are being dropped
  let answered = 0;
  while ((await metricValue(url, 'agentq_log_lines_dropped_total')) === 0) {
    for (let i = 0; i < 50; i++) {
      assert.equal((await client.health()).status, 'ok');
      answered++;
    }
    assert.ok(answered < 20_000, 'no line was dropped: the log destination took everything');
  }
  const dropped = await metricValue(url, 'agentq_log_lines_dropped_total');
  assert.ok(dropped > 0);
  for (let i = 0; i < 100; i++) assert.equal((await client.health()).status, 'ok'); // still answering

  // the reader comes back: what was held is written, then new lines come through again (the
  // first ones may still be dropped while the held lines are being written)
  let seen = '';
  child.stdout.on('data', (chunk: Buffer) => (seen += String(chunk)));
  child.stdout.resume();
  for (let i = 0; !seen.includes('"session_name":"after-the-drain-'); i++) {
    assert.ok(i < 10_000, 'logging did not resume');
    await client.createJob({ type: 'start_session', session_name: `after-the-drain-${i}`, prompt: 'p' });
  }
  assert.ok((await metricValue(url, 'agentq_log_lines_dropped_total')) >= dropped);
});

const hasBash = spawnSync('bash', ['-c', 'ulimit -f'], { encoding: 'utf8' }).status === 0;
if (!hasBash) console.error('\n*** SKIPPED: the log-file-size test needs bash (ulimit -f); CI must run it ***\n');

test('with stdout a file over its size limit (EFBIG on every write), requests are still answered', { skip: !hasBash, timeout: 60_000 }, async (t) => {
  const dir = tempDir(t);
  const logFile = join(dir, 'coordinator.log');
  // 16 KiB of log at most: `ulimit -f` counts 1 KiB blocks; writes past it fail with EFBIG
  const child = spawn('bash', ['-c', 'ulimit -f 16; exec "$0" "$1" > "$2"', process.execPath, MAIN, logFile], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'debug', DATABASE_URL: 'memory:', LOG_BUFFER_BYTES: '65536' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  killOnExit(child);
  const exited = once(child, 'exit');
  const end = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  trackRunning(t, end); // it writes its log into the test's directory
  t.after(end);
  const watcher = watch(dir);
  t.after(() => watcher.close());
  const read = () => {
    try {
      return readFileSync(logFile, 'utf8');
    } catch {
      return '';
    }
  };
  // its port is in its log: a port found free beforehand and given to it could be taken meanwhile
  const ready = () => read().split('\n').slice(0, -1).find((l) => l.includes('"msg":"coordinator ready"'));
  while (!ready()) await once(watcher, 'change');
  const url = `http://127.0.0.1:${(JSON.parse(ready()!) as { port: number }).port}`;
  const client = new AgentqClient({ url });
  t.after(() => client.close());
  for (let i = 0; i < 400; i++) assert.equal((await client.health()).status, 'ok'); // ~200 KB of log lines
  assert.ok(Buffer.byteLength(read()) <= 16 * 1024, 'the file stayed within its limit');
  assert.ok((await metricValue(url, 'agentq_log_lines_dropped_total')) > 0);
});
