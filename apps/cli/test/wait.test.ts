import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CliCommandData,
  CliEnvelope,
  CliFailure,
  type CliFailure as Failure,
  type CliWaitResult,
  type JobDescriptor,
} from '@agentq/protocol';
import { InterruptedError } from '../src/index.js';
import { beforeEachCall, cli, coordinator, envelope, whenCalled, type TestCoordinator } from './helpers.js';

const WaitSchema = CliEnvelope(CliCommandData.wait);
const DescriptorSchema = CliEnvelope(CliCommandData.start);

async function createJobs(c: TestCoordinator, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const job = await c.client.createJob({ type: 'start_session', session_name: `s${i}`, prompt: 'work' });
    ids.push(job.job_id);
  }
  return ids;
}

const waitData = (r: { stdout: string; stderr: string; code: number }) =>
  envelope<{ ok: true; data: CliWaitResult }>(r, WaitSchema).data;

describe('agentq wait', () => {
  it('returns the snapshot with exit 3 when the timeout passes first', async (t) => {
    const c = await coordinator(t);
    const [a] = await createJobs(c, 1);
    const r = await cli(c.url, ['wait', a as string, '--timeout', '50ms', '--json']);
    assert.equal(r.code, 3);
    const data = waitData(r);
    assert.equal(data.done, false);
    assert.equal(data.exit_code, 3);
    assert.equal(data.jobs[0]?.status, 'pending');
  });

  it('--timeout 0 answers at once', async (t) => {
    const c = await coordinator(t);
    const ids = await createJobs(c, 2);
    const r = await cli(c.url, ['wait', ...ids, '--all', '--timeout', '0', '--json']);
    assert.equal(r.code, 3);
    assert.equal(waitData(r).jobs.length, 2);
  });

  it('any (default): returns when the first job ends, the others reported still running', async (t) => {
    const c = await coordinator(t);
    const [a, b] = (await createJobs(c, 2)) as [string, string];
    const waiting = cli(c.url, ['wait', a, b, '--json']);
    const claimed = await c.launcher.claimAndStart();
    assert.equal(claimed.job_id, a);
    await c.launcher.complete(a, 'first');
    const r = await waiting;
    assert.equal(r.code, 0);
    const data = waitData(r);
    assert.equal(data.mode, 'any');
    assert.equal(data.done, true);
    assert.deepEqual(
      data.jobs.map((j) => [j.job_id, j.status]),
      [
        [a, 'completed'],
        [b, 'pending'],
      ],
    );
  });

  it('reads one by one the snapshots that did not fit in the coordinator\'s answer (MAX_ANSWER_BYTES)', async (t) => {
    const c = await coordinator(t, { maxAnswerBytes: 1024 });
    const ids: string[] = [];
    for (const n of ['a', 'b', 'c']) ids.push((await c.client.createJob({ type: 'start_session', session_name: n, prompt: n.repeat(2000) })).job_id);
    const pending = waitData(await cli(c.url, ['wait', ...ids, '--all', '--timeout', '0', '--json']));
    assert.deepEqual(pending.jobs.map((j) => [j.job_id, j.status]), ids.map((id) => [id, 'pending']));

    for (let i = 0; i < 3; i++) {
      const job = await c.launcher.claimAndStart();
      await c.launcher.complete(job.job_id, `result ${job.session_name}`);
    }
    const r = await cli(c.url, ['wait', ...ids, '--all', '--timeout', '30s', '--json']);
    assert.equal(r.code, 0, r.stdout);
    const done = waitData(r);
    assert.equal(done.done, true);
    assert.deepEqual(done.jobs.map((j) => [j.job_id, j.result]), [[ids[0], 'result a'], [ids[1], 'result b'], [ids[2], 'result c']]);
  });

  it('any: a job that ends between the snapshot and the long-poll still ends the wait at once', async (t) => {
    const c = await coordinator(t);
    const [a, b] = (await createJobs(c, 2)) as [string, string];
    await c.launcher.claimAndStart();
    // the CLI's first call takes the snapshot (a running); a completes before its second call,
    // the long-poll, reaches the coordinator
    const answers = beforeEachCall(c.core, 'waitJobs', async (n) => {
      if (n === 2) await c.launcher.complete(a, 'ended in the gap');
    });
    const r = await cli(c.url, ['wait', a, b, '--timeout', '30s', '--json']);
    // the long-poll was ended by a (at once), not by the timeout
    assert.equal(answers.length, 2);
    assert.equal((answers[1] as { done: boolean }).done, true);
    assert.equal(r.code, 0, r.stdout);
    const data = waitData(r);
    assert.equal(data.done, true);
    assert.deepEqual(
      data.jobs.map((j) => [j.job_id, j.status]),
      [
        [a, 'completed'],
        [b, 'pending'],
      ],
    );
    assert.equal(data.jobs[0]?.result, 'ended in the gap');
  });

  it('any: exits with the outcome of the job that ended (failed → 4)', async (t) => {
    const c = await coordinator(t);
    const [a, b] = (await createJobs(c, 2)) as [string, string];
    const waiting = cli(c.url, ['wait', b, a]);
    await c.launcher.claimAndStart();
    await c.launcher.fail(a, 'nope');
    const r = await waiting;
    assert.equal(r.code, 4, r.stderr);
    assert.match(r.stdout, /1 of 2 job\(s\) finished/);
    assert.match(r.stdout, new RegExp(`still running: agentq wait ${b}`));
  });

  it('--all: waits for every job; the first one (in argument order) that did not complete decides', async (t) => {
    const c = await coordinator(t);
    const [a, b] = (await createJobs(c, 2)) as [string, string];
    const waiting = cli(c.url, ['wait', '--all', a, b, '--json']);
    await c.launcher.claimAndStart();
    await c.launcher.complete(a);
    // b is still pending: the wait must go on. Cancel it (pending → stopped at once).
    await c.client.stopJob(b);
    const r = await waiting;
    assert.equal(r.code, 6);
    const data = waitData(r);
    assert.equal(data.mode, 'all');
    assert.equal(data.done, true);
    assert.deepEqual(
      data.jobs.map((j) => j.status),
      ['completed', 'stopped'],
    );
  });

  it('--all with a timeout: exit 3 while any job is still running', async (t) => {
    const c = await coordinator(t);
    const [a, b] = (await createJobs(c, 2)) as [string, string];
    await c.client.stopJob(a);
    const r = await cli(c.url, ['wait', '--all', a, b, '--timeout', '100ms', '--json']);
    assert.equal(r.code, 3);
    const data = waitData(r);
    assert.equal(data.done, false);
    assert.deepEqual(
      data.jobs.map((j) => j.terminal),
      [true, false],
    );
  });

  it('reports unknown ids and ignores them; exit 5 only if no id is known', async (t) => {
    const c = await coordinator(t);
    const [a] = (await createJobs(c, 1)) as [string];
    await c.client.stopJob(a);
    const mixed = await cli(c.url, ['wait', 'job_0123456789ab', a, '--json']);
    assert.equal(mixed.code, 6);
    assert.deepEqual(waitData(mixed).not_found, ['job_0123456789ab']);

    const none = await cli(c.url, ['wait', 'job_0123456789ab', 'job_0123456789ac', '--json']);
    assert.equal(none.code, 5);
    assert.equal(envelope<Failure>(none, CliFailure).error.code, 'job_not_found');
  });

  it('interrupted before the coordinator answered: exit 1, code interrupted', async (t) => {
    const c = await coordinator(t);
    const [a] = (await createJobs(c, 1)) as [string];
    const interrupt = new AbortController();
    interrupt.abort(new InterruptedError());
    const r = await cli(c.url, ['wait', a, '--json'], { signal: interrupt.signal });
    assert.equal(r.code, 1);
    assert.equal(envelope<Failure>(r, CliFailure).error.code, 'interrupted');
  });

  it('Ctrl-C reads the jobs once more: one that started during the wait is shown running, one that ended as ended', async (t) => {
    const c = await coordinator(t);
    const [a, b] = (await createJobs(c, 2)) as [string, string];
    const parked = whenCalled(c.core, 'waitJobs', (_ids: string[], timeoutMs: number) => timeoutMs > 0);
    const interrupt = new AbortController();
    const waiting = cli(c.url, ['wait', a, b, '--all', '--json'], { signal: interrupt.signal });
    await parked;
    const started = await c.launcher.claimAndStart();
    const other = started.job_id === a ? b : a;
    await c.client.stopJob(other);
    interrupt.abort(new InterruptedError());
    const r = await waiting;
    assert.equal(r.code, 3, r.stdout + r.stderr);
    const data = waitData(r);
    assert.equal(data.done, false);
    assert.deepEqual(
      Object.fromEntries(data.jobs.map((j) => [j.job_id, j.status])),
      { [started.job_id]: 'running', [other]: 'stopped' },
    );
  });

  it('more than 1000 ids: one long-poll per 1000, at once; the first job to end in any group ends the wait', async (t) => {
    const c = await coordinator(t);
    const bodies = (from: number, n: number) =>
      Array.from({ length: n }, (_, i) => ({ type: 'start_session' as const, session_name: `many-${from + i}`, prompt: 'p' }));
    const ids = [...(await c.client.createJobs(bodies(0, 1000))), ...(await c.client.createJobs(bodies(1000, 2)))].map((j) => j.job_id);

    const snapshot = await cli(c.url, ['wait', ...ids, '--all', '--timeout', '0', '--json']);
    assert.equal(snapshot.code, 3, snapshot.stdout);
    assert.deepEqual(waitData(snapshot).jobs.map((j) => j.job_id), ids);

    // both groups parked (no limit, so the first group's hour-long poll must be cut): the last job ends
    const parked = whenCalled(c.core, 'waitJobs', (_ids: string[], timeoutMs: number) => timeoutMs > 0, 2);
    const waiting = cli(c.url, ['wait', ...ids, '--timeout', 'none', '--json']);
    await parked;
    await c.client.stopJob(ids.at(-1)!);
    const r = await waiting;
    assert.equal(r.code, 6, r.stdout);
    const data = waitData(r);
    assert.equal(data.done, true);
    assert.equal(data.jobs.length, 1002);
    assert.deepEqual(data.jobs.filter((j) => j.terminal).map((j) => [j.job_id, j.status]), [[ids.at(-1), 'stopped']]);
  });

  it('wait on one job prints its descriptor as text', async (t) => {
    const c = await coordinator(t);
    const [a] = (await createJobs(c, 1)) as [string];
    const waiting = cli(c.url, ['wait', a]);
    await c.launcher.claimAndStart();
    await c.launcher.complete(a, 'all good');
    const r = await waiting;
    assert.equal(r.code, 0);
    assert.match(r.stdout, new RegExp(`^${a}  completed\\n`));
    assert.match(r.stdout, /result:\n {4}all good/);
  });
});

