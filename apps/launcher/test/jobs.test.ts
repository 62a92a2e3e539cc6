import assert from 'node:assert/strict';
import { test } from 'node:test';
import { realpathSync } from 'node:fs';
import { MAX_EVENT_LINE_BYTES } from '../src/executor-process.js';
import { startTimeOf } from '../src/lifeline/proc.js';
import { join } from 'node:path';
import {
  alive,
  captureLog,
  controlServer,
  coordinator,
  gone,
  launcher,
  outputOf,
  script,
  settled,
  tempDir,
} from './helpers.js';
import { olderThanOutputWindow, proxy } from './proxy.js';

test('a job that succeeds is reported completed with its result, output and executor session id', async (t) => {
  const { c, client } = await coordinator(t);
  const { id } = await launcher(t, c.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'ok',
    prompt: script([
      { say: 'plain line' },
      { event: { type: 'session', session_id: 'sess-1' } },
      { event: { type: 'output', text: 'event text\n' } },
      { event: { type: 'something_newer', x: 1 } },
      { event: { type: 'result', text: 'the answer' } },
    ]),
  });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'the answer');
  assert.equal(done.launcher_id, id);
  assert.equal(done.executor_session_id, 'sess-1');
  // unknown event types are skipped, not printed
  assert.equal(await outputOf(client, job.job_id), 'plain line\nevent text\n');
});

test('a job that fails is reported failed with the exit code and the tail of stderr', async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(t, c.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'fails',
    prompt: script([{ say: 'working' }, { stderr: 'first problem' }, { stderr: 'fatal: disk on fire' }, { exit: 3 }]),
  });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.match(done.error ?? '', /exited with code 3/);
  assert.match(done.error ?? '', /fatal: disk on fire/);
  assert.equal(await outputOf(client, job.job_id), 'working\n');
});

test('a character of the stderr tail split between two reads arrives whole in the failure message', async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(t, c.url);
  const line = Buffer.from('Fehler: Datei übergroß\n');
  const cut = line.indexOf(Buffer.from('ü')) + 1; // between the two bytes of ü
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'split-stderr',
    prompt: script([
      { stderrBytes: line.subarray(0, cut).toString('base64') },
      // the launcher reads the first part on its own (the outcome does not depend on it)
      { sleep: 200 },
      { stderrBytes: line.subarray(cut).toString('base64') },
      { exit: 2 },
    ]),
  });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error, 'executor exited with code 2; stderr:\nFehler: Datei übergroß');
});

test("an executor's error event becomes the failure message", async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(t, c.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'error-event',
    prompt: script([{ event: { type: 'error', message: 'model quota exceeded' } }, { exit: 1 }]),
  });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.match(done.error ?? '', /^model quota exceeded/);
});

test('a result or error event with invalid optional fields still counts, without them: its answer is not printed as output and lost', async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(t, c.url);
  const [nulls, partial, code] = await client.createJobs([
    // what a Python executor writes for costs it does not know: json.dumps(None)
    {
      type: 'start_session',
      session_name: 'null-cost',
      prompt: script([{ event: { type: 'result', text: 'the answer', cost_usd: null, usage: null, num_turns: 2 } }]),
    },
    // a usage with two of its four counts
    {
      type: 'start_session',
      session_name: 'partial-usage',
      prompt: script([{ event: { type: 'result', text: 'the answer', usage: { input_tokens: 10, output_tokens: 5 }, cost_usd: 0.5 } }]),
    },
    // an error code off the pattern
    {
      type: 'start_session',
      session_name: 'bad-code',
      prompt: script([{ event: { type: 'error', message: 'quota exhausted', code: 'QuotaExhausted' } }, { exit: 1 }]),
    },
  ]);
  const n = await settled(client, nulls!.job_id);
  assert.equal(n.status, 'completed');
  assert.equal(n.result, 'the answer');
  assert.equal(n.num_turns, 2);
  assert.equal(n.cost_usd, null);
  assert.equal(await outputOf(client, nulls!.job_id), '');
  const p = await settled(client, partial!.job_id);
  assert.equal(p.result, 'the answer');
  assert.equal(p.cost_usd, 0.5);
  assert.equal(p.usage, null);
  const e = await settled(client, code!.job_id);
  assert.equal(e.status, 'failed');
  assert.equal(e.error, 'quota exhausted (exit code 1)');
  assert.equal(e.error_code, null);
  assert.equal(await outputOf(client, code!.job_id), '');
});

