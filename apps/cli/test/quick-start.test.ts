/**
 * The first steps a newcomer takes, run as they would run them: `npm start` (scripts/start.mjs,
 * which starts a real coordinator and a demo launcher), the banner's curl example, then the
 * README's quick start with the real `agentq` executable.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, type IncomingMessage } from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { goneOrKilledAfter, standInTestProcess, tempDir, trackRunning } from '@agentq/test-support';
import type { CliRun } from './helpers.js';
import { spawnNpmStart, until, type Started } from './npm-start.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const AGENTQ = `${ROOT}apps/cli/bin/agentq.js`;

/** `npm start`'s script on a fresh database; stopped with Ctrl+C after the test. */
function npmStart(t: TestContext, env: Record<string, string>, o: { underShell?: boolean } = {}): Started {
  // a fresh database: the state of the developer's own `npm start` (./data) is not the test's;
  // removed once the script has stopped (it writes its database there until then)
  const dir = tempDir(t, 'agentq-quick-start-');
  const started = spawnNpmStart(ROOT, { DATABASE_URL: `sqlite:${join(dir, 'agentq.db')}`, ...env }, o);
  const stop = async () => {
    if (started.child.exitCode === null && started.child.signalCode === null) {
      started.child.kill('SIGINT');
      await started.exited;
    }
  };
  trackRunning(t, stop);
  t.after(stop);
  return started;
}

/**
 * Once `script` (npm start's script, pid) is running with its launcher ready: its processes, the
 * script first, then its coordinator and launcher (in process groups of their own) and the
 * launcher's reaper; `allGone` resolves once every one of them is gone.
 */
async function processesOf(t: TestContext, started: Started, script: number): Promise<{ allGone: Promise<unknown> }> {
  await until(started, 'Ctrl+C stops both.');
  const ready = await until(started, 'launcher ready');
  const reaper = Number(/"reaper_pid":(\d+)/.exec(ready)?.[1]);
  const children = readFileSync(`/proc/${script}/task/${script}/children`, 'utf8').trim().split(/\s+/).map(Number);
  assert.equal(children.length, 2, 'the script runs a coordinator and a launcher');
  assert.ok(reaper > 0, ready);
  const pids = [script, ...children, reaper];
  const allGone = Promise.all(pids.map((pid) => goneOrKilledAfter(t, pid, `process ${pid} of npm start`)));
  return { allGone };
}

