/** The real `agentq` executable, run as a child process (argv, env, stdout, exit code). */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { openSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CliCommandData, CliEnvelope, CliFailure, type CancelResults, type JobDescriptor } from '@agentq/protocol';
import { coordinator, deadUrl, envelope, type CliRun } from './helpers.js';

const BIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

function agentq(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

describe('the agentq bin', () => {
  it('is a node script with a shebang', () => {
    assert.match(readFileSync(BIN, 'utf8'), /^#!\/usr\/bin\/env node\n/);
  });

  it('--help: exit 0, exit codes documented', async () => {
    const r = await agentq(['--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /Exit codes:/);
  });

  it('usage error: exit 2', async () => {
    const r = await agentq(['wait', '--json']);
    assert.equal(r.code, 2);
    envelope(r, CliFailure);
  });

  it("a global option missing its value after the command: exit 2, and the command's help named", async () => {
    const r = await agentq(['status', 'job_0123456789ab', '--url']);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, "agentq: option '--url <url>' argument missing\nRun 'agentq status --help' for usage.\n");
  });

  it('stdout that cannot be written (a full disk): exit 1 with one line saying so, not a stack trace', async () => {
    const full = openSync('/dev/full', 'w');
    const child = spawn(process.execPath, [BIN, '--help'], { env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', full, 'pipe'] });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const [code] = (await once(child, 'close')) as [number];
    assert.equal(code, 1);
    assert.equal(stderr, 'agentq: cannot write the output: ENOSPC: no space left on device, write\n');
  });

  it('stderr that nobody reads: the exit code still says what happened (5: not found)', async (t) => {
    const { url } = await coordinator(t);
    const child = spawn(process.execPath, [BIN, 'status', 'job_0123456789ab'], {
      env: { PATH: process.env.PATH ?? '', AGENTQ_URL: url },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr!.destroy(); // the reading end is closed: writing to it fails with EPIPE
    const [code] = (await once(child, 'close')) as [number];
    assert.equal(code, 5);
  });

  it('unreachable coordinator: exit 1', async () => {
    const r = await agentq(['list', '--json'], { AGENTQ_URL: await deadUrl() });
    assert.equal(r.code, 1);
    envelope(r, CliFailure);
  });

  it('start then status: exit 0 (accepted), then 3 (still running), then 0 (completed)', async (t) => {
    const c = await coordinator(t);
    const env = { AGENTQ_URL: c.url };
    const start = await agentq(['start', 'alpha', '-p', 'hello', '--json'], env);
    assert.equal(start.code, 0, start.stderr);
    const d = envelope<{ ok: true; data: JobDescriptor }>(start, CliEnvelope(CliCommandData.start)).data;

    const [cmd, ...args] = d.status_command.split(' ');
    assert.equal(cmd, 'agentq');
    const running = await agentq(args, env);
    assert.equal(running.code, 3);

    await c.launcher.claimAndStart();
    await c.launcher.complete(d.job_id, 'hi');
    const done = await agentq(args, env);
    assert.equal(done.code, 0);
    assert.equal(envelope<{ ok: true; data: JobDescriptor }>(done, CliEnvelope(CliCommandData.status)).data.result, 'hi');
  });

  it('cancel of many ids on a coordinator with few connections (MAX_CONNECTIONS): every id gets its outcome', async (t) => {
    const c = await coordinator(t, { maxConnections: 16 });
    const jobs = await c.client.createJobs(
      Array.from({ length: 40 }, (_, i) => ({ type: 'start_session' as const, session_name: `s${i}`, prompt: 'x' })),
    );
    const unknown = Array.from({ length: 300 }, (_, i) => `job_${i.toString(16).padStart(12, '0')}`);
    const ids = [...jobs.map((j) => j.job_id), ...unknown];
    const r = await agentq(['cancel', ...ids, '--json'], { AGENTQ_URL: c.url });
    assert.equal(r.code, 5, r.stdout + r.stderr);
    const data = envelope<{ ok: true; data: CancelResults }>(r, CliEnvelope(CliCommandData.cancel)).data;
    assert.deepEqual(
      data.results.map((x) => [x.job_id, x.outcome]),
      ids.map((id, i) => [id, i < jobs.length ? 'cancelled' : 'not_found']),
    );
    // nothing but the notes of the waits the coordinator asked for (its connections were full)
    assert.match(r.stderr, /^(agentq: too_many_clients: trying again in \d+ s, as the coordinator asks\n)*$/);
  });

  it('wait in a child process ends when the job does', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'x' });
    const waiting = agentq(['wait', job.job_id, '--url', c.url]);
    await c.launcher.claimAndStart();
    await c.launcher.fail(job.job_id, 'nope');
    const r = await waiting;
    assert.equal(r.code, 4);
    assert.match(r.stdout, /failed/);
  });
});