test('an executor that crashes mid-output: the output so far is kept and the job fails with the signal', async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(t, c.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'crash',
    prompt: script([{ say: 'line 1' }, { say: 'line 2' }, { stderr: 'about to crash' }, { kill: 'SIGKILL' }]),
  });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.match(done.error ?? '', /killed by SIGKILL/);
  assert.match(done.error ?? '', /about to crash/);
  assert.equal(await outputOf(client, job.job_id), 'line 1\nline 2\n');
});

// "exit code 137" or "killed by SIGTERM" told a user nothing of what had happened (an OOM kill, a
// stop by someone other than the launcher)
test('an executor ended by a signal, or exiting with 128 + its number as a shell reports one, fails the job saying what the signal usually means', async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(t, c.url);
  const [term, oom] = await client.createJobs([
    { type: 'start_session', session_name: 'terminated', prompt: script([{ kill: 'SIGTERM' }]) },
    { type: 'start_session', session_name: 'wrapper-of-oom-kill', prompt: script([{ stderr: 'Killed' }, { exit: 137 }]) },
  ]);
  assert.equal(
    (await settled(client, term!.job_id)).error,
    'executor killed by SIGTERM (asked to stop: by a user, a service manager or a shutdown); no stderr',
  );
  assert.equal(
    (await settled(client, oom!.job_id)).error,
    "executor exited with code 137 (128 + 9: SIGKILL, which cannot be caught: the kernel's OOM killer when memory ran out, or kill -9); stderr:\nKilled",
  );
});

test('a missing project_dir inside the project roots fails the job with a clear error', async (t) => {
  const { c, client } = await coordinator(t);
  const root = realpathSync(tempDir(t));
  await launcher(t, c.url, { projectRoots: [root] });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'nodir',
    project_dir: join(root, 'not-made-yet'),
    prompt: script([]),
  });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error, `project_dir ${join(root, 'not-made-yet')} does not exist on this host`);
});

test('executors get a clean environment with the job variables, in the project dir', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  process.env['AGENTQ_TEST_SECRET'] = 'must-not-leak';
  process.env['AGENTQ_TEST_PASSED'] = 'passed-on';
  t.after(() => {
    delete process.env['AGENTQ_TEST_SECRET'];
    delete process.env['AGENTQ_TEST_PASSED'];
  });
  // the job runs in the second of the launcher's roots
  const cwd = realpathSync(process.cwd());
  const { id } = await launcher(t, c.url, { passEnv: ['AGENTQ_TEST_PASSED'], projectRoots: [realpathSync(tempDir(t)), cwd] });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'env',
    agent_name: 'researcher',
    project_dir: cwd,
    prompt: script([{ hello: true }], control),
  });
  const hello = await control.next();
  assert.equal(hello.cwd, cwd);
  assert.equal(hello.env['AGENTQ_JOB_ID'], job.job_id);
  assert.equal(hello.env['AGENTQ_SESSION_NAME'], 'env');
  assert.equal(hello.env['AGENTQ_AGENT_NAME'], 'researcher');
  assert.equal(hello.env['AGENTQ_COORDINATOR_URL'], c.url);
  assert.equal(hello.env['AGENTQ_LAUNCHER_ID'], id);
  assert.equal(hello.env['AGENTQ_PROJECT_DIR'], cwd);
  // how much of the job's output the coordinator keeps (its JOB_OUTPUT_MAX_BYTES, 1 MiB by default)
  assert.equal(hello.env['AGENTQ_JOB_OUTPUT_MAX_BYTES'], String(1024 * 1024));
  assert.equal(hello.env['AGENTQ_TEST_PASSED'], 'passed-on');
  assert.equal(hello.env['AGENTQ_TEST_SECRET'], undefined);
  assert.equal(hello.env['PATH'], process.env['PATH']);
  assert.equal((await settled(client, job.job_id)).status, 'completed');
});

test('the concurrency limit is honoured: jobs beyond --max-jobs wait in the queue', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  await launcher(t, c.url, { maxJobs: 2 });
  const jobs = [];
  for (let i = 0; i < 4; i++) {
    jobs.push(
      await client.createJob({
        type: 'start_session',
        session_name: `limit-${i}`,
        prompt: script([{ hello: true }, { await: true }], control),
      }),
    );
  }
  const first = [await control.next(), await control.next()];
  // two executors hold both slots: the launcher polls with capacity 0, so the rest stay pending
  const pending = await client.listJobs({ status: 'pending' });
  assert.equal(pending.jobs.length, 2);
  assert.equal(control.connected, 2);

  // a freed slot is filled at once (the parked capacity-0 poll is replaced), never exceeding 2
  first[0]!.release();
  const third = await control.next();
  first[1]!.release();
  const fourth = await control.next();
  third.release();
  fourth.release();
  for (const job of jobs) assert.equal((await settled(client, job.job_id)).status, 'completed');
  assert.equal(control.maxConnected, 2);
});