/** Split a README command line into words: "double quotes" group, a # starts a comment. */
function words(line: string): string[] {
  return [...line.replace(/\s+#.*$/, '').matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? (m[2] as string));
}

function agentq(args: string[], env: Record<string, string>): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [AGENTQ, ...args], { env: { PATH: process.env.PATH ?? '', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

describe('quick start', () => {
  it("the README's `npx agentq start` works right after the banner's curl example", async (t) => {
    // the launcher takes AGENTQ_MAX_JOBS as a launcher started by hand does (default 2)
    const started = npmStart(t, { PORT: '0', AGENTQ_MAX_JOBS: '3' });
    const banner = await until(started, 'Ctrl+C stops both.');
    assert.match(banner, /agentq is running/);
    const url = /API +(http:\/\/\S+)/.exec(banner)?.[1] as string;

    // 1. the banner's curl example, as printed
    const body = /-d '(\{.*\})'/.exec(banner)?.[1] as string;
    const created = await fetch(`${url}/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    assert.equal(created.status, 201, await created.clone().text());

    // 2. the README's quick start, word for word
    const readme = readFileSync(`${ROOT}README.md`, 'utf8');
    const line = /^npx agentq start .*$/m.exec(readme)?.[0] as string;
    assert.ok(line, 'the README has a quick start with npx agentq start');
    const [npx, bin, ...args] = words(line);
    assert.deepEqual([npx, bin], ['npx', 'agentq']);
    const r = await agentq(args, { AGENTQ_URL: url });
    assert.equal(r.code, 0, `${line}\n${r.stdout}${r.stderr}`);
    assert.match(r.stdout, /completed/);
    assert.match(r.stdout, /Demo agent received/);
    const { launchers } = (await (await fetch(`${url}/launchers`)).json()) as { launchers: Array<{ max_jobs: number | null }> };
    assert.deepEqual(launchers.map((l) => l.max_jobs), [3]);

    // Ctrl+C stops both, cleanly
    started.child.kill('SIGINT');
    assert.equal(await started.exited, 0);
  });

  it('npm start on a port another server holds fails clearly, and attaches no launcher to it', async (t) => {
    const requests: string[] = [];
    const other = createServer((req: IncomingMessage, res) => {
      requests.push(`${req.method} ${req.url}`);
      // a server that looks healthy to anyone who only asks /health
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    });
    other.listen(0, '127.0.0.1');
    await once(other, 'listening');
    t.after(() => new Promise<void>((resolve) => other.close(() => resolve())));
    const { port } = other.address() as AddressInfo;

    const started = npmStart(t, { PORT: String(port) });
    const code = await started.exited;
    assert.equal(code, 1);
    assert.match(
      started.stderr(),
      new RegExp(`agentq could not start: port ${port} on 127\\.0\\.0\\.1 is already in use`),
    );
    assert.doesNotMatch(started.stdout(), /agentq is running/);
    assert.deepEqual(requests, [], 'nothing of agentq talked to the other server');
  });

  it('ends its coordinator and launcher with it when the test process that ran it is ended (its file out of time)', async (t) => {
    const database = `sqlite:${join(tempDir(t, 'agentq-quick-start-'), 'agentq.db')}`;
    const testProcess = standInTestProcess(
      t,
      `import { spawnNpmStart, until } from '${new URL('./npm-start.js', import.meta.url).href}';
      const started = spawnNpmStart(${JSON.stringify(ROOT)}, { PORT: '0', DATABASE_URL: ${JSON.stringify(database)} });
      await until(started, 'Ctrl+C stops both.');
      await until(started, 'launcher ready');
      console.log(started.child.pid);`,
    );
    // idle from then on: the script writes nothing more (a write to the pipe of the ended test
    // process would end it, and it would end them: that is not what is checked here)
    const script = Number(await testProcess.line());
    // its coordinator and launcher, in process groups of their own: not ours to wait for
    const children = readFileSync(`/proc/${script}/task/${script}/children`, 'utf8').trim().split(/\s+/).map(Number);
    const allGone = Promise.all(
      [script, ...children].map((pid) => goneOrKilledAfter(t, pid, pid === script ? "npm start's script" : "a child of npm start's script")),
    );
    assert.equal(children.length, 2, 'the script runs a coordinator and a launcher');
    await testProcess.end();
    await allGone;
  });

  it('stops its coordinator, its launcher and the launcher\'s reaper when its terminal is closed (SIGHUP)', { timeout: 120_000 }, async (t) => {
    const started = npmStart(t, { PORT: '0' });
    const { allGone } = await processesOf(t, started, started.child.pid!);
    started.child.kill('SIGHUP');
    assert.equal(await started.exited, 0, started.stderr());
    await allGone;
  });

  it('stops its coordinator, its launcher and the launcher\'s reaper when the shell npm runs it under is killed (kill -TERM <npm pid>)', { timeout: 120_000 }, async (t) => {
    // npm passes a SIGTERM on to its shell, which dies of it and passes nothing on
    const started = npmStart(t, { PORT: '0' }, { underShell: true });
    await until(started, 'launcher ready');
    const shell = started.child.pid!;
    const [script] = readFileSync(`/proc/${shell}/task/${shell}/children`, 'utf8').trim().split(/\s+/).map(Number);
    const { allGone } = await processesOf(t, started, script!);
    started.child.kill('SIGTERM');
    await allGone;
    assert.match(started.stderr(), /is gone; stopping/);
  });
});