describe('agentq start --wait', () => {
  it('blocks until the job ends and exits with its outcome; stdout holds only the result', async (t) => {
    const c = await coordinator(t);
    const starting = cli(c.url, ['start', 'alpha', '-p', 'go', '--wait', '--json']);
    const job = await c.launcher.claimAndStart();
    await c.launcher.complete(job.job_id, 'finished');
    const r = await starting;
    assert.equal(r.code, 0);
    assert.equal(r.stderr, '', 'no progress when stderr is not a TTY');
    const d = envelope<{ ok: true; data: JobDescriptor }>(r, DescriptorSchema).data;
    assert.equal(d.job_id, job.job_id);
    assert.equal(d.status, 'completed');
    assert.equal(d.result, 'finished');
  });

  it('exits 7 when the job times out while waited for', async (t) => {
    const c = await coordinator(t);
    const r = await cli(c.url, ['start', 'alpha', '-p', 'go', '--timeout', '50ms', '--wait']);
    assert.equal(r.code, 7);
    assert.match(r.stdout, /timed_out/);
  });

  it('--wait-timeout stops waiting with exit 3; the job keeps running', async (t) => {
    const c = await coordinator(t);
    const r = await cli(c.url, ['start', 'alpha', '-p', 'go', '--wait-timeout', '50ms', '--json']);
    assert.equal(r.code, 3);
    const d = envelope<{ ok: true; data: JobDescriptor }>(r, DescriptorSchema).data;
    assert.equal(d.terminal, false);
    assert.equal((await c.client.getJob(d.job_id)).status, 'pending');
  });

  it('on a TTY, shows progress on stderr (status changes, elapsed) and nothing else on stdout', async (t) => {
    const c = await coordinator(t);
    const starting = cli(c.url, ['start', 'alpha', '-p', 'go', '--wait', '--json'], { isTTY: true });
    const job = await c.launcher.claimAndStart();
    await c.launcher.fail(job.job_id, 'broken');
    const r = await starting;
    assert.equal(r.code, 4);
    // pending, or claimed at once when the launcher's poll was already parked
    assert.match(r.stderr, /waiting: job_[0-9a-f]{12} (pending|claimed) · \d+(ms|s)/);
    assert.match(r.stderr, new RegExp(`${job.job_id}  \\w+ → failed  \\(`));
    assert.equal(envelope<{ ok: true; data: JobDescriptor }>(r, DescriptorSchema).data.status, 'failed');
  });

  it('on a TTY, the progress shows every status the job went through, running included', async (t) => {
    const c = await coordinator(t);
    const starting = cli(c.url, ['start', 'alpha', '-p', 'go', '--wait'], { isTTY: true });
    const job = await c.launcher.claimAndStart();
    await c.launcher.complete(job.job_id, 'ok');
    const r = await starting;
    assert.equal(r.code, 0);
    // each line as a terminal shows it: what follows the last "clear line" on it
    const lines = r.stderr.split('\n').map((l) => l.replace(/^[\s\S]*\r\x1b\[K/, ''));
    const changes = lines.filter((l) => l.startsWith(job.job_id)).map((l) => l.replace(/ {2}\(.*$/, ''));
    // the first line is the status the job had when the CLI first saw it (pending, or claimed
    // when the launcher's poll was already waiting); then every change, in order
    assert.deepEqual(changes.slice(-2), [`${job.job_id}  claimed → running`, `${job.job_id}  running → completed`]);
    assert.doesNotMatch(r.stderr, /0\/0/);
  });

  it('the progress of wait never starts with "0/0 jobs finished"', async (t) => {
    const c = await coordinator(t);
    const a = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const b = await c.client.createJob({ type: 'start_session', session_name: 'b', prompt: 'x' });
    const r = await cli(c.url, ['wait', a.job_id, b.job_id, '--all', '--timeout', '50ms'], { isTTY: true });
    assert.equal(r.code, 3);
    assert.doesNotMatch(r.stderr, /0\/0/);
    assert.match(r.stderr, /waiting: 0\/2 jobs finished/);
    assert.match(r.stderr, new RegExp(`${a.job_id}  pending`));
  });

  it('wait --timeout none waits without a limit', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const waiting = cli(c.url, ['wait', job.job_id, '--timeout', 'none', '--json']);
    await c.launcher.claimAndStart();
    await c.launcher.complete(job.job_id);
    assert.equal((await waiting).code, 0);
  });

  it('an interrupt (Ctrl-C) stops waiting: last snapshot, exit 3, the job keeps running', async (t) => {
    const c = await coordinator(t);
    const interrupt = new AbortController();
    // the first progress draw happens once the job exists and the wait begins
    const r = await cli(c.url, ['start', 'alpha', '-p', 'go', '--wait', '--json'], {
      isTTY: true,
      signal: interrupt.signal,
      onStderr: () => interrupt.abort(new Error('interrupted')),
    });
    assert.equal(r.code, 3);
    const d = envelope<{ ok: true; data: JobDescriptor }>(r, DescriptorSchema).data;
    assert.equal(d.status, 'pending');
    assert.equal((await c.client.getJob(d.job_id)).terminal, false);
  });
});