test('a stopped job whose executor ignores SIGTERM is killed with SIGKILL and reported stopped', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  await launcher(t, c.url, { killGraceMs: 300 });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'stubborn',
    prompt: script([{ ignore: 'SIGTERM' }, { say: 'ignoring SIGTERM' }, { hello: true }, { await: true }], control),
  });
  const hello = await control.next();
  const stop = await client.stopJob(job.job_id);
  assert.equal(stop.outcome, 'stopping');
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'stopped');
  await hello.closed;
  await gone(hello.pid, 'the executor');
  await gone(-hello.pid, "the executor's process group");
});

test('external deregistration: the launcher takes no more jobs, lets the running one finish, exits', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const { launcher: l, id, done } = await launcher(t, c.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'finishing',
    prompt: script([{ hello: true }, { await: true }, { event: { type: 'result', text: 'finished' } }], control),
  });
  const hello = await control.next();
  await client.deleteLauncher(id);
  hello.release();
  assert.equal(await done, 'deregistered');
  const finished = await settled(client, job.job_id);
  assert.equal(finished.status, 'completed');
  assert.equal(finished.result, 'finished');
  assert.equal(l.launcherId, id, 'it did not register again');
});

test('with --stop-on-exit, deregistration stops the running jobs and reports them failed', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const { id, done } = await launcher(t, c.url, { stopOnExit: true });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'cut-short',
    prompt: script([{ hello: true }, { await: true }], control),
  });
  await control.next();
  await client.deleteLauncher(id);
  assert.equal(await done, 'deregistered');
  const finished = await settled(client, job.job_id);
  assert.equal(finished.status, 'failed');
  assert.match(finished.error ?? '', /deregistered/);
});

test('a stop request for a job this launcher is not running is answered with `stopped`', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const { id } = await launcher(t, c.url, { maxJobs: 1 });
  // fill the launcher's only slot, so its poll parks with capacity 0
  const busy = await client.createJob({
    type: 'start_session',
    session_name: 'busy',
    prompt: script([{ hello: true }, { await: true }], control),
  });
  const hello = await control.next();
  // claim a second job under the launcher's id behind its back: the coordinator thinks it runs it
  const ghost = await client.createJob({ type: 'start_session', session_name: 'ghost', prompt: script([]) });
  const claimed = await client.poll(id, { capacity: 1, holdSeconds: 1 });
  assert.equal(claimed?.job?.job_id, ghost.job_id);
  assert.equal((await client.stopJob(ghost.job_id)).outcome, 'stopping');
  const stopped = await settled(client, ghost.job_id);
  assert.equal(stopped.status, 'stopped');
  hello.release();
  assert.equal((await settled(client, busy.job_id)).status, 'completed');
});

test('large multi-byte output arrives intact across several batches', async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(t, c.url);
  // 200 KB in one line: split into several output reports, never inside a surrogate pair
  const line = 'é漢😀x'.repeat(20_000);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'big-output',
    prompt: script([{ say: line }, { say: 'end' }]),
  });
  assert.equal((await settled(client, job.job_id)).status, 'completed');
  const out = await client.getOutput(job.job_id, { offset: 0, limit_bytes: 1024 * 1024 });
  assert.equal(out.output, `${line}\nend\n`);
  assert.equal(out.total_bytes, Buffer.byteLength(`${line}\nend\n`));
});

test('an executor that leaves a daemon holding its stdout still ends: the job is reported completed with its result', async (t) => {
  // registered first so that it runs first: the daemon goes even if the launcher's cleanup hangs
  let daemonPid: number | undefined;
  let daemonStart: string | null = null;
  t.after(() => {
    // not our child: its id is only killed while it is still the daemon (same start time), not a
    // process that was given the id after the daemon ended
    if (daemonPid !== undefined && alive(daemonPid) && startTimeOf(daemonPid) === daemonStart) process.kill(daemonPid, 'SIGKILL');
  });
  const { c, client } = await coordinator(t);
  const { log, waitFor } = captureLog();
  await launcher(t, c.url, {}, { log, pipeDrainMs: 200 });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'daemonises',
    prompt: script([{ event: { type: 'result', text: 'done, and a daemon left behind' } }, { daemon: true }]),
  });
  const said = await waitFor((l) => /^daemon \d+$/.test(String(l['stderr'])));
  daemonPid = Number(String(said['stderr']).split(' ')[1]);
  daemonStart = startTimeOf(daemonPid);

  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'done, and a daemon left behind');
  // the daemon is outside the executor's process group: it was not killed with it, and it is what
  // held the pipes open
  assert.ok(alive(daemonPid), 'the daemon is still running');
  await waitFor((l) => /kept its output open/.test(String(l['msg'])));
});

test('a result event over a megabyte is read whole; one over MAX_EVENT_LINE_BYTES fails the job instead of passing for output', async (t) => {
  const { c, client } = await coordinator(t, { maxPromptBytes: 4 * 1024 * 1024, outputMaxBytes: 256 * 1024 });
  await launcher(t, c.url);
  const [big, tooBig] = await client.createJobs([
    { type: 'start_session', session_name: 'big-result', prompt: script([{ bigResult: 3_000_000 }]) },
    { type: 'start_session', session_name: 'too-big', prompt: script([{ bigResult: MAX_EVENT_LINE_BYTES + 1 }]) },
  ]);
  const ok = await settled(client, big!.job_id);
  assert.equal(ok.status, 'completed');
  assert.equal(ok.result?.length, 3_000_000);
  assert.equal(await outputOf(client, big!.job_id), '', 'the event is not output');
  const failed = await settled(client, tooBig!.job_id);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.error_code, 'executor_event_too_large');
  // the limit, and where what the executor printed as output is (it said "longer than 16777216
  // bytes ... cannot be reported", and no more)
  assert.match(failed.error ?? '', /^the executor printed an event line over the 16 MiB an executor event may carry/);
  assert.ok(failed.error!.includes(`GET /jobs/${tooBig!.job_id}/output, \`agentq output ${tooBig!.job_id}\``), failed.error!);
  // how much of that output the coordinator keeps: the figure it gave ("1 MiB by default" was
  // said whatever the coordinator's JOB_OUTPUT_MAX_BYTES)
  assert.ok(failed.error!.endsWith("(the coordinator keeps the newest 262144 bytes of a job's output (JOB_OUTPUT_MAX_BYTES))"), failed.error!);
  assert.equal(await outputOf(client, tooBig!.job_id), '', 'nor is a piece of it');
});

test('an event line over MAX_EVENT_LINE_BYTES from a coordinator that does not say how much output it keeps: the error names the setting and its default', async (t) => {
  const { c, client } = await coordinator(t);
  const px = await proxy(t, c.url, undefined, olderThanOutputWindow);
  await launcher(t, px.url);
  const job = await client.createJob({ type: 'start_session', session_name: 'too-big-older', prompt: script([{ bigResult: MAX_EVENT_LINE_BYTES + 1 }]) });
  const failed = await settled(client, job.job_id);
  assert.equal(failed.error_code, 'executor_event_too_large');
  assert.ok(failed.error!.endsWith("(the coordinator keeps the newest JOB_OUTPUT_MAX_BYTES of a job's output, 1 MiB by default)"), failed.error!);
});

test('a job whose executor cannot be spawned (a NUL in a value of its environment) fails instead of staying running', async (t) => {
  const { c, client } = await coordinator(t);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'older',
    agent_name: 'agent',
    prompt: script([{ event: { type: 'result', text: 'never' } }]),
  });
  // The coordinator refuses the NUL character in a name now, but a row an older version stored
  // may hold one: the name goes into the executor's environment (AGENTQ_AGENT_NAME), where
  // node's spawn throws at once on a NUL byte rather than emitting 'error'
  await c.core.store.transaction((tx) => tx.updateJob(job.job_id, { agentName: 'age\u0000nt' }));
  // one slot: the job after it runs only if that slot was freed
  await launcher(t, c.url, { maxJobs: 1 });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.match(done.error ?? '', /^could not start executor .*AGENTQ_AGENT_NAME.*null bytes/s);
  const next = await client.createJob({
    type: 'start_session',
    session_name: 'after-nul',
    prompt: script([{ event: { type: 'result', text: 'ran' } }]),
  });
  assert.equal((await settled(client, next.job_id)).result, 'ran');
});
